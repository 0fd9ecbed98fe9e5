package sqlite

import (
	"maps"
	"slices"
	"sync"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// maxCached bounds the message cache. Messages leave it when they end, so
// under a steady flow it holds the ones in flight; past the bound it starts
// over rather than evicting one by one.
const maxCached = 16384

// msgCache keeps the messages this process accepted, by id, until they end,
// so claims and pulls need not decode the bodies it has just encoded. It
// is filled only after a commit, so it never holds a message the store
// does not; the store's row stays the truth for the mutable fields (seq,
// attempts, expiry), which readers set on the copy they get.
type msgCache struct {
	mu sync.Mutex
	m  map[string]*core.Message
}

func newMsgCache() *msgCache { return &msgCache{m: make(map[string]*core.Message)} }

// put keeps a copy of m.
func (c *msgCache) put(m *core.Message) {
	cp := clone(m)
	c.mu.Lock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[m.ID] = cp
	c.mu.Unlock()
}

// get returns a copy of the cached message id with sequence seq, or nil.
func (c *msgCache) get(id string, seq int64) *core.Message {
	c.mu.Lock()
	m := c.m[id]
	c.mu.Unlock()
	if m == nil || m.Seq != seq {
		return nil
	}
	return clone(m)
}

// drop forgets messages that ended.
func (c *msgCache) drop(ids ...string) {
	c.mu.Lock()
	for _, id := range ids {
		delete(c.m, id)
	}
	c.mu.Unlock()
}

// clone copies a message deeply enough that neither side's changes to its
// fields, parts list or metadata reach the other.
func clone(m *core.Message) *core.Message {
	cp := *m
	cp.Parts = slices.Clone(m.Parts)
	cp.Metadata = maps.Clone(m.Metadata)
	return &cp
}
