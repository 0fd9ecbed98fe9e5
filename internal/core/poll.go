package core

import "time"

// Poll paces the store reads of a waiter that is woken at once by changes
// on its own instance and polls only for changes made elsewhere (other
// instances on a shared store): the first poll comes after first, each
// next one twice as long after the last, up to max apart.
type Poll struct {
	t               *time.Timer
	first, gap, max time.Duration
}

// NewPoll starts a poll timer.
func NewPoll(first, max time.Duration) *Poll {
	return &Poll{t: time.NewTimer(first), first: first, gap: first, max: max}
}

// C is the channel of the next poll; after receiving from it, call Fired.
func (p *Poll) C() <-chan time.Time { return p.t.C }

// Fired sets the next poll, further apart.
func (p *Poll) Fired() {
	p.gap = min(2*p.gap, p.max)
	p.t.Reset(p.gap)
}

// Again starts the spacing over: the next poll comes after first (for a
// waiter that found something, and may soon find more).
func (p *Poll) Again() {
	p.gap = p.first
	p.t.Stop()
	p.t.Reset(p.first)
}

// Stop stops the timer.
func (p *Poll) Stop() { p.t.Stop() }
