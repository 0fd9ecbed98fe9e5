// Package clocktest is the one fake clock of Switchboard's tests: a clock
// that stands still until the test moves it. It satisfies core.Clock,
// amp.Clock and every other consumer-defined interface of the form
// Now() time.Time, and is safe for concurrent use (the scheduler reads it
// from its own goroutine).
//
// A fake Now moves what components compute from the clock (lease expiry,
// TTL, receipts' times) but not their timers and sleeps. To control both,
// run the test inside a testing/synctest bubble with the real clock
// instead: there time.Now, timers and sleeps all follow the bubble's fake
// time, advanced whenever every goroutine in the bubble is blocked. A
// bubble cannot hold real network I/O, so tests of whole hubs over HTTP
// use this clock (or wait with package waitfor) instead.
package clocktest

import (
	"sync"
	"time"
)

// Start is the time a New clock shows unless told otherwise.
var Start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a manually advanced clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock showing at, or Start when at is zero.
func New(at time.Time) *Clock {
	if at.IsZero() {
		at = Start
	}
	return &Clock{now: at}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward for negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set sets the clock to at.
func (c *Clock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
}
