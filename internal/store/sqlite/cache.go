package sqlite

import (
	"maps"
	"slices"
	"sync"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Bounds of the message cache: how many messages, how many bytes (their
// stored size) in all, and the largest message it keeps. Messages leave it
// when they end, so under a steady flow it holds the ones in flight; past
// a bound it starts over rather than evicting one by one. Large messages
// are not kept: decoding them again on a claim costs little next to the
// memory a few hundred of them waiting for an offline receiver would hold.
const (
	maxCached           = 16384
	defaultCacheBytes   = 32 << 20
	maxCachedMessageLen = 64 << 10
)

// msgCache keeps the messages this process accepted, by id, until they end,
// so claims and pulls need not decode the bodies it has just encoded. It
// is filled only after a commit, so it never holds a message the store
// does not; the store's row stays the truth for the mutable fields (seq,
// attempts, expiry), which readers set on the copy they get. What it holds
// is taken from the hub's memory budget; when the budget has no room the
// message is not cached.
type msgCache struct {
	maxBytes int64
	budget   *core.Budget

	mu    sync.Mutex
	m     map[string]cached
	bytes int64
}

type cached struct {
	m    *core.Message
	size int64
}

func newMsgCache(maxBytes int64, budget *core.Budget) *msgCache {
	if maxBytes <= 0 {
		maxBytes = defaultCacheBytes
	}
	return &msgCache{m: make(map[string]cached), maxBytes: maxBytes, budget: budget}
}

// put keeps a copy of m, whose stored size is size.
func (c *msgCache) put(m *core.Message, size int64) {
	if size > maxCachedMessageLen || size > c.maxBytes {
		return
	}
	cp := clone(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[m.ID]; ok {
		c.forgetLocked(m.ID, old)
	}
	if len(c.m) >= maxCached || c.bytes+size > c.maxBytes {
		c.clearLocked()
	}
	if !c.budget.TryAcquire(size) {
		return
	}
	c.m[m.ID] = cached{m: cp, size: size}
	c.bytes += size
}

// get returns a copy of the cached message id with sequence seq, or nil.
func (c *msgCache) get(id string, seq int64) *core.Message {
	c.mu.Lock()
	e := c.m[id]
	c.mu.Unlock()
	if e.m == nil || e.m.Seq != seq {
		return nil
	}
	return clone(e.m)
}

// drop forgets messages that ended.
func (c *msgCache) drop(ids ...string) {
	c.mu.Lock()
	for _, id := range ids {
		if e, ok := c.m[id]; ok {
			c.forgetLocked(id, e)
		}
	}
	c.mu.Unlock()
}

func (c *msgCache) forgetLocked(id string, e cached) {
	delete(c.m, id)
	c.bytes -= e.size
	c.budget.Release(e.size)
}

func (c *msgCache) clearLocked() {
	c.budget.Release(c.bytes)
	clear(c.m)
	c.bytes = 0
}

// clone copies a message deeply enough that neither side's changes to its
// fields, parts list or metadata reach the other.
func clone(m *core.Message) *core.Message {
	cp := *m
	cp.Parts = slices.Clone(m.Parts)
	cp.Metadata = maps.Clone(m.Metadata)
	return &cp
}
