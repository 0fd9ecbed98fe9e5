package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// plainStore is a store without the optional capabilities (no
// AcceptClaimer, LaneRenewer, AcceptPuller): the relay's general path.
type plainStore struct{ core.Store }

// attemptFixture is a fixture whose deliverer answers with answer; with
// plain its relay runs over plainStore (first attempts by the
// scheduler), else over the SQLite store, which claims a waiting send's
// lane as it accepts it; with run the scheduler runs (Relay.Run) until
// the test ends.
func attemptFixture(t *testing.T, plain, run bool, answer func(*core.Message, int) core.Delivery) *fixture {
	t.Helper()
	f := newFixture(t, core.Config{})
	if plain {
		f.relay = core.NewRelay(plainStore{f.store}, f.clock, core.Config{}, nil)
		f.relay.SetDeliverer(kindTest, f.d)
	}
	f.d.answer = answer
	if run {
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = f.relay.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return f
}

// awaitSend runs SendAsAwaitAttempt in the background and returns its
// answer; a call still waiting after guard fails the test (it waited for
// an attempt that was not coming, or past its bound).
func awaitSend(t *testing.T, f *fixture, m *core.Message, wait, guard time.Duration) (core.SendResult, error) {
	t.Helper()
	type answer struct {
		res core.SendResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := f.relay.SendAsAwaitAttempt(f.ctx, core.InternalPrincipal("test"), m, wait)
		got <- answer{res, err}
	}()
	select {
	case a := <-got:
		return a.res, a.err
	case <-time.After(guard):
		t.Fatalf("SendAsAwaitAttempt(%s) had not answered after %v", m.ID, guard)
	}
	return core.SendResult{}, nil
}

func task(id, receiver string) *core.Message {
	return &core.Message{ID: id, Sender: "planner", Receiver: receiver, Type: "task.request",
		Parts: []core.Part{{Kind: core.PartText, Text: "hi " + id}}}
}

// TestSendAwaitsFirstAttempt: a send to an online push receiver answers
// with what the scheduler's first attempt did, if it ended in time, and
// queued otherwise; sends no attempt is coming for answer at once.
func TestSendAwaitsFirstAttempt(t *testing.T) {
	const long = time.Hour // a wait that must end by an attempt, not by its bound
	paths := []struct {
		name  string
		plain bool
	}{{"claimed at accept", false}, {"by the scheduler", true}}
	for _, c := range []struct {
		name     string
		answer   core.Delivery
		status   core.Status
		attempts int
		reply    string
	}{
		{"delivered", core.Delivery{Kind: core.OutcomeDelivered, Code: 200, Reply: []byte(`{"status":"accepted","result":1}`)}, core.StatusDelivered, 1, `{"status":"accepted","result":1}`},
		{"rejected", core.Delivery{Kind: core.OutcomeRejected, Code: 415, Reply: []byte(`{"status":"rejected"}`)}, core.StatusRejected, 1, `{"status":"rejected"}`},
		{"failed, retried later", core.Delivery{Kind: core.OutcomeRetry, Code: 503, Err: errors.New("busy")}, core.StatusQueued, 1, ""},
	} {
		for _, path := range paths {
			t.Run(path.name+"/"+c.name, func(t *testing.T) {
				f := attemptFixture(t, path.plain, true, func(*core.Message, int) core.Delivery { return c.answer })
				res, err := awaitSend(t, f, task("m-"+c.name, "worker"), long, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if res.Receipt.Status != c.status || res.Receipt.Attempts != c.attempts || string(res.Receipt.Reply) != c.reply {
					t.Fatalf("answered %s after %d attempts, reply %s; want %s, %d, %s",
						res.Receipt.Status, res.Receipt.Attempts, res.Receipt.Reply, c.status, c.attempts, c.reply)
				}
				// The answer is what the store holds (the attempt was recorded
				// before it was answered).
				if rc := f.status(t, "m-"+c.name); rc.Status != c.status || rc.Attempts != c.attempts {
					t.Errorf("store: %s after %d attempts", rc.Status, rc.Attempts)
				}
				if got := f.d.delivered(); len(got) != 1 {
					t.Errorf("attempts made: %v, want one", got)
				}
			})
		}
	}
	for _, path := range paths {
		t.Run(path.name+"/attempt slower than the wait", func(t *testing.T) {
			release := make(chan struct{})
			f := attemptFixture(t, path.plain, true, func(*core.Message, int) core.Delivery {
				<-release
				return core.Delivery{Kind: core.OutcomeDelivered, Code: 200}
			})
			res, err := awaitSend(t, f, task("slow", "worker"), 50*time.Millisecond, time.Minute)
			if err != nil || res.Receipt.Status != core.StatusQueued {
				t.Fatalf("answered %+v %v, want queued", res.Receipt, err)
			}
			close(release)
			ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
			defer cancel()
			if rc, err := f.relay.WaitReceiptFor(ctx, core.AdminPrincipal(), "slow"); err != nil || rc.Status != core.StatusDelivered {
				t.Fatalf("after the answer: %+v %v, want delivered all the same", rc, err)
			}
		})
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, f *fixture) *core.Message
	}{
		{"pull receiver", func(t *testing.T, f *fixture) *core.Message { return task("to-pull", "planner") }},
		{"lease lapsed", func(t *testing.T, f *fixture) *core.Message {
			if _, _, err := f.relay.RegisterAs(f.ctx, testHub, &core.Agent{ID: "sleeper", Endpoint: core.Endpoint{Kind: kindTest, URL: "http://x"}}, time.Second); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(2 * time.Second)
			return task("to-sleeper", "sleeper")
		}},
		{"expired on arrival", func(t *testing.T, f *fixture) *core.Message {
			m := task("stale", "worker")
			m.TTL, m.SentAt = time.Second, f.clock.Now().Add(-time.Hour)
			return m
		}},
		{"duplicate", func(t *testing.T, f *fixture) *core.Message {
			if _, err := f.relay.SendAs(f.ctx, core.InternalPrincipal("test"), task("twice", "worker")); err != nil {
				t.Fatal(err)
			}
			return task("twice", "worker")
		}},
	} {
		t.Run("no attempt awaited: "+c.name, func(t *testing.T) {
			f := newFixture(t, core.Config{}) // no scheduler: an attempt never comes
			m := c.setup(t, f)
			res, err := awaitSend(t, f, m, long, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if res.Receipt.Status == core.StatusDelivered || res.Receipt.Attempts != 0 {
				t.Errorf("answered %+v", res.Receipt)
			}
		})
	}
	t.Run("claimed at accept, without the scheduler", func(t *testing.T) {
		f := attemptFixture(t, false, false, nil) // no Run: only the claim attempts
		res, err := awaitSend(t, f, task("inline", "worker"), long, time.Minute)
		if err != nil || res.Receipt.Status != core.StatusDelivered {
			t.Fatalf("answered %+v %v, want delivered", res.Receipt, err)
		}
	})
	t.Run("claimed lane takes the messages sent meanwhile", func(t *testing.T) {
		release := make(chan struct{})
		f := attemptFixture(t, false, false, func(m *core.Message, _ int) core.Delivery { // no Run
			if m.ID == "first" {
				<-release
			}
			return core.Delivery{Kind: core.OutcomeDelivered, Code: 200}
		})
		if res, _ := awaitSend(t, f, task("first", "worker"), 50*time.Millisecond, time.Minute); res.Receipt.Status != core.StatusQueued {
			t.Fatalf("first: %+v, want queued while its attempt runs", res.Receipt)
		}
		if res, _ := awaitSend(t, f, task("second", "worker"), 50*time.Millisecond, time.Minute); res.Receipt.Attempts != 0 {
			t.Fatalf("second: %+v, want it behind the first", res.Receipt)
		}
		close(release)
		ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
		defer cancel()
		if rc, err := f.relay.WaitReceiptFor(ctx, core.AdminPrincipal(), "second"); err != nil || rc.Status != core.StatusDelivered {
			t.Fatalf("second: %+v %v, want delivered by the claim's holder", rc, err)
		}
		if got := f.d.delivered(); len(got) != 2 || got[0] != "first" || got[1] != "second" {
			t.Fatalf("attempts %v, want first then second", got)
		}
	})
	t.Run("lane busy: no claim, order kept", func(t *testing.T) {
		f := attemptFixture(t, false, false, func(m *core.Message, _ int) core.Delivery {
			return core.Delivery{Kind: core.OutcomeRetry, Code: 503} // the head waits for its retry
		})
		if res, _ := awaitSend(t, f, task("head", "worker"), long, time.Minute); res.Receipt.Attempts != 1 {
			t.Fatalf("head: %+v", res.Receipt)
		}
		res, err := awaitSend(t, f, task("behind", "worker"), 50*time.Millisecond, time.Minute)
		if err != nil || res.Receipt.Status != core.StatusQueued || res.Receipt.Attempts != 0 {
			t.Fatalf("behind: %+v %v, want queued and not attempted", res.Receipt, err)
		}
		if got := f.d.delivered(); len(got) != 1 || got[0] != "head" {
			t.Fatalf("attempts %v: only the head's, in order", got)
		}
	})
	t.Run("ended by another instance", func(t *testing.T) {
		// This instance's scheduler does not run, and its store makes no
		// claim at accept: the other instance's attempt ends the message.
		f := attemptFixture(t, true, false, nil)
		other := core.NewRelay(f.store, f.clock, core.Config{}, nil)
		other.SetDeliverer(kindTest, f.d)
		type answer struct {
			res core.SendResult
			err error
		}
		got := make(chan answer, 1)
		go func() {
			res, err := f.relay.SendAsAwaitAttempt(f.ctx, core.InternalPrincipal("test"), task("elsewhere", "worker"), long)
			got <- answer{res, err}
		}()
		ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
		defer cancel()
		// The other instance delivers once the message is stored, and the
		// store's notification reaches this one.
		for {
			if _, err := f.relay.ReceiptFor(ctx, core.AdminPrincipal(), "elsewhere"); err == nil {
				break
			}
			select {
			case a := <-got:
				t.Fatalf("answered before it was delivered: %+v %v", a.res, a.err)
			case <-ctx.Done():
				t.Fatal("the message was never stored")
			case <-time.After(time.Millisecond):
			}
		}
		if err := other.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		f.relay.NotifyReceipt("elsewhere")
		select {
		case a := <-got:
			if a.err != nil || a.res.Receipt.Status != core.StatusDelivered {
				t.Fatalf("answered %+v %v, want delivered", a.res.Receipt, a.err)
			}
		case <-ctx.Done():
			t.Fatal("the notification did not end the wait")
		}
	})
	t.Run("ended by another instance, receipt in the notification", func(t *testing.T) {
		// The notification carries the terminal receipt: the wait answers
		// with it and reads nothing. The store still holds the message
		// queued (no instance attempted it), so an answer of delivered,
		// with the notification's reply, can only come from the
		// notification; one read from the store would keep waiting.
		f := attemptFixture(t, true, false, nil)
		type answer struct {
			res core.SendResult
			err error
		}
		got := make(chan answer, 1)
		go func() {
			res, err := f.relay.SendAsAwaitAttempt(f.ctx, core.InternalPrincipal("test"), task("carried", "worker"), long)
			got <- answer{res, err}
		}()
		ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
		defer cancel()
		var stored *core.Receipt
		waitfor.OK(t, "the message to be stored", func() error {
			var err error
			stored, err = f.relay.ReceiptFor(ctx, core.AdminPrincipal(), "carried")
			return err
		})
		rc := *stored
		rc.Status, rc.Attempts, rc.Reply = core.StatusDelivered, 1, json.RawMessage(`{"from":"notification"}`)
		f.relay.NotifyEnded(&rc)
		select {
		case a := <-got:
			if a.err != nil || a.res.Receipt.Status != core.StatusDelivered || string(a.res.Receipt.Reply) != `{"from":"notification"}` {
				t.Fatalf("answered %+v %v, want the notification's delivered receipt", a.res.Receipt, a.err)
			}
		case <-ctx.Done():
			t.Fatal("the notification did not end the wait")
		}
		if st, err := f.relay.ReceiptFor(ctx, core.AdminPrincipal(), "carried"); err != nil || st.Status != core.StatusQueued {
			t.Fatalf("stored receipt %+v %v, want still queued (the test's premise)", st, err)
		}
	})
}
