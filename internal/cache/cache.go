// Package cache keeps what was read from a store for a short time, so that
// a hot path does not read the same record on every request.
package cache

import (
	"sync"
	"time"
)

// TTL caches values for a fixed time after they were read. Concurrent
// misses of one key share one read (single flight): when a popular entry
// expires under load, the store is read once, not once per request. Delete and
// DeleteFunc drop entries at once, and keep reads that were in flight from
// caching what they found: a read that began before a change to the store
// may have read the value the change replaced. It is safe for concurrent
// use.
type TTL[K comparable, V any] struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[K]entry[V]
	// reading counts the reads in flight per key; stale marks the keys
	// deleted while one was (their reads must not be cached); gen counts
	// DeleteFunc calls, which make every read then in flight stale.
	reading map[K]int
	stale   map[K]bool
	gen     uint64
	// flights are the reads in flight, shared by concurrent misses.
	flights map[K]*flight[V]
}

type flight[V any] struct {
	done chan struct{}
	v    V
	err  error
}

type entry[V any] struct {
	v     V
	until time.Time
}

// New returns a cache that keeps a value for ttl and at most max values
// (past max it starts over, which is always safe).
func New[K comparable, V any](ttl time.Duration, max int) *TTL[K, V] {
	return &TTL[K, V]{ttl: ttl, max: max, m: map[K]entry[V]{}, reading: map[K]int{}, stale: map[K]bool{}, flights: map[K]*flight[V]{}}
}

// Get returns the cached value for k if it is fresh, or else calls read
// and caches its value (not its error). A Get that misses while another
// Get of k is reading waits for that read and returns its result.
func (c *TTL[K, V]) Get(k K, read func() (V, error)) (V, error) {
	c.mu.Lock()
	if e, ok := c.m[k]; ok && time.Now().Before(e.until) {
		c.mu.Unlock()
		return e.v, nil
	}
	if f, ok := c.flights[k]; ok && !c.stale[k] {
		c.mu.Unlock()
		<-f.done
		return f.v, f.err
	}
	f := &flight[V]{done: make(chan struct{})}
	c.flights[k] = f
	gen := c.gen
	c.reading[k]++
	c.mu.Unlock()
	v, err := read()
	f.v, f.err = v, err
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flights[k] == f {
		delete(c.flights, k)
	}
	close(f.done)
	keep := err == nil && c.gen == gen && !c.stale[k] // nothing deleted it since the read began
	if c.reading[k]--; c.reading[k] == 0 {
		delete(c.reading, k)
		delete(c.stale, k)
	}
	if keep {
		if len(c.m) >= c.max {
			clear(c.m)
		}
		c.m[k] = entry[V]{v: v, until: time.Now().Add(c.ttl)}
	}
	return v, err
}

// Delete drops k.
func (c *TTL[K, V]) Delete(k K) {
	c.mu.Lock()
	delete(c.m, k)
	if c.reading[k] > 0 {
		c.stale[k] = true
	}
	// A read in flight may have read the value k had before: later Gets
	// read again rather than share it.
	delete(c.flights, k)
	c.mu.Unlock()
}

// DeleteFunc drops the entries for which drop reports true. Every read in
// flight is then left uncached, whatever its key (DeleteFunc is meant for
// rare changes).
func (c *TTL[K, V]) DeleteFunc(drop func(K, V) bool) {
	c.mu.Lock()
	c.gen++
	clear(c.flights)
	for k, e := range c.m {
		if drop(k, e.v) {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}
