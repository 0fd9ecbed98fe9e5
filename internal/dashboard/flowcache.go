package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// flowTTL is how long one read of the message flow answers the same
// query: every open dashboard asks every 5 s, and a wide window reads
// every message that ended within it.
const flowTTL = 2 * time.Second

// flowReadTimeout bounds one shared read of the flow.
const flowReadTimeout = 30 * time.Second

// flowCache makes the charts' store reads independent of how many pages
// are open: one read per query at a time (the others wait for it), and
// its answer is kept for flowTTL. Errors are not kept.
type flowCache struct {
	mu sync.Mutex
	m  map[flowKey]*flowEntry
}

type flowKey struct {
	since   int64
	width   time.Duration
	buckets int
}

type flowEntry struct {
	at      time.Time     // when the read began
	done    chan struct{} // closed when buckets and err are set
	buckets []core.FlowBucket
	err     error
}

// get answers q from st, read at most once per flowTTL (by now) and at
// most once at a time. The read itself is not cut short by ctx (others
// may wait for it); a caller whose ctx ends stops waiting.
func (c *flowCache) get(ctx context.Context, st FlowStore, now time.Time, q core.FlowQuery) ([]core.FlowBucket, error) {
	key := flowKey{q.Since.UnixNano(), q.Width, q.Buckets}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[flowKey]*flowEntry{}
	}
	for k, e := range c.m { // drop what has expired: the map stays small
		if now.Sub(e.at) >= flowTTL || now.Before(e.at) {
			select {
			case <-e.done:
				delete(c.m, k)
			default: // still being read: its waiters hold it
			}
		}
	}
	e, ok := c.m[key]
	if !ok {
		e = &flowEntry{at: now, done: make(chan struct{})}
		c.m[key] = e
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flowReadTimeout)
			defer cancel()
			b, err := st.MessageFlow(rctx, q)
			c.mu.Lock()
			e.buckets, e.err = b, err
			if err != nil && c.m[key] == e {
				delete(c.m, key) // the next asker reads again
			}
			c.mu.Unlock()
			close(e.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-e.done:
		return e.buckets, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
