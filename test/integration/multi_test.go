package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// postgresDB creates a fresh database on the PostgreSQL test server named by
// SWITCHBOARD_TEST_POSTGRES (hubtest.PostgresDB: dropped when the test ends,
// after the hubs using it have been killed; without the variable the test
// fails under CI and is skipped elsewhere) and applies the schema with
// `switchboard migrate`.
func postgresDB(t *testing.T) string {
	t.Helper()
	db := hubtest.PostgresDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := proctest.Command(ctx, proctest.Binary(t), "migrate", "--store", db).CombinedOutput()
	if err != nil {
		t.Fatalf("switchboard migrate: %v\n%s", err, out)
	}
	return db
}

// startHubs starts n `switchboard serve --dev` processes on the database db
// and returns them with their base URLs.
func startHubs(t *testing.T, n int, db string, args ...string) ([]*proctest.Proc, []string) {
	t.Helper()
	procs := make([]*proctest.Proc, n)
	bases := make([]string, n)
	for i := range n {
		procs[i] = proctest.StartHub(t, "", append([]string{"--dev", "--store", db}, args...)...)
		bases[i] = procs[i].URL
	}
	return procs, bases
}

// seen records the deliveries one receiver saw.
type seen struct {
	mu      sync.Mutex
	handled map[string]int // after the client's deduplication
	raw     atomic.Int64   // every delivery, before deduplication
}

func newSeen() *seen { return &seen{handled: map[string]int{}} }

func (s *seen) handle(id string) {
	s.mu.Lock()
	s.handled[id]++
	s.mu.Unlock()
}

func (s *seen) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.handled)
}

// TestThreeHubsOnPostgres runs three hub processes on one PostgreSQL
// database with receivers and senders spread across them, kills one with
// SIGKILL mid-load, keeps sending through the survivors (a failed send is
// retried with the same message_id on the next hub), and checks that every
// acknowledged message is delivered, none is lost, none is routed twice,
// and that the killed instance's claimed lanes were taken over after their
// lease. It logs the counts, including duplicate deliveries that reached
// the receivers before their deduplication.
func TestThreeHubsOnPostgres(t *testing.T) {
	fullLane(t)
	db := postgresDB(t)
	procs, bases := startHubs(t, 3, db, "--claim-lease", "2s", "--deliver-timeout", "1s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*client.Client, len(bases))
	for i, b := range bases {
		// The senders fail over to the next hub themselves, at once.
		clients[i] = client.New(b, client.WithRetries(0))
	}

	// Receivers: callback workers registered through hubs A and B, and a
	// live stream receiver registered and connected through hub C.
	receivers := []string{"worker-a", "worker-b", "streamer"}
	got := map[string]*seen{}
	for i, id := range receivers[:2] {
		s := newSeen()
		got[id] = s
		cb := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
			s.handle(env.MessageID)
			return client.Reply{Result: map[string]any{"ok": true}}, nil
		}, client.CallbackOptions{})
		srv := httptest.NewServer(countingHandler(cb, &s.raw))
		t.Cleanup(srv.Close)
		if _, err := clients[i].Register(ctx, client.Registration{AgentID: id, CallbackURL: srv.URL, LeaseSeconds: 3600}); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
	}
	stream := newSeen()
	got["streamer"] = stream
	if _, err := clients[2].Register(ctx, client.Registration{AgentID: "streamer", Delivery: "stream", LeaseSeconds: 3600}); err != nil {
		t.Fatalf("register streamer: %v", err)
	}
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- clients[2].Stream(ctx, "streamer", func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
			stream.raw.Add(1)
			stream.handle(env.MessageID)
			return client.Reply{}, nil
		}, 10*time.Second)
	}()

	// Senders: four per hub; each message goes to the receivers in turn.
	// A failed send is retried with the same id on the next hub until
	// one acknowledges it.
	const senders = 12
	const killed = 1 // hub B
	var (
		mu           sync.Mutex
		attempted    = map[string]string{} // id → sender
		accepted     = map[string]bool{}
		target       = map[string]string{} // id → receiver
		afterKill    atomic.Int64
		retried      atomic.Int64 // sends that needed another hub
		retriedDup   atomic.Int64 // … and were answered "duplicate": the first try had been stored
		unconfirmed  atomic.Int64
		killedAt     atomic.Bool
		perHubAccept [3]atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			sender := fmt.Sprintf("sender-%02d", s)
			home := s % len(bases)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-%06d", sender, i)
				recv := receivers[(s+i)%len(receivers)]
				mu.Lock()
				attempted[id], target[id] = sender, recv
				mu.Unlock()
				ok := false
				for try := 0; try < 30 && !ok; try++ {
					h := (home + try) % len(bases)
					sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
					res, err := clients[h].Send(sctx, client.Message{MessageID: id, Sender: sender, Receiver: recv, Type: "task.request",
						TTL: 10 * time.Minute, Payload: map[string]any{"n": i}})
					scancel()
					if err != nil {
						continue // on the next hub at once
					}
					ok = true
					perHubAccept[h].Add(1)
					if try > 0 {
						retried.Add(1)
						if res.Duplicate {
							retriedDup.Add(1)
						}
					}
					if killedAt.Load() {
						afterKill.Add(1)
					}
				}
				if !ok {
					unconfirmed.Add(1)
					continue
				}
				mu.Lock()
				accepted[id] = true
				mu.Unlock()
			}
		}(s)
	}
	nAccepted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted)
	}
	waitfor.TrueWithin(t, time.Minute, "300 messages accepted under load", func() bool { return nAccepted() >= 300 })
	beforeKill := nAccepted()
	procs[killed].Kill() // SIGKILL mid-load
	killedAt.Store(true)
	// Keep sending through the survivors.
	waitfor.TrueWithin(t, time.Minute, "300 messages accepted by the survivors after the kill", func() bool { return afterKill.Load() >= 300 })
	close(stop)
	wg.Wait()

	if beforeKill < 100 {
		t.Fatalf("only %d messages accepted before the kill; the load did not run", beforeKill)
	}
	if afterKill.Load() < 50 {
		t.Fatalf("only %d messages accepted by the survivors after the kill", afterKill.Load())
	}
	survivors := []*client.Client{clients[0], clients[2]}

	// None lost: every acknowledged message has a receipt on the survivors.
	lost := 0
	for id := range accepted {
		if _, err := survivors[len(id)%2].Receipt(ctx, id); err != nil {
			lost++
			t.Errorf("accepted message %s lost: %v", id, err)
		}
	}
	// None routed twice: re-sending any attempted id through a survivor
	// must answer duplicate for every acknowledged one.
	dupAnswers := 0
	for id, sender := range attempted {
		// A re-send repeats the message (an id reused for other content
		// is refused): its payload's n is the id's sequence number.
		n, err := strconv.Atoi(id[len(id)-6:])
		if err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		res, err := survivors[len(id)%2].Send(ctx, client.Message{MessageID: id, Sender: sender, Receiver: target[id], Type: "task.request",
			TTL: 10 * time.Minute, Payload: map[string]any{"n": n}})
		if err != nil {
			t.Fatalf("re-send %s: %v", id, err)
		}
		if accepted[id] && !res.Duplicate {
			t.Errorf("acknowledged message %s was routed a second time", id)
		}
		if res.Duplicate {
			dupAnswers++
		}
	}

	// Every message reaches "delivered"; the killed hub's claims lapse
	// after the 2 s claim lease and the survivors take its lanes over.
	total := len(attempted)
	var statuses map[string]int
	waitfor.OKWithin(t, 90*time.Second, "every message to be delivered", func() error {
		statuses = map[string]int{}
		for id := range attempted {
			rc, err := survivors[len(id)%2].Receipt(ctx, id)
			if err != nil {
				statuses["missing"]++
			} else {
				statuses[rc.Status]++
			}
		}
		if statuses["delivered"] != total {
			return fmt.Errorf("%v of %d", statuses, total)
		}
		return nil
	})

	// Each receiver handled exactly the messages sent to it: the callback
	// workers once each (their deduplication absorbs redeliveries), the
	// stream receiver at least once each.
	handledTotal := 0
	for _, recv := range receivers {
		h := got[recv].snapshot()
		handledTotal += len(h)
		var want []string
		for id, r := range target {
			if r == recv {
				want = append(want, id)
			}
		}
		missing := 0
		for _, id := range want {
			if h[id] == 0 {
				missing++
			}
		}
		if missing > 0 || len(h) != len(want) {
			t.Errorf("%s handled %d distinct messages (%d of its %d missing)", recv, len(h), missing, len(want))
		}
		if recv != "streamer" {
			for id, n := range h {
				if n != 1 {
					t.Errorf("%s handled %s %d times", recv, id, n)
				}
			}
		}
	}
	cancel()
	if err := <-streamDone; err != nil {
		t.Errorf("stream: %v", err)
	}

	// Duplicate deliveries seen by the receivers before deduplication.
	var raw int64
	perRecv := map[string]int64{}
	for _, recv := range receivers {
		n := got[recv].raw.Load()
		raw += n
		perRecv[recv] = n - int64(len(got[recv].snapshot()))
	}
	dupDetail := ""
	for _, k := range slices.Sorted(maps.Keys(perRecv)) {
		dupDetail += fmt.Sprintf(" %s=%d", k, perRecv[k])
	}
	t.Logf("accepted %d (before kill %d, after kill by survivors %d; per hub A=%d B=%d C=%d), attempted %d, unconfirmed %d, lost %d",
		len(accepted), beforeKill, afterKill.Load(), perHubAccept[0].Load(), perHubAccept[1].Load(), perHubAccept[2].Load(), total, unconfirmed.Load(), lost)
	t.Logf("sends retried on another hub %d (answered duplicate: first try had been stored %d); re-sends answered duplicate %d of %d",
		retried.Load(), retriedDup.Load(), dupAnswers, total)
	t.Logf("delivered %d; deliveries seen by receivers %d for %d distinct messages; duplicate deliveries before client dedup %d (%s)",
		statuses["delivered"], raw, handledTotal, raw-int64(handledTotal), dupDetail[1:])
}

// TestCrossInstanceWakeup checks that a message accepted on hub A reaches
// a receiver streaming from hub B at once: B's stream is woken by
// PostgreSQL LISTEN/NOTIFY rather than by its one-second poll, and A's
// receipt waiter is woken when B ends the message. Arrival is asserted
// within a generous deadline; the latencies are logged.
func TestCrossInstanceWakeup(t *testing.T) {
	fullLane(t)
	db := postgresDB(t)
	_, bases := startHubs(t, 2, db)
	a, b := client.New(bases[0]), client.New(bases[1])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := b.Register(ctx, client.Registration{AgentID: "live", Delivery: "stream", LeaseSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	arrived := make(chan string, 16)
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- b.Stream(ctx, "live", func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
			arrived <- env.MessageID
			return client.Reply{}, nil
		}, 10*time.Second)
	}()
	await := func(id string) time.Time {
		t.Helper()
		if got := waitfor.Recv(t, "message "+id+" accepted on hub A to reach the stream on hub B", arrived); got != id {
			t.Fatalf("stream delivered %s, want %s", got, id)
		}
		return time.Now()
	}
	send := func(id string) time.Time {
		t.Helper()
		if _, err := a.Send(ctx, client.Message{MessageID: id, Sender: "planner", Receiver: "live", Type: "task.request", TTL: time.Minute,
			Payload: map[string]any{"text": id}}); err != nil {
			t.Fatalf("send %s on hub A: %v", id, err)
		}
		return time.Now()
	}
	// The first message also proves the stream is connected.
	send("warm-up")
	await("warm-up")

	var lat []time.Duration
	for i := range 10 {
		// Let B's stream go idle (waiting on its wake-up channel or the
		// 1 s poll) at a different phase each time: this pause is the
		// scenario, not a wait for something.
		idle := time.NewTimer(time.Duration(150+97*i) * time.Millisecond)
		<-idle.C
		id := fmt.Sprintf("m-%02d", i)
		acceptedAt := send(id)
		lat = append(lat, await(id).Sub(acceptedAt))
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)

	// The receipt waiter on hub A is woken when hub B's stream is acked.
	t0 := time.Now()
	res, err := a.Send(ctx, client.Message{MessageID: "waited", Sender: "planner", Receiver: "live", Type: "task.request", TTL: time.Minute,
		Payload: map[string]any{"text": "waited"}}, 10*time.Second)
	if err != nil {
		t.Fatalf("send with wait on hub A: %v", err)
	}
	await("waited")
	if res.Status != "delivered" {
		t.Fatalf("send with wait on hub A answered %q, want delivered", res.Status)
	}
	waited := time.Since(t0)

	// Sent on hub B, which holds the stream: handed to it as it is
	// accepted, so the receipt's "pulled" event carries the accept's time.
	for i := range 3 {
		id := fmt.Sprintf("local-%d", i)
		if _, err := b.Send(ctx, client.Message{MessageID: id, Sender: "planner", Receiver: "live", Type: "task.request", TTL: time.Minute,
			Payload: map[string]any{"text": id}}); err != nil {
			t.Fatalf("send %s on hub B: %v", id, err)
		}
		await(id)
		rc, err := b.Receipt(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(rc.History) < 2 || rc.History[1].Detail != "pulled, awaiting ack" || !rc.History[1].At.Equal(rc.History[0].At) {
			t.Fatalf("%s sent on the stream's own hub: history %+v, want it pulled at the moment it was accepted", id, rc.History)
		}
	}
	cancel()
	if err := <-streamDone; err != nil {
		t.Errorf("stream: %v", err)
	}
	t.Logf("accepted on A → handled on B's stream: median %v, max %v (all %v; B's stream polls every 1s without a notification); send with wait on A → delivered receipt %v",
		sorted[len(sorted)/2].Round(time.Microsecond), sorted[len(sorted)-1].Round(time.Microsecond), lat, waited.Round(time.Microsecond))
}

// TestKilledHubsLaneTakenOver: hub A accepts two messages for one lane
// and dies (SIGKILL) while it delivers the first. Hub B heard of both
// through A's due notifications, which since A claims its own lanes only
// wake B's streams, not its scheduler: B must take the lane over by its
// periodic poll once A's claim lapses, and deliver both, in order. The
// takeover time (claim lease 4 s, poll 250 ms) is logged, not asserted.
func TestKilledHubsLaneTakenOver(t *testing.T) {
	fullLane(t)
	db := postgresDB(t)
	procs, bases := startHubs(t, 2, db, "--claim-lease", "4s", "--deliver-timeout", "3s")
	a, b := client.New(bases[0], client.WithRetries(0)), client.New(bases[1])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu       sync.Mutex
		order    []string
		held     = make(chan struct{}) // the first delivery of "held" has arrived
		release  = make(chan struct{}) // let it answer (to a dead hub)
		heldOnce sync.Once
		first    = true
	)
	cb := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		mu.Lock()
		hold := first && env.MessageID == "held"
		first = first && !hold
		order = append(order, env.MessageID)
		mu.Unlock()
		if hold {
			heldOnce.Do(func() { close(held) })
			<-release
		}
		return client.Reply{Result: map[string]any{"ok": true}}, nil
	}, client.CallbackOptions{})
	var raw atomic.Int64 // deliveries before the handler's deduplication
	srv := httptest.NewServer(countingHandler(cb, &raw))
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	if _, err := b.Register(ctx, client.Registration{AgentID: "worker", CallbackURL: srv.URL, LeaseSeconds: 3600}); err != nil {
		t.Fatalf("register worker: %v", err)
	}
	send := func(id string) {
		// Through A, which may answer only once the first attempt ends
		// (never: A is killed first); the answer does not matter, the
		// message being stored does.
		go func() {
			_, _ = a.Send(ctx, client.Message{MessageID: id, Sender: "planner", Receiver: "worker", Type: "task.request",
				TTL: 10 * time.Minute, Payload: map[string]any{"text": id}})
		}()
		waitfor.OK(t, "message "+id+" stored", func() error {
			_, err := b.Receipt(ctx, id)
			return err
		})
	}
	send("held")
	waitfor.Closed(t, "hub A's delivery of the first message to arrive", held)
	send("behind")
	killed := time.Now()
	procs[0].Kill()
	// A's attempt now answers to no one: the handler's deduplication
	// answers B's redelivery of it from what it answered.
	releaseOnce.Do(func() { close(release) })

	waitfor.OKWithin(t, time.Minute, "hub B to deliver both messages of the killed hub's lane", func() error {
		for _, id := range []string{"held", "behind"} {
			rc, err := b.Receipt(ctx, id)
			if err != nil {
				return err
			}
			if rc.Status != "delivered" {
				return fmt.Errorf("%s is %s", id, rc.Status)
			}
		}
		return nil
	})
	took := time.Since(killed)
	mu.Lock()
	defer mu.Unlock()
	// Handled once each, in order; B redelivered "held" (A never
	// recorded its attempt) and delivered "behind".
	if want := []string{"held", "behind"}; !slices.Equal(order, want) {
		t.Fatalf("handled %v, want %v", order, want)
	}
	if raw.Load() < 3 {
		t.Fatalf("%d deliveries reached the receiver, want A's of held, then B's of held and behind", raw.Load())
	}
	t.Logf("lane of the killed hub delivered by the survivor %v after the kill (claim lease 4s); %d deliveries", took.Round(time.Millisecond), raw.Load())
}
