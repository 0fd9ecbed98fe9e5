// Package waitfor is the one way Switchboard's tests wait for something to
// happen: a condition to hold, a value to arrive on a channel, a call to
// succeed. Each helper polls (from 1 ms, backing off to 50 ms) until the
// condition holds or a deadline passes, and then fails the test saying
// what it waited for and for how long, instead of a bare timeout.
//
// Use it instead of time.Sleep and hand-written wait loops:
//
//	waitfor.True(t, "the receipt of m1 to say delivered", func() bool {
//		rc, err := c.Receipt(ctx, "m1")
//		return err == nil && rc.Status == "delivered"
//	})
//	id := waitfor.Recv(t, "the worker to receive a message", got)
//
// The deadline is Timeout (or the one given to the …Within forms), cut
// short to end a little before the test binary's own -timeout so that the
// failure names the condition rather than dumping goroutines. Inside a
// testing/synctest bubble the helpers work unchanged: their pauses advance
// the bubble's fake clock.
//
// Waiting is not asserting timing: a deadline here is a bound on a hang,
// generous for a loaded 2-core machine. Timing goals live in benchmarks.
//
// The helpers call t.Fatalf, so call them from the test's goroutine.
package waitfor

import (
	"fmt"
	"testing"
	"time"
)

// Timeout is how long the helpers without an explicit deadline wait.
const Timeout = 30 * time.Second

// margin is how long before the test binary's -timeout a wait gives up.
const margin = 5 * time.Second

// True waits until cond returns true.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	TrueWithin(t, Timeout, what, cond)
}

// TrueWithin waits at most d until cond returns true.
func TrueWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	OKWithin(t, d, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = fmt.Errorf("condition not met")

// OK waits until f returns nil; on timeout the failure includes f's last
// error.
func OK(t testing.TB, what string, f func() error) {
	t.Helper()
	OKWithin(t, Timeout, what, f)
}

// OKWithin waits at most d until f returns nil.
func OKWithin(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	start := time.Now()
	deadline := deadline(t, start, d)
	pause := time.Millisecond
	for {
		err := f()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			if err == errNotYet {
				t.Fatalf("waited %v for %s; gave up", time.Since(start).Round(time.Millisecond), what)
			}
			t.Fatalf("waited %v for %s; gave up, last error: %v", time.Since(start).Round(time.Millisecond), what, err)
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Recv waits for a value on ch and returns it. A closed channel fails the
// test.
func Recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	return RecvWithin(t, Timeout, what, ch)
}

// RecvWithin waits at most d for a value on ch.
func RecvWithin[T any](t testing.TB, d time.Duration, what string, ch <-chan T) T {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(time.Until(deadline(t, start, d)))
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: the channel was closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("waited %v for %s; gave up", time.Since(start).Round(time.Millisecond), what)
	}
	var zero T
	return zero
}

// Closed waits until ch is closed (or yields a value).
func Closed[T any](t testing.TB, what string, ch <-chan T) {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(time.Until(deadline(t, start, Timeout)))
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("waited %v for %s; gave up", time.Since(start).Round(time.Millisecond), what)
	}
}

// deadline is start+d, or earlier when the test binary's -timeout comes
// first.
func deadline(t testing.TB, start time.Time, d time.Duration) time.Time {
	end := start.Add(d)
	if dl, ok := testDeadline(t); ok && dl.Add(-margin).Before(end) {
		end = dl.Add(-margin)
	}
	return end
}

// testDeadline is t.Deadline(), except inside a synctest bubble, where
// t.Deadline panics (a real-clock deadline means nothing on the bubble's
// fake clock, and the bubble reports a hang as a deadlock anyway).
func testDeadline(t testing.TB) (dl time.Time, ok bool) {
	td, isT := t.(interface{ Deadline() (time.Time, bool) })
	if !isT {
		return time.Time{}, false
	}
	defer func() {
		if recover() != nil {
			dl, ok = time.Time{}, false
		}
	}()
	return td.Deadline()
}
