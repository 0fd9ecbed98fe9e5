package postgres

import "sync"

// flights shares one read among concurrent callers asking the same thing:
// when the relay's cached queue depth of a busy receiver expires, every
// send in flight asks at once, and one query answers them all.
type flights[V any] struct {
	mu sync.Mutex
	m  map[string]*flightCall[V]
}

type flightCall[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// do runs read for key, or waits for the run in flight and shares its
// result.
func (f *flights[V]) do(key string, read func() (V, error)) (V, error) {
	f.mu.Lock()
	if c, ok := f.m[key]; ok {
		f.mu.Unlock()
		<-c.done
		return c.v, c.err
	}
	if f.m == nil {
		f.m = map[string]*flightCall[V]{}
	}
	c := &flightCall[V]{done: make(chan struct{})}
	f.m[key] = c
	f.mu.Unlock()
	c.v, c.err = read()
	f.mu.Lock()
	delete(f.m, key)
	f.mu.Unlock()
	close(c.done)
	return c.v, c.err
}
