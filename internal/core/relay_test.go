package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clocktest"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// scripted is a deliverer whose answers the test decides; it records what
// it was handed, in order.
type scripted struct {
	mu     sync.Mutex
	got    []string
	answer func(m *core.Message, n int) core.Delivery
}

func (s *scripted) Deliver(_ context.Context, _ *core.Agent, m *core.Message) core.Delivery {
	s.mu.Lock()
	s.got = append(s.got, m.ID)
	n := len(s.got)
	s.mu.Unlock()
	if s.answer == nil {
		return core.Delivery{Kind: core.OutcomeDelivered, Code: 200, Reply: []byte(`{"status":"accepted"}`)}
	}
	return s.answer(m, n)
}

func (s *scripted) delivered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

const kindTest core.EndpointKind = "test"

type fixture struct {
	relay *core.Relay
	store core.Store
	clock *clocktest.Clock
	d     *scripted
	ctx   context.Context
}

func newFixture(t *testing.T, cfg core.Config) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	r := core.NewRelay(st, clock, cfg, nil)
	d := &scripted{}
	r.SetDeliverer(kindTest, d)
	f := &fixture{relay: r, store: st, clock: clock, d: d, ctx: ctx}
	f.register(t, "worker", kindTest)
	f.register(t, "planner", core.EndpointPull)
	return f
}

// waitResult waits in the background, for at most d, for a result
// correlated to id; the channel gets the result (nil when the wait failed,
// which the test is told).
func (f *fixture) waitResult(t *testing.T, id string, d time.Duration) <-chan *core.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, d)
	t.Cleanup(cancel)
	got := make(chan *core.Message, 1)
	go func() {
		ms, err := f.relay.ResultsFor(ctx, core.AdminPrincipal(), id, d, 1)
		if err != nil || len(ms) == 0 {
			t.Errorf("no result for %s within %v: %v", id, d, err)
			got <- nil
			return
		}
		got <- ms[0]
	}()
	return got
}

// attach opens a feed of receiver's queue as the operator.
func (f *fixture) attach(t *testing.T, receiver string, visibility time.Duration) *core.Feed {
	t.Helper()
	feed, err := f.relay.AttachAs(f.ctx, core.AdminPrincipal(), receiver, visibility)
	if err != nil {
		t.Fatal(err)
	}
	return feed
}

func (f *fixture) register(t *testing.T, id string, kind core.EndpointKind) {
	t.Helper()
	if _, _, err := f.relay.RegisterAs(f.ctx, testHub, &core.Agent{ID: id, Endpoint: core.Endpoint{Kind: kind, URL: "http://x"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) send(t *testing.T, id string, ttl time.Duration) core.SendResult {
	t.Helper()
	res, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: id, Sender: "planner", Receiver: "worker", Type: "task.request",
		TTL: ttl, Parts: []core.Part{{Kind: core.PartText, Text: "hi " + id}}})
	if err != nil {
		t.Fatalf("send %s: %v", id, err)
	}
	return res
}

func (f *fixture) tick(t *testing.T) {
	t.Helper()
	if err := f.relay.Tick(f.ctx); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) status(t *testing.T, id string) *core.Receipt {
	t.Helper()
	rc, err := f.relay.ReceiptFor(f.ctx, core.AdminPrincipal(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestSendDeliversAndRecordsReceipt(t *testing.T) {
	f := newFixture(t, core.Config{})
	res := f.send(t, "m1", time.Minute)
	if res.Receipt.Status != core.StatusQueued || res.Duplicate {
		t.Fatalf("send: %+v", res)
	}
	f.tick(t)
	rc := f.status(t, "m1")
	if rc.Status != core.StatusDelivered || rc.Attempts != 1 || string(rc.Reply) != `{"status":"accepted"}` {
		t.Fatalf("receipt: %+v", rc)
	}
	if len(rc.History) != 2 || rc.History[1].Status != core.StatusDelivered {
		t.Fatalf("history: %+v", rc.History)
	}
}

func TestSendValidation(t *testing.T) {
	f := newFixture(t, core.Config{MaxTTL: time.Hour})
	cases := []struct {
		name string
		m    core.Message
		want error
	}{
		{"no id", core.Message{Sender: "planner", Receiver: "worker"}, core.ErrInvalid},
		{"no sender", core.Message{ID: "a", Receiver: "worker"}, core.ErrInvalid},
		{"negative ttl", core.Message{ID: "b", Sender: "planner", Receiver: "worker", TTL: -time.Second}, core.ErrInvalid},
		{"absurd ttl", core.Message{ID: "c", Sender: "planner", Receiver: "worker", TTL: 2 * time.Hour}, core.ErrInvalid},
		{"unknown receiver", core.Message{ID: "d", Sender: "planner", Receiver: "nobody"}, core.ErrUnknownReceiver},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.m
			if _, err := f.relay.SendAs(f.ctx, testHub, &m); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if m.ID != "" {
				if _, err := f.store.GetReceipt(f.ctx, m.ID); !errors.Is(err, core.ErrNotFound) {
					t.Fatalf("refused message was stored: %v", err)
				}
			}
		})
	}
}

func TestDuplicateRoutesOnce(t *testing.T) {
	f := newFixture(t, core.Config{})
	var wg sync.WaitGroup
	var firsts atomic.Int32
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := f.send(t, "same", time.Minute)
			if !res.Duplicate {
				firsts.Add(1)
			}
		}()
	}
	wg.Wait()
	if firsts.Load() != 1 {
		t.Fatalf("%d sends were taken as first, want 1", firsts.Load())
	}
	f.tick(t)
	f.tick(t)
	if got := f.d.delivered(); len(got) != 1 {
		t.Fatalf("delivered %d times, want once", len(got))
	}
	if res := f.send(t, "same", time.Minute); !res.Duplicate || res.Receipt.Status != core.StatusDelivered {
		t.Fatalf("repeat after delivery: %+v", res)
	}
	// Another sender reusing the id is refused.
	_, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: "same", Sender: "worker", Receiver: "worker"})
	if !errors.Is(err, core.ErrIDConflict) {
		t.Fatalf("foreign reuse: %v", err)
	}
}

func TestIDReusedForOtherContent(t *testing.T) {
	f := newFixture(t, core.Config{})
	msg := func(edit func(m *core.Message)) *core.Message {
		m := &core.Message{ID: "m", Sender: "planner", Receiver: "worker", Type: "task.request",
			Parts: []core.Part{{Kind: core.PartData, Data: json.RawMessage(`{"n":1,"text":"hi"}`)}}}
		if edit != nil {
			edit(m)
		}
		return m
	}
	if res, err := f.relay.SendAs(f.ctx, testHub, msg(nil)); err != nil || res.Duplicate {
		t.Fatalf("first send: %+v %v", res, err)
	}
	cases := []struct {
		name     string
		edit     func(m *core.Message)
		conflict bool
	}{
		{"the same message", nil, false},
		{"the same content spelled otherwise", func(m *core.Message) { m.Parts[0].Data = json.RawMessage(`{"text":"hi","n":1.0}`) }, false},
		{"another ttl and conversation", func(m *core.Message) { m.TTL, m.ConversationID = time.Hour, "c2" }, false},
		{"other data", func(m *core.Message) { m.Parts[0].Data = json.RawMessage(`{"n":2,"text":"hi"}`) }, true},
		{"another type", func(m *core.Message) { m.Type = "task.cancel" }, true},
		{"another correlation id", func(m *core.Message) { m.CorrelationID = "x" }, true},
	}
	run := func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				res, err := f.relay.SendAs(f.ctx, testHub, msg(c.edit))
				switch {
				case c.conflict && !errors.Is(err, core.ErrIDConflict):
					t.Fatalf("got %+v, %v; want ErrIDConflict", res, err)
				case !c.conflict && (err != nil || !res.Duplicate):
					t.Fatalf("got %+v, %v; want the first outcome as a duplicate", res, err)
				}
			})
		}
	}
	t.Run("receiver registered", run)
	f.tick(t)
	if got := f.d.delivered(); len(got) != 1 {
		t.Fatalf("delivered %d times, want once", len(got))
	}
	// The receiver has gone: a retry still gets the first outcome, other
	// content is still refused.
	if err := f.relay.DeregisterAs(f.ctx, testHub, "worker"); err != nil {
		t.Fatal(err)
	}
	t.Run("receiver deregistered", run)
	if rc := f.status(t, "m"); rc.Status != core.StatusDelivered || rc.Attempts != 1 {
		t.Fatalf("first message's receipt changed: %+v", rc)
	}
}

func TestExpiredOnArrival(t *testing.T) {
	f := newFixture(t, core.Config{Skew: time.Second})
	m := &core.Message{ID: "old", Sender: "planner", Receiver: "worker", TTL: 5 * time.Second,
		SentAt: f.clock.Now().Add(-10 * time.Second)}
	res, err := f.relay.SendAs(f.ctx, testHub, m)
	if err != nil || res.Receipt.Status != core.StatusExpired {
		t.Fatalf("send: %+v %v", res, err)
	}
	f.tick(t)
	if len(f.d.delivered()) != 0 {
		t.Fatal("an expired message was delivered")
	}
	// A sender clock slightly behind is tolerated: TTL counts from arrival.
	m2 := &core.Message{ID: "skewed", Sender: "planner", Receiver: "worker", TTL: 5 * time.Second,
		SentAt: f.clock.Now().Add(-5500 * time.Millisecond)}
	if res, _ := f.relay.SendAs(f.ctx, testHub, m2); res.Receipt.Status != core.StatusQueued {
		t.Fatalf("skewed: %+v", res.Receipt)
	}
	if !m2.ExpiresAt.Equal(f.clock.Now().Add(5 * time.Second)) {
		t.Fatalf("ttl not measured from received_at: %v", m2.ExpiresAt)
	}
}

func TestRetryBackoffThenDeliver(t *testing.T) {
	f := newFixture(t, core.Config{BackoffBase: time.Second, BackoffMax: 8 * time.Second})
	f.d.answer = func(m *core.Message, n int) core.Delivery {
		if n <= 2 {
			return core.Delivery{Kind: core.OutcomeRetry, Code: 503, Err: fmt.Errorf("receiver answered 503")}
		}
		return core.Delivery{Kind: core.OutcomeDelivered, Code: 200}
	}
	f.send(t, "m", time.Minute)
	f.tick(t)
	rc := f.status(t, "m")
	if rc.Status != core.StatusQueued || rc.Attempts != 1 || rc.LastError != "receiver answered 503" || rc.Code != 503 {
		t.Fatalf("after first failure: %+v", rc)
	}
	wait := rc.NextAttempt.Sub(f.clock.Now())
	if wait < 500*time.Millisecond || wait > time.Second {
		t.Fatalf("first backoff %v outside [0.5s, 1s]", wait)
	}
	f.tick(t) // not due yet
	if n := len(f.d.delivered()); n != 1 {
		t.Fatalf("attempted %d times before the backoff passed", n)
	}
	f.clock.Advance(time.Second)
	f.tick(t)
	rc = f.status(t, "m")
	wait = rc.NextAttempt.Sub(f.clock.Now())
	if rc.Attempts != 2 || wait < time.Second || wait > 2*time.Second {
		t.Fatalf("second backoff %v (attempts %d)", wait, rc.Attempts)
	}
	f.clock.Advance(2 * time.Second)
	f.tick(t)
	if rc = f.status(t, "m"); rc.Status != core.StatusDelivered || rc.Attempts != 3 {
		t.Fatalf("final: %+v", rc)
	}
}

func TestBackoffBounds(t *testing.T) {
	r := core.NewRelay(nil, nil, core.Config{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second}, nil)
	cases := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 200 * time.Millisecond, 400 * time.Millisecond},
		{5, 500 * time.Millisecond, time.Second},
		{40, 500 * time.Millisecond, time.Second},
	}
	for _, c := range cases {
		for i := 0; i < 200; i++ {
			if d := r.Backoff(c.attempt); d < c.min || d > c.max {
				t.Fatalf("attempt %d: %v outside [%v, %v]", c.attempt, d, c.min, c.max)
			}
		}
	}
}

func TestTimeoutDeadLetterAndReplay(t *testing.T) {
	f := newFixture(t, core.Config{BackoffBase: time.Second})
	failing := true
	f.d.answer = func(m *core.Message, n int) core.Delivery {
		if failing {
			return core.Delivery{Kind: core.OutcomeRetry, Err: errors.New("connection refused")}
		}
		return core.Delivery{Kind: core.OutcomeDelivered, Code: 200}
	}
	f.send(t, "m", 5*time.Second)
	for i := 0; i < 10; i++ {
		f.tick(t)
		f.clock.Advance(time.Second)
	}
	rc := f.status(t, "m")
	if rc.Status != core.StatusTimeout || rc.Attempts < 2 {
		t.Fatalf("want timeout after several attempts: %+v", rc)
	}
	dl, err := f.store.DeadLetters(f.ctx, core.DeadLetterFilter{})
	if err != nil || len(dl) != 1 || dl[0].MessageID != "m" {
		t.Fatalf("dead letters: %v %v", dl, err)
	}
	attempts := len(f.d.delivered())
	f.tick(t)
	if len(f.d.delivered()) != attempts {
		t.Fatal("a timed-out message was attempted again")
	}
	failing = false
	if _, err := f.relay.ReplayAs(f.ctx, core.AdminPrincipal(), "m", time.Minute); err != nil {
		t.Fatal(err)
	}
	f.tick(t)
	if rc = f.status(t, "m"); rc.Status != core.StatusDelivered {
		t.Fatalf("after replay: %+v", rc)
	}
	if _, err := f.relay.ReplayAs(f.ctx, core.AdminPrincipal(), "m", 0); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("replaying a delivered message: %v", err)
	}
}

func TestRejectedIsTerminal(t *testing.T) {
	f := newFixture(t, core.Config{})
	f.d.answer = func(m *core.Message, n int) core.Delivery {
		return core.Delivery{Kind: core.OutcomeRejected, Code: 415, Reply: []byte(`{"status":"rejected","code":415}`)}
	}
	f.send(t, "m", time.Minute)
	f.tick(t)
	f.clock.Advance(time.Minute)
	f.tick(t)
	rc := f.status(t, "m")
	if rc.Status != core.StatusRejected || rc.Code != 415 || len(f.d.delivered()) != 1 {
		t.Fatalf("%+v after %d attempts", rc, len(f.d.delivered()))
	}
}

func TestPerPairOrderSurvivesRetry(t *testing.T) {
	f := newFixture(t, core.Config{BackoffBase: time.Second, PerLane: 7})
	var failedOnce atomic.Bool
	f.d.answer = func(m *core.Message, n int) core.Delivery {
		if m.ID == "m012" && failedOnce.CompareAndSwap(false, true) {
			return core.Delivery{Kind: core.OutcomeRetry, Err: errors.New("flaky")}
		}
		return core.Delivery{Kind: core.OutcomeDelivered}
	}
	for i := 0; i < 40; i++ {
		f.send(t, fmt.Sprintf("m%03d", i), time.Minute)
	}
	for i := 0; i < 20; i++ {
		f.tick(t)
		f.clock.Advance(time.Second)
	}
	var want []string
	for i := 0; i < 40; i++ {
		want = append(want, fmt.Sprintf("m%03d", i))
		if i == 12 {
			want = append(want, "m012") // the retry, before anything after it
		}
	}
	got := f.d.delivered()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order:\n got %v\nwant %v", got, want)
	}
}

func TestOfflineReceiverParksUntilHeartbeat(t *testing.T) {
	f := newFixture(t, core.Config{})
	f.clock.Advance(2 * time.Minute) // worker's 1-minute lease lapses
	f.send(t, "m", time.Hour)
	f.tick(t)
	f.tick(t)
	if n := len(f.d.delivered()); n != 0 {
		t.Fatalf("delivered to an offline agent %d times", n)
	}
	if rc := f.status(t, "m"); rc.Status != core.StatusQueued || rc.Attempts != 0 {
		t.Fatalf("parked message: %+v", rc)
	}
	_, queued, err := f.relay.HeartbeatAs(f.ctx, testHub, "worker", time.Minute)
	if err != nil || queued != 1 {
		t.Fatalf("heartbeat: queued %d, %v", queued, err)
	}
	f.tick(t)
	if rc := f.status(t, "m"); rc.Status != core.StatusDelivered {
		t.Fatalf("after heartbeat: %+v", rc)
	}
}

func TestReRegisterFlushesQueue(t *testing.T) {
	f := newFixture(t, core.Config{})
	f.register(t, "worker", core.EndpointPull) // goes pull: nothing is pushed
	f.send(t, "a", time.Hour)
	f.send(t, "b", time.Hour)
	f.tick(t)
	if len(f.d.delivered()) != 0 {
		t.Fatal("pushed to a pull agent")
	}
	queued, _, err := f.relay.RegisterAs(f.ctx, testHub, &core.Agent{ID: "worker", Endpoint: core.Endpoint{Kind: kindTest, URL: "http://x"}}, time.Minute)
	if err != nil || queued != 2 {
		t.Fatalf("register: queued %d, %v", queued, err)
	}
	f.tick(t)
	if got := f.d.delivered(); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("flush: %v", got)
	}
}

func TestPullWithAck(t *testing.T) {
	f := newFixture(t, core.Config{})
	f.register(t, "worker", core.EndpointPull)
	f.send(t, "a", time.Hour)
	f.send(t, "b", time.Hour)
	ms, err := f.relay.PullAs(f.ctx, core.AdminPrincipal(), "worker", 10, 30*time.Second, false)
	if err != nil || len(ms) != 2 || ms[0].ID != "a" {
		t.Fatalf("pull: %v %v", ms, err)
	}
	if again, _ := f.relay.PullAs(f.ctx, core.AdminPrincipal(), "worker", 10, 30*time.Second, false); len(again) != 0 {
		t.Fatalf("leased messages pulled again: %d", len(again))
	}
	if n, err := f.relay.AckAs(f.ctx, core.AdminPrincipal(), "worker", []string{"a", "nope"}); err != nil || n != 1 {
		t.Fatalf("ack: %d %v", n, err)
	}
	f.clock.Advance(31 * time.Second) // b's lease lapses: at-least-once
	ms, _ = f.relay.PullAs(f.ctx, core.AdminPrincipal(), "worker", 10, 30*time.Second, false)
	if len(ms) != 1 || ms[0].ID != "b" {
		t.Fatalf("redelivery after visibility: %v", ms)
	}
	if rc := f.status(t, "a"); rc.Status != core.StatusDelivered {
		t.Fatalf("acked: %+v", rc)
	}
}

// TestFeedHandsOffToStream covers the hand-off to a stream on this
// instance: a message sent while the stream's last pull emptied the queue
// is stored pulled and put on its feed (no pull sees it); one sent while
// an older message waits in the queue is not, nor one sent after the feed
// is detached; a hand-off the stream never took comes back by pull when
// its lease runs out.
func TestFeedHandsOffToStream(t *testing.T) {
	f := newFixture(t, core.Config{})
	f.register(t, "worker", core.EndpointPull)
	pull := func() []string {
		t.Helper()
		ms, err := f.relay.PullAs(f.ctx, core.AdminPrincipal(), "worker", 10, 30*time.Second, false)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		return ids
	}
	taken := func(feed *core.Feed) []string {
		var ids []string
		for _, m := range feed.Take() {
			ids = append(ids, fmt.Sprintf("%s/%d", m.ID, m.Attempts))
		}
		return ids
	}
	f.send(t, "before", time.Hour) // queued before the stream opens
	feed := f.attach(t, "worker", 30*time.Second)
	f.send(t, "early", time.Hour) // no pull yet: nothing tells that "before" is taken
	if got := fmt.Sprint(taken(feed)); got != "[]" {
		t.Fatalf("handed off before the stream's first pull: %s", got)
	}
	if got := fmt.Sprint(pull()); got != "[before early]" {
		t.Fatalf("first pull: %s", got)
	}
	if n, err := f.relay.AckAs(f.ctx, core.AdminPrincipal(), "worker", []string{"before", "early"}); err != nil || n != 2 {
		t.Fatalf("ack: %d %v", n, err)
	}
	res := f.send(t, "h1", time.Hour)
	f.send(t, "h2", time.Hour)
	if got := fmt.Sprint(taken(feed)); got != "[h1/1 h2/1]" {
		t.Fatalf("feed after two sends: %s, want [h1/1 h2/1]", got)
	}
	if res.Receipt.Status != core.StatusQueued || res.Receipt.Attempts != 1 {
		t.Fatalf("send's receipt: %+v", res.Receipt)
	}
	if rc := f.status(t, "h1"); rc.Status != core.StatusQueued || rc.Attempts != 1 || len(rc.History) != 2 || rc.History[1].Detail != "pulled, awaiting ack" {
		t.Fatalf("stored receipt of a hand-off: %+v", rc)
	}
	select {
	case <-feed.Ready():
	default:
		t.Fatal("feed not ready after a hand-off")
	}
	if got := pull(); len(got) != 0 {
		t.Fatalf("a pull took handed-off messages: %v", got)
	}
	if n, err := f.relay.AckAs(f.ctx, core.AdminPrincipal(), "worker", []string{"h1", "h2"}); err != nil || n != 2 {
		t.Fatalf("ack: %d %v", n, err)
	}
	// A message sent while no stream is attached stays in the queue; until
	// a pull takes it, nothing is handed off.
	f.relay.Detach(feed)
	f.send(t, "queued", time.Hour)
	feed = f.attach(t, "worker", 30*time.Second)
	f.send(t, "behind", time.Hour)
	if got := fmt.Sprint(taken(feed)); got != "[]" {
		t.Fatalf("handed off past a queued message: %s", got)
	}
	if got := fmt.Sprint(pull()); got != "[queued behind]" {
		t.Fatalf("pull: %s", got)
	}
	// A hand-off the stream never took (it ended) is pulled again once its
	// lease runs out, as a pulled message would be.
	f.send(t, "lost", time.Hour)
	f.relay.Detach(feed)
	if got := fmt.Sprint(taken(feed)); got != "[]" {
		t.Fatalf("a detached feed still holds %s", got)
	}
	f.send(t, "after", time.Hour) // no feed now: left in the queue
	if got := fmt.Sprint(pull()); got != "[after]" {
		t.Fatalf("pull after detaching: %s", got)
	}
	f.clock.Advance(31 * time.Second)
	ms, err := f.relay.PullAs(f.ctx, core.AdminPrincipal(), "worker", 10, 30*time.Second, false)
	if err != nil || len(ms) != 4 || ms[2].ID != "lost" || ms[2].Attempts != 2 {
		t.Fatalf("pull after the leases ran out: %v %v", ms, err)
	}
}

// TestFeedBacklogIsBounded stops handing off to a stream that does not take
// its messages: past the bound they wait in the queue, in order.
func TestFeedBacklogIsBounded(t *testing.T) {
	f := newFixture(t, core.Config{})
	f.register(t, "worker", core.EndpointPull)
	feed := f.attach(t, "worker", time.Minute)
	defer f.relay.Detach(feed)
	if _, err := f.relay.PullAs(f.ctx, core.AdminPrincipal(), "worker", 10, time.Minute, false); err != nil {
		t.Fatal(err)
	}
	for i := range 1030 {
		f.send(t, fmt.Sprintf("m%04d", i), time.Hour)
	}
	handed := feed.Take()
	if len(handed) != 1024 || handed[0].ID != "m0000" || handed[1023].ID != "m1023" {
		t.Fatalf("handed off %d messages, want the first 1024", len(handed))
	}
	ms, err := f.relay.PullAs(f.ctx, core.AdminPrincipal(), "worker", 100, time.Minute, false)
	if err != nil || len(ms) != 6 || ms[0].ID != "m1024" {
		t.Fatalf("the rest by pull: %v %v", ms, err)
	}
}

func TestResultsAreSeparateMessages(t *testing.T) {
	f := newFixture(t, core.Config{})
	f.send(t, "task", time.Minute)
	f.tick(t)
	got := f.waitResult(t, "task", 5*time.Second)
	if _, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: "result", Sender: "worker", Receiver: "planner", Type: "task.result",
		CorrelationID: "task", Parts: []core.Part{{Kind: core.PartText, Text: "done"}}}); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if m == nil || m.ID != "result" || m.Parts[0].Text != "done" {
		t.Fatalf("result: %+v", m)
	}
	if rc := f.status(t, "task"); rc.Status != core.StatusDelivered {
		t.Fatalf("the receipt is unaffected by the result: %+v", rc)
	}
}

func TestQueueFull(t *testing.T) {
	f := newFixture(t, core.Config{MaxQueue: 2})
	f.register(t, "worker", core.EndpointPull)
	f.send(t, "a", time.Hour)
	f.send(t, "b", time.Hour)
	_, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: "c", Sender: "planner", Receiver: "worker"})
	if !errors.Is(err, core.ErrQueueFull) {
		t.Fatalf("third send: %v", err)
	}
	if _, err := f.store.GetReceipt(f.ctx, "c"); !errors.Is(err, core.ErrNotFound) {
		t.Fatal("refused message was stored")
	}
}

// TestAgentLimit: past MaxAgents a new id is refused and nothing stored,
// while agents already registered re-register; a deregistration makes
// room at once (the check counts exactly near the limit).
func TestAgentLimit(t *testing.T) {
	f := newFixture(t, core.Config{MaxAgents: 4}) // worker and planner are two
	reg := func(id string) error {
		_, _, err := f.relay.RegisterAs(f.ctx, testHub, &core.Agent{ID: id, Endpoint: core.Endpoint{Kind: core.EndpointPull}}, time.Minute)
		return err
	}
	for _, step := range []struct {
		id   string
		want error
	}{
		{"third", nil},
		{"fourth", nil},
		{"fifth", core.ErrAgentLimit},
		{"worker", nil}, // known: re-registers
		{"third", nil},
		{"sixth", core.ErrAgentLimit},
	} {
		if err := reg(step.id); !errors.Is(err, step.want) || (step.want == nil && err != nil) {
			t.Fatalf("register %s: %v, want %v", step.id, err, step.want)
		}
	}
	if _, err := f.store.GetAgent(f.ctx, "fifth"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("a refused agent was stored: %v", err)
	}
	if err := f.relay.DeregisterAs(f.ctx, testHub, "fourth"); err != nil {
		t.Fatal(err)
	}
	if err := reg("fifth"); err != nil {
		t.Fatalf("register after a deregistration: %v", err)
	}
	if n, err := f.store.CountAgents(f.ctx); err != nil || n != 4 {
		t.Fatalf("%d agents, %v; want 4", n, err)
	}
}

func TestCardRules(t *testing.T) {
	f := newFixture(t, core.Config{})
	recv := &core.Agent{ID: "picky", Endpoint: core.Endpoint{Kind: core.EndpointPull},
		Card: core.Card{ContentTypes: []string{"text"}, MaxMessageSize: 10}}
	if _, _, err := f.relay.RegisterAs(f.ctx, testHub, recv, time.Minute); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		parts []core.Part
		want  error
	}{
		{"text fits", []core.Part{{Kind: core.PartText, Text: "short"}}, nil},
		{"image refused", []core.Part{{Kind: core.PartImage, URL: "http://i"}}, core.ErrContentType},
		{"too large", []core.Part{{Kind: core.PartText, Text: "far too long for it"}}, core.ErrTooLarge},
	}
	for i, c := range cases {
		_, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: fmt.Sprint("card", i), Sender: "planner", Receiver: "picky", Parts: c.parts})
		if !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCheckAccess(t *testing.T) {
	a := &core.Agent{ID: "x", Card: core.Card{Access: &core.Access{AllowedAgents: []string{"agent://trusted.com/*"}, RequireAuth: true}}}
	cases := []struct {
		sender string
		authed bool
		ok     bool
	}{
		{"agent://trusted.com/bot", true, true},
		{"agent://trusted.com/bot", false, false},
		{"agent://evil.com/bot", true, false},
		{"agent://trusted.com/a/b", true, false},
	}
	for _, c := range cases {
		err := core.CheckAccess(a, c.sender, c.authed)
		if (err == nil) != c.ok {
			t.Errorf("%s authed=%v: %v", c.sender, c.authed, err)
		}
	}
	public := &core.Agent{ID: "p", Card: core.Card{Access: &core.Access{Public: true}}}
	if err := core.CheckAccess(public, "agent://anyone/x", false); err != nil {
		t.Errorf("public: %v", err)
	}
}

func TestTooManyParts(t *testing.T) {
	f := newFixture(t, core.Config{MaxParts: 2})
	parts := []core.Part{{Kind: core.PartText, Text: "a"}, {Kind: core.PartText, Text: "b"}, {Kind: core.PartText, Text: "c"}}
	_, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: "p", Sender: "planner", Receiver: "worker", Parts: parts})
	if !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("3 parts with a limit of 2: %v", err)
	}
}

func TestValidAgentID(t *testing.T) {
	cases := map[string]bool{
		"worker": true, "w-1.a_b:c@d": true, "9lives": true, "A": true,
		"": false, "-lead": false, ".hidden": false, "../etc": false, "a/b": false, "a b": false, "ünï": false,
		string(make([]byte, 129)): false,
	}
	long := make([]byte, 128)
	for i := range long {
		long[i] = 'a'
	}
	cases[string(long)] = true
	for id, want := range cases {
		if got := core.ValidAgentID(id); got != want {
			t.Errorf("ValidAgentID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestTraceParentFromContext(t *testing.T) {
	f := newFixture(t, core.Config{})
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	m := &core.Message{ID: "t1", Sender: "planner", Receiver: "worker"}
	if _, err := f.relay.SendAs(core.WithTraceParent(f.ctx, tp), testHub, m); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.GetMessage(f.ctx, "t1")
	if err != nil || got.TraceParent != tp {
		t.Fatalf("stored traceparent %q, %v", got.TraceParent, err)
	}
}

// TestLaneAttemptsStayWithinTheClaim: a slow receiver (8 s an answer, on
// the fake clock) gets a batch of 32 claimed for 30 s. No attempt may run
// past the claim: whenever an attempt ends, another owner trying to claim
// the lane must get nothing, or the lane could be delivered twice and out
// of order. Every message is still delivered once, in order, through
// renewals.
func TestLaneAttemptsStayWithinTheClaim(t *testing.T) {
	f := newFixture(t, core.Config{ClaimLease: 30 * time.Second, DeliverTimeout: 10 * time.Second})
	// The worker stays registered for the whole slow run.
	if _, _, err := f.relay.RegisterAs(f.ctx, testHub, &core.Agent{ID: "worker", Endpoint: core.Endpoint{Kind: kindTest, URL: "http://x"}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	var stolen []string
	f.d.answer = func(m *core.Message, n int) core.Delivery {
		f.clock.Advance(8 * time.Second)
		now := f.clock.Now()
		cs, err := f.store.Claim(f.ctx, now, now.Add(30*time.Second), "another-instance", 10, 32)
		if err != nil {
			t.Errorf("claim: %v", err)
		}
		if len(cs) > 0 {
			stolen = append(stolen, m.ID)
		}
		return core.Delivery{Kind: core.OutcomeDelivered, Code: 200}
	}
	var want []string
	for i := range 10 {
		id := fmt.Sprintf("m%02d", i)
		f.send(t, id, time.Hour)
		want = append(want, id)
	}
	f.tick(t)
	if len(stolen) > 0 {
		t.Fatalf("the lane was claimed by another owner while attempts ran (after %v)", stolen)
	}
	if got := f.d.delivered(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want each once in order %v", got, want)
	}
}

// TestStreamsPerReceiver: a receiver holds at most MaxStreams feeds on one
// instance; one more ends the oldest (its Ended channel closes), the others
// stay, and other receivers have their own count.
func TestStreamsPerReceiver(t *testing.T) {
	ended := func(f *core.Feed) bool {
		select {
		case <-f.Ended():
			return true
		default:
			return false
		}
	}
	cases := []struct {
		name string
		max  int
		keep int // feeds kept open of 40 (40: no limit)
	}{
		{"default", 0, 16},
		{"two", 2, 2},
		{"no limit", -1, 40},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, core.Config{MaxStreams: c.max})
			other := f.attach(t, "planner", time.Minute)
			var feeds []*core.Feed
			for range 40 {
				feeds = append(feeds, f.attach(t, "worker", time.Minute))
			}
			for i, feed := range feeds {
				if want := i < len(feeds)-c.keep; ended(feed) != want {
					t.Fatalf("feed %d of 40 ended: %v, want %v", i+1, ended(feed), want)
				}
			}
			if ended(other) {
				t.Fatal("another receiver's feed was ended")
			}
			if c.keep == 40 {
				return
			}
			// Closing a live stream makes room: the next one ends no other.
			f.relay.Detach(feeds[len(feeds)-1])
			next := f.attach(t, "worker", time.Minute)
			for _, feed := range feeds[len(feeds)-c.keep : len(feeds)-1] {
				if ended(feed) {
					t.Fatal("a stream was ended though one had closed")
				}
			}
			if ended(next) {
				t.Fatal("the newest stream was ended")
			}
		})
	}
}

// TestOnMessageEvent: a message's hook is called when its receipt moves
// and when a result correlated to it arrives, and no more once stopped;
// other messages' events do not call it.
func TestOnMessageEvent(t *testing.T) {
	f := newFixture(t, core.Config{})
	var mu sync.Mutex
	var calls []string
	stop := f.relay.OnMessageEvent("task", func(id string) {
		mu.Lock()
		calls = append(calls, id)
		mu.Unlock()
	})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range calls {
			if id != "task" {
				t.Fatalf("hook of %q called with %q", "task", id)
			}
		}
		return len(calls)
	}
	f.send(t, "other", time.Minute)
	f.tick(t)
	if n := count(); n != 0 {
		t.Fatalf("%d calls for another message's events", n)
	}
	f.send(t, "task", time.Minute)
	f.tick(t) // delivered: the receipt moves
	afterDelivery := count()
	if afterDelivery == 0 {
		t.Fatal("no call when the message was delivered")
	}
	if _, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: "result", Sender: "worker", Receiver: "planner", Type: "task.result",
		CorrelationID: "task", Parts: []core.Part{{Kind: core.PartText, Text: "done"}}}); err != nil {
		t.Fatal(err)
	}
	afterResult := count()
	if afterResult == afterDelivery {
		t.Fatal("no call when a result correlated to the message arrived")
	}
	stop()
	if _, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: "result-2", Sender: "worker", Receiver: "planner", Type: "task.result",
		CorrelationID: "task", Parts: []core.Part{{Kind: core.PartText, Text: "again"}}}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != afterResult {
		t.Fatalf("%d calls after stop, want %d", n, afterResult)
	}
}

// TestWaitSeesOtherInstances: a result accepted by another relay on the
// same store (another hub instance, which does not notify this one's
// waiters) still ends a wait here, through its polls.
//
// It runs in a synctest bubble: synctest.Wait returns once the wait has
// checked the store and is blocked until its next poll, and the bubble's
// clock then moves straight to that poll.
func TestWaitSeesOtherInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, core.Config{})
		f.send(t, "task", time.Minute)
		other := core.NewRelay(f.store, f.clock, core.Config{}, nil)
		got := f.waitResult(t, "task", 10*time.Second)
		synctest.Wait() // the wait has started, checked once and sleeps
		if _, err := other.SendAs(f.ctx, testHub, &core.Message{ID: "result", Sender: "worker", Receiver: "planner", Type: "task.result",
			CorrelationID: "task", Parts: []core.Part{{Kind: core.PartText, Text: "from elsewhere"}}}); err != nil {
			t.Fatal(err)
		}
		if m := <-got; m == nil || m.ID != "result" {
			t.Fatalf("wait ended with %+v, want the result accepted by the other relay", m)
		}
	})
}

// testHub is the principal the tests act as when who acts is not what
// they test: the hub's own actor, which may register, send as and end any
// local id, while the rules that hang on the sender named (answers,
// conversations) still hold.
var testHub = core.InternalPrincipal("adapter")
