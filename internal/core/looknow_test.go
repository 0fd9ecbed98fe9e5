package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestLookNow: every kind of wait wakes on LookNow and reads the store,
// so it sees what another instance wrote without any notification of it.
// The waits' polls are an hour apart: only LookNow can end them here.
func TestLookNow(t *testing.T) {
	p := core.InternalPrincipal("test")
	for _, c := range []struct {
		name string
		// wait waits for something about message m1 and sends what it saw.
		wait func(ctx context.Context, f *fixture, saw chan<- string)
		// key is what the wait registers under (Follows reports it; a
		// results wait's key is the message's with a prefix).
		key string
		// change makes, behind the relay's back, what the wait waits for.
		change func(t *testing.T, f *fixture)
		want   string
	}{
		{"receipt wait", func(ctx context.Context, f *fixture, saw chan<- string) {
			rc, err := f.relay.WaitReceiptFor(ctx, core.AdminPrincipal(), "m1")
			if err == nil {
				saw <- string(rc.Status)
			}
		}, "m1", expireAll, string(core.StatusTimeout)},
		{"first-attempt wait", func(ctx context.Context, f *fixture, saw chan<- string) {
			res, err := f.relay.SendAsAwaitAttempt(ctx, p, task("m1", "worker"), time.Hour)
			if err == nil {
				saw <- string(res.Receipt.Status)
			}
		}, "m1", expireAll, string(core.StatusTimeout)},
		{"results wait", func(ctx context.Context, f *fixture, saw chan<- string) {
			ms, err := f.relay.ResultsFor(ctx, core.AdminPrincipal(), "m1", time.Hour, 10)
			if err == nil && len(ms) == 1 {
				saw <- ms[0].ID
			}
		}, "result:m1", func(t *testing.T, f *fixture) {
			// Another instance: a relay of its own on the same store.
			other := core.NewRelay(f.store, f.clock, core.Config{}, nil)
			r := task("r1", "planner")
			r.Sender, r.CorrelationID = "worker", "m1"
			if _, err := other.SendAs(f.ctx, p, r); err != nil {
				t.Fatal(err)
			}
		}, "r1"},
		{"message event callback", func(ctx context.Context, f *fixture, saw chan<- string) {
			called := make(chan string, 1)
			stop := f.relay.OnMessageEvent("m1", func(id string) {
				select {
				case called <- id:
				default:
				}
			})
			defer stop()
			select {
			case id := <-called:
				saw <- id
			case <-ctx.Done():
			}
		}, "m1", func(*testing.T, *fixture) {}, "m1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, core.Config{})
			// No scheduler, and a store that cannot claim at accept: m1
			// stays queued, and no attempt ends a wait.
			f.relay = core.NewRelay(plainStore{f.store}, f.clock, core.Config{WaitPoll: time.Hour}, nil)
			f.relay.SetDeliverer(kindTest, f.d)
			if c.name != "first-attempt wait" {
				if _, err := f.relay.SendAs(f.ctx, p, task("m1", "worker")); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(f.ctx)
			saw := make(chan string, 1)
			done := make(chan struct{})
			go func() { defer close(done); c.wait(ctx, f, saw) }()
			defer func() { cancel(); <-done }()
			// The first-attempt wait watches m1 before it sends it: wait
			// for the message too, or expireAll may find nothing to end.
			waitfor.True(t, c.name+" to begin, with m1 stored", func() bool {
				if !f.relay.Follows(c.key) {
					return false
				}
				_, err := f.store.GetReceipt(f.ctx, "m1")
				return err == nil
			})
			c.change(t, f)
			f.relay.LookNow()
			if got := waitfor.Recv(t, c.name+" to see the change after LookNow", saw); got != c.want {
				t.Fatalf("%s saw %q, want %q", c.name, got, c.want)
			}
		})
	}
}

// expireAll ends every queued message (timeout) in the store, as another
// instance's scheduler would, without telling the fixture's relay.
func expireAll(t *testing.T, f *fixture) {
	t.Helper()
	rcs, err := f.store.ExpireDue(f.ctx, f.clock.Now().Add(365*24*time.Hour), 100)
	if err != nil || len(rcs) == 0 {
		t.Fatalf("ExpireDue: %d receipts, %v", len(rcs), err)
	}
}
