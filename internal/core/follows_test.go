package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestFollows: the relay says it follows a message exactly while
// something here waits for its receipt, waits for its first attempt, or
// has an OnMessageEvent callback on it — and not for other messages.
func TestFollows(t *testing.T) {
	for _, c := range []struct {
		name   string
		follow func(ctx context.Context, f *fixture, id string) // until ctx ends
	}{
		{"receipt wait", func(ctx context.Context, f *fixture, id string) {
			_, _ = f.relay.WaitReceiptFor(ctx, core.AdminPrincipal(), id)
		}},
		{"first-attempt wait", func(ctx context.Context, f *fixture, id string) {
			_, _ = f.relay.SendAsAwaitAttempt(ctx, core.InternalPrincipal("test"), task(id, "worker"), time.Hour)
		}},
		{"message event callback", func(ctx context.Context, f *fixture, id string) {
			stop := f.relay.OnMessageEvent(id, func(string) {})
			<-ctx.Done()
			stop()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// No scheduler: the message stays queued, its waits go on.
			f := attemptFixture(t, true, false, nil)
			if _, err := f.relay.SendAs(f.ctx, core.InternalPrincipal("test"), task("other", "worker")); err != nil {
				t.Fatal(err)
			}
			if f.relay.Follows("m1") {
				t.Fatal("follows m1 before anything waits for it")
			}
			if c.name == "receipt wait" {
				if _, err := f.relay.SendAs(f.ctx, core.InternalPrincipal("test"), task("m1", "worker")); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(f.ctx)
			done := make(chan struct{})
			go func() { defer close(done); c.follow(ctx, f, "m1") }()
			waitfor.True(t, "the relay to follow m1", func() bool { return f.relay.Follows("m1") })
			if f.relay.Follows("other") {
				t.Error("follows a message nothing waits for")
			}
			cancel()
			<-done
			if f.relay.Follows("m1") {
				t.Error("still follows m1 after its wait ended")
			}
		})
	}
}
