package core

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of a hub under load or fault, matched with errors.Is. The HTTP
// faces answer them with a status that asks the client to come back
// (Retry-After).
var (
	// ErrUnavailable means the store cannot be reached or cannot write for
	// now (a database outage, a failover): nothing was done, and the same
	// request may succeed later.
	ErrUnavailable = NewError(KindUnavailable, "store unavailable")
	// ErrOverloaded means the hub holds as much in memory as its budget
	// allows (--memory-budget): nothing was done; retry shortly.
	ErrOverloaded = NewError(KindRateLimited, "hub over its memory budget")
)

// Budget bounds the bytes the hub holds in memory on behalf of clients:
// request bodies being read and decoded, messages kept in the stores'
// caches, messages claimed for delivery. Work that would pass it is
// refused (TryAcquire) or waits, so a flood of large messages slows the
// hub down instead of running it out of memory. A nil *Budget has no
// limit. It is safe for concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64

	waiters atomic.Int32
	mu      sync.Mutex
	freed   chan struct{} // closed (and replaced) when bytes are released while someone waits
}

// NewBudget returns a budget of limit bytes; limit <= 0 means no limit
// (nil).
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	return &Budget{limit: limit}
}

// Limit is the budget in bytes (0: none).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used is what is held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// TryAcquire takes n bytes if they fit, and reports whether it did.
func (b *Budget) TryAcquire(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// Acquire takes n bytes whether or not they fit: for memory that is
// already held (messages a claim has just read), so that the budget shows
// it and further work waits.
func (b *Budget) Acquire(n int64) {
	if b != nil && n > 0 {
		b.used.Add(n)
	}
}

// Release gives back n bytes taken before.
func (b *Budget) Release(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
		if b.waiters.Load() > 0 {
			b.mu.Lock()
			if b.freed != nil {
				close(b.freed)
				b.freed = nil
			}
			b.mu.Unlock()
		}
	}
}

// AcquireWait takes n bytes, waiting up to wait (or until ctx ends) for
// them to fit, and reports whether it did. n larger than the whole budget
// never fits.
func (b *Budget) AcquireWait(ctx context.Context, n int64, wait time.Duration) bool {
	if b.TryAcquire(n) {
		return true
	}
	if n > b.limit || wait <= 0 {
		return false
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		b.mu.Lock()
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if b.TryAcquire(n) { // after taking freed, so no release is missed
			return true
		}
		select {
		case <-freed:
		case <-t.C:
			return b.TryAcquire(n)
		case <-ctx.Done():
			return false
		}
	}
}

// Room reports whether n more bytes would fit now.
func (b *Budget) Room(n int64) bool {
	return b == nil || b.used.Load()+n <= b.limit
}

// MemorySize estimates the bytes m takes in memory and in a store (about
// its JSON encoding): what budgets and byte quotas count it as.
func MemorySize(m *Message) int64 {
	n := 256 + len(m.ID) + len(m.Sender) + len(m.Receiver) + len(m.Type) + len(m.ConversationID) +
		len(m.CorrelationID) + len(m.TraceParent) + len(m.Protocol)
	for i := range m.Parts {
		p := &m.Parts[i]
		n += 64 + len(p.Text) + len(p.Language) + len(p.MediaType) + len(p.Name) + len(p.URL) +
			len(p.Bytes)*4/3 + len(p.Data) + valueSize(p.Meta)
	}
	return int64(n + valueSize(m.Metadata))
}

// claimedSize is what claimed messages take from the memory budget.
func claimedSize(ms []*Message) int64 {
	var n int64
	for _, m := range ms {
		n += MemorySize(m)
	}
	return n
}

// valueSize estimates the JSON size of a decoded JSON value.
func valueSize(v any) int {
	switch v := v.(type) {
	case string:
		return len(v) + 2
	case map[string]any:
		n := 2
		for k, x := range v {
			n += len(k) + 4 + valueSize(x)
		}
		return n
	case []any:
		n := 2
		for _, x := range v {
			n += 1 + valueSize(x)
		}
		return n
	case []byte:
		return len(v)
	}
	return 8
}

// QueueSizer is an optional Store capability used to enforce
// Config.MaxQueueBytes: the bytes of a receiver's queued messages, as
// stored.
type QueueSizer interface {
	QueueBytes(ctx context.Context, receiver string) (int64, error)
}

// queueBytes caches receivers' queued bytes, as last read from the store
// plus this instance's accepts since.
type queueBytes struct {
	mu sync.Mutex
	m  map[string]cachedBytes
}

type cachedBytes struct {
	n  int64
	at time.Time
}

// checkQueueBytes refuses m with ErrQueueFull when its receiver's queue
// would hold more than Config.MaxQueueBytes with it. Reading a queue's
// size costs a store read, so a count read within the last second (plus
// this instance's accepts since) stands in while the queue is under half
// its quota, and one within 100 ms while under 90%; nearer the quota every
// send reads it. Concurrent sends to one receiver (on one instance or
// several) can together pass the quota by at most their size.
func (r *Relay) checkQueueBytes(ctx context.Context, m *Message) error {
	max := r.cfg.MaxQueueBytes
	qs, ok := r.store.(QueueSizer)
	if max <= 0 || !ok {
		return nil
	}
	size := MemorySize(m)
	now := time.Now()
	r.qbytes.mu.Lock()
	c, cached := r.qbytes.m[m.Receiver]
	r.qbytes.mu.Unlock()
	maxAge := 100 * time.Millisecond
	if (c.n+size)*2 < max {
		maxAge = time.Second
	}
	if !cached || now.Sub(c.at) > maxAge || (c.n+size)*10 >= max*9 {
		n, err := qs.QueueBytes(ctx, m.Receiver)
		if err != nil {
			return fmt.Errorf("queue size: %w", err)
		}
		c = cachedBytes{n: n, at: now}
		r.qbytes.mu.Lock()
		if r.qbytes.m == nil || len(r.qbytes.m) > 100000 {
			r.qbytes.m = map[string]cachedBytes{}
		}
		r.qbytes.m[m.Receiver] = c
		r.qbytes.mu.Unlock()
	}
	if c.n+size > max {
		return fmt.Errorf("receiver %q has %d bytes of queued messages; this one (%d bytes) would pass its quota of %d (--max-queue-bytes): %w",
			m.Receiver, c.n, size, max, ErrQueueFull)
	}
	return nil
}

// queuedBytes counts an accepted message into its receiver's cached queue
// size.
func (r *Relay) queuedBytes(m *Message) {
	if r.cfg.MaxQueueBytes <= 0 {
		return
	}
	r.qbytes.mu.Lock()
	if c, ok := r.qbytes.m[m.Receiver]; ok {
		c.n += MemorySize(m)
		r.qbytes.m[m.Receiver] = c
	}
	r.qbytes.mu.Unlock()
}
