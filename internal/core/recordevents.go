package core

import (
	"slices"
	"sync"
)

// Record events tell the hub instances sharing a store that another one
// wrote an adapter's record (an MCP task that ended, say), so that what
// they hold for it (a stream listening to it, a request waiting for its
// end) hears of the change without polling. The writer announces the
// write (AnnounceRecord); a store shared between instances carries the
// announcement to the others (RecordAnnouncer), whose hubs hand it to
// their relay (NotifyRecord), which calls the callbacks registered for
// the record's kind (OnRecordEvent). A store of one instance announces
// nothing: its writers tell their own instance themselves.

// RecordEvent is the announcement of a record's write: its kind, id and
// index (Record.Index) and the version the write stored. It is a hint:
// read the record for what it holds now.
type RecordEvent struct {
	Kind    string
	ID      string
	Index   string
	Version int64
}

// RecordAnnouncer is implemented by stores shared between hub instances:
// AnnounceRecord carries ev to the other instances, where it arrives
// through Relay.NotifyRecord. It must not block; an announcement may be
// lost (the store's connection dropped), so listeners keep a fallback.
type RecordAnnouncer interface {
	AnnounceRecord(ev RecordEvent)
}

// recordHooks are the OnRecordEvent callbacks, per kind.
type recordHooks struct {
	mu sync.Mutex
	m  map[string][]*recordHook
}

type recordHook struct{ fn func(RecordEvent) }

// AnnounceRecord tells the other hub instances sharing the relay's store
// that a record was written (see RecordEvent); with a store of one
// instance it does nothing.
func (r *Relay) AnnounceRecord(ev RecordEvent) {
	if a, ok := r.store.(RecordAnnouncer); ok {
		a.AnnounceRecord(ev)
	}
}

// NotifyRecord calls the callbacks registered for ev's kind; the hub
// calls it for the announcements of other instances.
func (r *Relay) NotifyRecord(ev RecordEvent) {
	h := &r.recordHooks
	h.mu.Lock()
	hs := slices.Clone(h.m[ev.Kind])
	h.mu.Unlock()
	for _, x := range hs {
		x.fn(ev)
	}
}

// OnRecordEvent calls fn with every announcement of another instance's
// write of a record of kind (see RecordEvent), until stop is called. fn
// runs on the goroutine that reads the store's notifications: it must
// return at once (hand the event to a goroutine of its own to read the
// record), and it may call the relay.
func (r *Relay) OnRecordEvent(kind string, fn func(RecordEvent)) (stop func()) {
	x := &recordHook{fn: fn}
	h := &r.recordHooks
	h.mu.Lock()
	if h.m == nil {
		h.m = map[string][]*recordHook{}
	}
	h.m[kind] = append(h.m[kind], x)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		hs := slices.DeleteFunc(h.m[kind], func(y *recordHook) bool { return y == x })
		if len(hs) == 0 {
			delete(h.m, kind)
		} else {
			h.m[kind] = hs
		}
	}
}
