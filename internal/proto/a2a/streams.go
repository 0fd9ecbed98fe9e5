package a2a

import "sync"

// MaxStreamsPerCaller is how many A2A streams (SendStreamingMessage and
// SubscribeToTask) one caller may hold open at once. Each one holds a
// connection, a goroutine and a watch on its task until the task settles,
// so without a bound one credential could hold any number; the connection
// bound alone would let it crowd everyone else out.
const MaxStreamsPerCaller = 256

// streamBound counts the open streams of each caller.
type streamBound struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes a place for a stream of caller, false at the bound.
func (b *streamBound) acquire(caller string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[caller] >= MaxStreamsPerCaller {
		return false
	}
	if b.open == nil {
		b.open = map[string]int{}
	}
	b.open[caller]++
	return true
}

// release gives back a place taken by acquire.
func (b *streamBound) release(caller string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[caller]--; b.open[caller] <= 0 {
		delete(b.open, caller)
	}
}
