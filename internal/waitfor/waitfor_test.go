package waitfor_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// calling goroutine, as the real one does.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine and returns what it
// failed with ("" when it did not).
func run(f func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
	return r.msg
}

func TestWaitFor(t *testing.T) {
	tests := []struct {
		name    string
		wait    func(tb testing.TB, start time.Time)
		wantErr string // a part of the failure; "" for none
		wantAt  time.Duration
	}{
		{name: "true at once", wait: func(tb testing.TB, _ time.Time) {
			waitfor.True(tb, "nothing", func() bool { return true })
		}},
		{name: "true after 3s", wait: func(tb testing.TB, start time.Time) {
			waitfor.True(tb, "3s to pass", func() bool { return time.Since(start) >= 3*time.Second })
		}, wantAt: 3 * time.Second},
		{name: "never true", wait: func(tb testing.TB, _ time.Time) {
			waitfor.TrueWithin(tb, 2*time.Second, "the moon", func() bool { return false })
		}, wantErr: "waited 2s for the moon; gave up", wantAt: 2 * time.Second},
		{name: "last error is reported", wait: func(tb testing.TB, _ time.Time) {
			waitfor.OKWithin(tb, time.Second, "the hub", func() error { return errors.New("connection refused") })
		}, wantErr: "waited 1s for the hub; gave up, last error: connection refused", wantAt: time.Second},
		{name: "value arrives", wait: func(tb testing.TB, _ time.Time) {
			ch := make(chan int)
			go func() { time.Sleep(5 * time.Second); ch <- 7 }()
			if v := waitfor.Recv(tb, "seven", ch); v != 7 {
				tb.Fatalf("got %d", v)
			}
		}, wantAt: 5 * time.Second},
		{name: "no value", wait: func(tb testing.TB, _ time.Time) {
			waitfor.RecvWithin(tb, 4*time.Second, "a message", make(chan int))
		}, wantErr: "waited 4s for a message; gave up", wantAt: 4 * time.Second},
		{name: "closed channel", wait: func(tb testing.TB, _ time.Time) {
			ch := make(chan int)
			close(ch)
			waitfor.Recv(tb, "a message", ch)
		}, wantErr: "waiting for a message: the channel was closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				msg := run(func(tb testing.TB) { tt.wait(tb, start) })
				if (msg == "") != (tt.wantErr == "") || !strings.Contains(msg, tt.wantErr) {
					t.Errorf("failure %q, want %q", msg, tt.wantErr)
				}
				// The pauses back off to 50 ms: the wait ends within one of
				// them after the condition holds.
				if took := time.Since(start); took < tt.wantAt || took > tt.wantAt+50*time.Millisecond {
					t.Errorf("the wait took %v, want %v", took, tt.wantAt)
				}
			})
		})
	}
}

// TestInsideBubble: the helpers work with the real *testing.T of a
// synctest bubble (where t.Deadline panics) and wait on the bubble's
// clock.
func TestInsideBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		waitfor.True(t, "ten seconds to pass", func() bool { return time.Since(start) >= 10*time.Second })
		if took := time.Since(start); took < 10*time.Second || took > 10*time.Second+50*time.Millisecond {
			t.Errorf("waited %v on the bubble's clock, want 10s", took)
		}
	})
}
