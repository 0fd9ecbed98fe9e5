package core_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// claimCounter is the embedded store (a LaneRenewer too) counting the
// scheduler's claims.
type claimCounter struct {
	*sqlite.Store
	claims atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, now, claimUntil time.Time, owner string, maxLanes, perLane int) ([]core.LaneClaim, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, now, claimUntil, owner, maxLanes, perLane)
}

// scheduled makes a relay over a counting store and returns a function
// that starts its scheduler. The poll is an hour, so whatever the scheduler
// delivers within a test it delivers because it was woken.
func scheduled(t *testing.T, cfg core.Config) (r *core.Relay, cs *claimCounter, d *scripted, start func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	cs = &claimCounter{Store: st}
	cfg.Poll = time.Hour
	r = core.NewRelay(cs, nil, cfg, nil)
	d = &scripted{}
	r.SetDeliverer(kindTest, d)
	for _, a := range []struct {
		id   string
		kind core.EndpointKind
	}{{"pusher", kindTest}, {"pusher2", kindTest}, {"puller", core.EndpointPull}, {"sender", core.EndpointPull}} {
		if _, _, err := r.RegisterAs(ctx, testHub, &core.Agent{ID: a.id, Endpoint: core.Endpoint{Kind: a.kind, URL: "http://x"}}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var started atomic.Bool
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		if started.Load() {
			<-done
		}
		st.Close()
	})
	start = func() {
		started.Store(true)
		go func() { defer close(done); _ = r.Run(ctx) }()
	}
	return r, cs, d, start
}

func sendTo(t *testing.T, r *core.Relay, receiver, id string) {
	t.Helper()
	if _, err := r.SendAs(context.Background(), testHub, &core.Message{ID: id, Sender: "sender", Receiver: receiver, TTL: time.Hour,
		Parts: []core.Part{{Kind: core.PartText, Text: id}}}); err != nil {
		t.Fatalf("send %s: %v", id, err)
	}
}

// TestSchedulerIsNotWokenForPullOnlyReceivers runs in a synctest bubble
// (the store is the embedded one, files only): synctest.Wait returns once
// the scheduler is idle, so "no claim after these sends" is exact, with
// no sleep, and the hour-long poll never fires because the bubble's clock
// only moves when everything is blocked and the test is not waiting.
func TestSchedulerIsNotWokenForPullOnlyReceivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, cs, d, start := scheduled(t, core.Config{})
		start()
		sendTo(t, r, "pusher", "first")
		synctest.Wait() // delivered, and the scheduler idle again
		if got := d.delivered(); len(got) != 1 {
			t.Fatalf("delivered %v, want the first message", got)
		}
		before := cs.claims.Load()
		for i := range 50 {
			sendTo(t, r, "puller", fmt.Sprintf("p%d", i))
		}
		synctest.Wait() // a woken scheduler would have claimed by now
		if n := cs.claims.Load() - before; n != 0 {
			t.Fatalf("%d claims after sends that only a pull can take", n)
		}
		sendTo(t, r, "pusher", "second")
		synctest.Wait()
		if got := d.delivered(); len(got) != 2 {
			t.Fatalf("delivered %v: a send to a pushable receiver did not wake the scheduler", got)
		}
		if cs.claims.Load() == before {
			t.Fatal("a send to a pushable receiver did not wake the scheduler")
		}
		// The pull receiver's messages are all still there for it.
		ms, err := r.PullAs(context.Background(), core.AdminPrincipal(), "puller", 100, time.Minute, true)
		if err != nil || len(ms) != 50 {
			t.Fatalf("pull: %d messages, %v", len(ms), err)
		}
	})
}

func TestSchedulerWakesItselfWhenWorkIsLeft(t *testing.T) {
	cases := []struct {
		name string
		cfg  core.Config
		// queue sends the backlog, before the scheduler starts.
		queue func(t *testing.T, r *core.Relay)
		want  int
	}{{
		// One message per claim: a lane is released with work left many
		// times over, and each release must bring the next claim.
		name: "lane released with messages left",
		cfg:  core.Config{PerLane: 1},
		queue: func(t *testing.T, r *core.Relay) {
			for i := range 40 {
				sendTo(t, r, "pusher", fmt.Sprintf("m%02d", i))
			}
		},
		want: 40,
	}, {
		// One delivery slot, taken by a lane that is only parked: the
		// slot it frees must bring the next claim.
		name: "slot freed by a parked lane",
		cfg:  core.Config{MaxInFlight: 1},
		queue: func(t *testing.T, r *core.Relay) {
			sendTo(t, r, "puller", "parked")
			sendTo(t, r, "pusher2", "pushed")
		},
		want: 1,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, _, d, start := scheduled(t, c.cfg)
				c.queue(t, r)
				start()
				synctest.Wait() // idle: the poll is an hour away, so only wake-ups delivered
				got := d.delivered()
				if len(got) != c.want {
					t.Fatalf("delivered %d of %d: the scheduler was not woken", len(got), c.want)
				}
				if c.want == 40 && (got[0] != "m00" || got[39] != "m39") {
					t.Fatalf("order: %v", got)
				}
			})
		})
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestDueWakesOnlyTheReceiversStreams(t *testing.T) {
	r, _, _, _ := scheduled(t, core.Config{})
	ctx := context.Background()
	for _, id := range []string{"puller2", "puller3"} {
		if _, _, err := r.RegisterAs(ctx, testHub, &core.Agent{ID: id, Endpoint: core.Endpoint{Kind: core.EndpointPull}}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := r.Due("puller"), r.Due("puller2"), r.Due("puller3")
	if r.Due("puller") != a {
		t.Fatal("two streams of one receiver wait on different channels")
	}
	steps := []struct {
		name string
		do   func(t *testing.T)
		// want: which of a, b, c are closed after the step.
		want [3]bool
	}{
		{"send to another receiver", func(t *testing.T) { sendTo(t, r, "pusher", "x1") }, [3]bool{}},
		{"send to puller", func(t *testing.T) { sendTo(t, r, "puller", "x2") }, [3]bool{true, false, false}},
		{"heartbeat of puller2", func(t *testing.T) {
			if _, _, err := r.HeartbeatAs(ctx, testHub, "puller2", 0); err != nil {
				t.Fatal(err)
			}
		}, [3]bool{true, true, false}},
		{"wake (another instance's work)", func(t *testing.T) { r.Wake() }, [3]bool{true, true, true}},
	}
	for _, s := range steps {
		s.do(t)
		if got := [3]bool{closed(a), closed(b), closed(c)}; got != s.want {
			t.Fatalf("after %s: closed %v, want %v", s.name, got, s.want)
		}
	}
	if closed(r.Due("puller")) {
		t.Fatal("a fresh Due channel is closed")
	}
}
