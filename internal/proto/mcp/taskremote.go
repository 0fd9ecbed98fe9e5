package mcp

import (
	"context"
	"sync"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Task changes made by other hub instances on a shared store. Each
// instance announces the status changes it writes (changed, through
// core.Relay.AnnounceRecord, which a shared store carries on its existing
// notifications); the others hear of them (core.Relay.OnRecordEvent) and,
// when something here follows the task — a stream of its owner, a
// tasks/result waiting for its end, its work running here as well — read
// it and tell them as for a change of their own. A task that ended
// elsewhere (cancelled through another instance, or done there by that
// instance's sweep) stops its work here.

// remoteTasks are the tasks heard of and not read yet.
type remoteTasks struct {
	mu      sync.Mutex
	pending map[string]struct{}
	kick    chan struct{} // one pending wake of the follower
}

// heard is the relay's callback for another instance's write of a task:
// it notes the task, if something here follows it, for followRemote to
// read (it must not read the store on the relay's goroutine).
func (m *taskManager) heard(ev core.RecordEvent) {
	if !m.follows(ev) {
		return
	}
	m.remote.mu.Lock()
	if m.remote.pending == nil {
		m.remote.pending = map[string]struct{}{}
	}
	m.remote.pending[ev.ID] = struct{}{}
	m.remote.mu.Unlock()
	select {
	case m.remote.kick <- struct{}{}:
	default:
	}
}

// follows reports whether something on this instance follows the task of
// ev: a stream of its owner, a tasks/result waiting for it, its work.
func (m *taskManager) follows(ev core.RecordEvent) bool {
	m.mu.Lock()
	_, waited := m.ended[ev.ID]
	_, running := m.cancel[ev.ID]
	stdio := m.notify != nil && m.notifyOwner == ev.Index
	m.mu.Unlock()
	return waited || running || stdio || m.listeners.hasOwner(ev.Index)
}

// listenRemote starts hearing of other instances' task writes; stop ends
// it.
func (m *taskManager) listenRemote() (stop func()) {
	return m.s.relay.OnRecordEvent(taskRecordKind, m.heard)
}

// followRemote reads the tasks heard of and tells who follows them, until
// ctx ends.
func (m *taskManager) followRemote(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.remote.kick:
		}
		m.remote.mu.Lock()
		ids := m.remote.pending
		m.remote.pending = nil
		m.remote.mu.Unlock()
		for id := range ids {
			rec, err := m.load(ctx, id, "")
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// Gone (expired), or the store failed: the host can
				// still poll.
				m.s.opt.Logger.Debug("mcp: read a task another instance changed", "task", id, "err", err)
				continue
			}
			if rec.terminal() {
				m.mu.Lock()
				if stop := m.cancel[id]; stop != nil {
					stop() // ended elsewhere: its work here is moot
				}
				m.mu.Unlock()
			}
			m.notifyLocal(rec)
		}
	}
}
