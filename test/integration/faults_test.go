package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// The fault tests run the real binary with a short per-attempt delivery
// timeout, so that a slow receiver is a failed attempt within the test's
// time.
const attemptTimeout = 500 * time.Millisecond

// fault is what a receiver does with one delivery attempt instead of
// answering at once: answer late (only after the hub gave up on the
// attempt at its timeout and hung up: the message is handled, but the hub
// never hears so), and/or answer an HTTP status without handling the
// message.
type fault struct {
	late   bool
	status int
}

// receiver is an agent's callback server: the Go client's callback handler
// (which deduplicates by message id) behind a fault injector that counts
// every delivery attempt that reaches it.
type receiver struct {
	fault func(id string, attempt int) fault

	mu       sync.Mutex
	attempts map[string]int // delivery attempts per message, before dedup
	handled  map[string]int // messages the agent's handler ran for
	dups     atomic.Int64   // redeliveries the client's dedup absorbed
	// down makes the receiver hang up on every request, unanswered (an
	// agent that is offline); hungUp counts those requests.
	down   atomic.Bool
	hungUp atomic.Int64
	cb     http.Handler
}

func newReceiver(f func(id string, attempt int) fault) *receiver {
	rv := &receiver{fault: f, attempts: map[string]int{}, handled: map[string]int{}}
	rv.cb = client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		rv.mu.Lock()
		rv.handled[env.MessageID]++
		rv.mu.Unlock()
		return client.Reply{Result: map[string]any{"ok": true}}, nil
	}, client.CallbackOptions{OnDuplicate: func(string) { rv.dups.Add(1) }})
	return rv
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rv.down.Load() {
		rv.hungUp.Add(1)
		hangUp(w)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var env struct {
		MessageID string `json:"message_id"`
	}
	_ = json.Unmarshal(body, &env)
	rv.mu.Lock()
	rv.attempts[env.MessageID]++
	n := rv.attempts[env.MessageID]
	rv.mu.Unlock()
	if rv.fault != nil {
		f := rv.fault(env.MessageID, n)
		if f.late {
			<-r.Context().Done() // the hub's attempt timed out (or the server closed)
		}
		if f.status != 0 {
			w.WriteHeader(f.status)
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rv.cb.ServeHTTP(w, r)
}

func (rv *receiver) counts() (attempts int, handled map[string]int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	handled = map[string]int{}
	for id, n := range rv.handled {
		handled[id] = n
	}
	for _, n := range rv.attempts {
		attempts += n
	}
	return attempts, handled
}

// serveOn runs rv on addr ("127.0.0.1:0" for any port) until stop is called.
func serveOn(t *testing.T, addr string, h http.Handler) (bound string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { _ = srv.Close() }) }
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// ledger tracks what the hub acknowledged.
type ledger struct {
	mu       sync.Mutex
	accepted []string
	// refused maps a refused send to its HTTP status (0: no answer).
	refused map[string]int
	answers map[string]string
}

func newLedger() *ledger { return &ledger{refused: map[string]int{}, answers: map[string]string{}} }

// send sends one message and records the hub's answer.
func (l *ledger) send(c *client.Client, id, sender, receiver string, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Send(ctx, client.Message{MessageID: id, Sender: sender, Receiver: receiver, Type: "task.request", TTL: ttl,
		Payload: map[string]any{"id": id}})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.accepted = append(l.accepted, id)
		delete(l.refused, id)
		return nil
	}
	var he *client.Error
	if errors.As(err, &he) {
		l.refused[id] = he.StatusCode
		l.answers[id] = he.Error()
	} else {
		l.refused[id] = 0
		l.answers[id] = err.Error()
	}
	return err
}

// sendMany sends perSender messages from each of senders concurrent
// senders to receiver.
func (l *ledger) sendMany(t *testing.T, c *client.Client, prefix, receiver string, senders, perSender int, ttl time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for i := 0; i < perSender; i++ {
				_ = l.send(c, fmt.Sprintf("%s-s%d-%03d", prefix, s, i), fmt.Sprintf("%s-sender%d", prefix, s), receiver, ttl)
			}
		}(s)
	}
	wg.Wait()
}

// tally is the outcome of a fault test.
type tally struct {
	accepted, delivered, deadLettered, lost, duplicates, attempts int
}

// settle waits until every accepted message has a terminal receipt, then
// counts: delivered (and handled exactly once by the receiver), dead-lettered
// (timeout or rejected), lost (no receipt, stuck, or reported delivered but
// never handled) and the duplicate deliveries the client absorbed.
func settle(t *testing.T, c *client.Client, l *ledger, rvs []*receiver, within time.Duration) tally {
	t.Helper()
	ctx := context.Background()
	l.mu.Lock()
	ids := append([]string(nil), l.accepted...)
	l.mu.Unlock()
	status := map[string]string{}
	waitfor.OKWithin(t, within, fmt.Sprintf("%d accepted messages to end", len(ids)), func() error {
		pending := 0
		for _, id := range ids {
			if s := status[id]; s == "delivered" || s == "timeout" || s == "rejected" || s == "expired" {
				continue
			}
			rc, err := c.Receipt(ctx, id)
			if err != nil {
				status[id] = "missing"
				pending++
				continue
			}
			status[id] = rc.Status
			if rc.Status == "queued" {
				pending++
			}
		}
		if pending > 0 {
			return fmt.Errorf("%d still queued or missing", pending)
		}
		return nil
	})
	handled := map[string]int{}
	tl := tally{accepted: len(ids)}
	for _, rv := range rvs {
		a, h := rv.counts()
		tl.attempts += a
		tl.duplicates += int(rv.dups.Load())
		for id, n := range h {
			handled[id] += n
		}
	}
	for _, id := range ids {
		switch status[id] {
		case "delivered":
			tl.delivered++
			if handled[id] != 1 {
				tl.lost++
				t.Errorf("message %s delivered but handled %d times by the receiver", id, handled[id])
			}
		case "timeout", "rejected", "expired":
			tl.deadLettered++
		default:
			tl.lost++
			t.Errorf("accepted message %s ended %q", id, status[id])
		}
	}
	t.Logf("accepted %d, delivered %d, dead-lettered %d, lost %d, duplicates delivered to the receiver (absorbed by client dedup) %d, delivery attempts %d",
		tl.accepted, tl.delivered, tl.deadLettered, tl.lost, tl.duplicates, tl.attempts)
	if tl.lost != 0 {
		t.Fatalf("%d acknowledged messages lost", tl.lost)
	}
	return tl
}

// startFaultHub runs `switchboard serve --dev` (auth off; loopback callbacks
// allowed) on a data directory with the short attempt timeout.
func startFaultHub(t *testing.T, data string) (*proctest.Proc, *client.Client) {
	t.Helper()
	p := proctest.StartHub(t, "", "--dev", "--data", data, "--deliver-timeout", attemptTimeout.String())
	return p, client.New(p.URL)
}

func registerAgent(t *testing.T, c *client.Client, id, url string, lease int) {
	t.Helper()
	if _, err := c.Register(context.Background(), client.Registration{AgentID: id, CallbackURL: url, LeaseSeconds: lease}); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
}

// TestFaultReceiverTimesOut: a receiver whose first answer to each message
// comes after the hub's attempt timeout gets the message again and handles
// it once; one that never answers in time has its messages dead-lettered
// (timeout) when their TTL passes.
func TestFaultReceiverTimesOut(t *testing.T) {
	fullLane(t)
	_, c := startFaultHub(t, t.TempDir())
	slow := newReceiver(func(_ string, attempt int) fault {
		if attempt == 1 {
			return fault{late: true}
		}
		return fault{}
	})
	stuck := newReceiver(func(string, int) fault { return fault{late: true} })
	slowAddr, _ := serveOn(t, "127.0.0.1:0", slow)
	stuckAddr, _ := serveOn(t, "127.0.0.1:0", stuck)
	registerAgent(t, c, "slow", "http://"+slowAddr, 600)
	registerAgent(t, c, "stuck", "http://"+stuckAddr, 600)

	l := newLedger()
	l.sendMany(t, c, "slow", "slow", 4, 8, 2*time.Minute)
	l.sendMany(t, c, "stuck", "stuck", 1, 3, 2*time.Second)
	if len(l.refused) != 0 {
		t.Fatalf("sends refused: %v", l.answers)
	}
	tl := settle(t, c, l, []*receiver{slow, stuck}, 60*time.Second)
	if tl.delivered != 32 || tl.deadLettered != 3 {
		t.Fatalf("want 32 delivered and 3 dead-lettered, got %+v", tl)
	}
	if _, h := stuck.counts(); len(h) == 0 {
		t.Log("note: the stuck receiver never finished handling a message")
	}
}

// TestFaultReceiver500ThenOK: a receiver that answers 500 for a while is
// retried with backoff until it recovers; every message is delivered once.
func TestFaultReceiver500ThenOK(t *testing.T) {
	fullLane(t)
	_, c := startFaultHub(t, t.TempDir())
	var healthy atomic.Bool
	flaky := newReceiver(func(string, int) fault {
		if !healthy.Load() {
			return fault{status: http.StatusInternalServerError}
		}
		return fault{}
	})
	addr, _ := serveOn(t, "127.0.0.1:0", flaky)
	registerAgent(t, c, "flaky", "http://"+addr, 600)
	l := newLedger()
	l.sendMany(t, c, "e500", "flaky", 4, 10, 2*time.Minute)
	// Two failed attempts per lane (one per sender) at least.
	waitfor.True(t, "8 failed delivery attempts", func() bool { a, _ := flaky.counts(); return a >= 8 })
	if _, h := flaky.counts(); len(h) != 0 {
		t.Fatalf("while failing: %d handled", len(h))
	}
	healthy.Store(true)
	tl := settle(t, c, l, []*receiver{flaky}, 60*time.Second)
	if tl.delivered != 40 || tl.attempts <= 40 {
		t.Fatalf("want 40 delivered after retries, got %+v", tl)
	}
}

// TestFaultReceiverFlaps: the receiver goes offline and comes back, first
// by hanging up on every delivery for a while (its lease still current,
// so the hub retries with backoff), then by letting its lease expire and
// renewing it (the hub holds its messages while the lease is lapsed).
func TestFaultReceiverFlaps(t *testing.T) {
	fullLane(t)
	_, c := startFaultHub(t, t.TempDir())
	ctx := context.Background()

	t.Run("listener", func(t *testing.T) {
		rv := newReceiver(nil)
		addr, _ := serveOn(t, "127.0.0.1:0", rv)
		registerAgent(t, c, "flapper", "http://"+addr, 600)
		l := newLedger()
		// Four senders send (one message each per 10 ms) until the
		// flapping ends, so messages arrive while the receiver is up, down
		// and coming back.
		done := make(chan struct{})
		var wg sync.WaitGroup
		for s := range 4 {
			wg.Go(func() {
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					_ = l.send(c, fmt.Sprintf("flap-s%d-%04d", s, i), fmt.Sprintf("flap-sender%d", s), "flapper", 2*time.Minute)
				}
			})
		}
		for round := range 3 {
			a0, _ := rv.counts()
			waitfor.True(t, fmt.Sprintf("round %d: five deliveries while the receiver is up", round), func() bool {
				a, _ := rv.counts()
				return a >= a0+5
			})
			h0 := rv.hungUp.Load()
			rv.down.Store(true) // offline
			waitfor.True(t, fmt.Sprintf("round %d: a delivery attempt to fail while the receiver is down", round), func() bool {
				return rv.hungUp.Load() > h0
			})
			rv.down.Store(false) // back
		}
		close(done)
		wg.Wait()
		if len(l.refused) != 0 {
			t.Fatalf("sends refused: %v", l.answers)
		}
		tl := settle(t, c, l, []*receiver{rv}, 60*time.Second)
		if tl.delivered != tl.accepted {
			t.Fatalf("want all %d delivered, got %+v", tl.accepted, tl)
		}
		// The outages hit deliveries: some needed more than one attempt.
		retried := 0
		for _, id := range l.accepted {
			if rc, err := c.Receipt(ctx, id); err == nil && rc.Attempts > 1 {
				retried++
			}
		}
		t.Logf("%d of %d messages needed more than one attempt (receiver offline)", retried, tl.accepted)
		if retried == 0 {
			t.Fatal("no delivery met the receiver offline; the flapping did not happen")
		}
	})

	t.Run("lease", func(t *testing.T) {
		// Deliveries of the messages sent while the lease was lapsed that
		// reached the receiver before it renewed: there must be none.
		var renewed atomic.Bool
		var early atomic.Int32
		rv := newReceiver(func(id string, _ int) fault {
			if strings.HasPrefix(id, "lapsed") && !renewed.Load() {
				early.Add(1)
			}
			return fault{}
		})
		addr, _ := serveOn(t, "127.0.0.1:0", rv)
		registerAgent(t, c, "leased", "http://"+addr, 1)
		l := newLedger()
		l.sendMany(t, c, "alive", "leased", 1, 3, 2*time.Minute)
		waitfor.OK(t, "the agent's 1 s lease to lapse", func() error {
			agents, err := c.Agents(ctx, "", true)
			if err != nil {
				return err
			}
			if a, alive := agents["leased"]; alive {
				return fmt.Errorf("still alive: %+v", a)
			}
			return nil
		})
		l.sendMany(t, c, "lapsed", "leased", 2, 5, 2*time.Minute)
		for _, id := range l.accepted {
			if !strings.HasPrefix(id, "lapsed") {
				continue
			}
			if rc, err := c.Receipt(ctx, id); err != nil || rc.Status != "queued" {
				t.Fatalf("message %s to a lapsed agent: %+v %v, want queued", id, rc, err)
			}
		}
		renewed.Store(true)
		if err := c.Heartbeat(ctx, "leased", 600); err != nil {
			t.Fatal(err)
		}
		if tl := settle(t, c, l, []*receiver{rv}, 30*time.Second); tl.delivered != 13 {
			t.Fatalf("want 13 delivered, got %+v", tl)
		}
		if n := early.Load(); n != 0 {
			t.Fatalf("%d deliveries to the agent while its lease was lapsed", n)
		}
	})
}

// TestFaultDiskFull fills the hub's data directory (a small tmpfs): sends
// are refused with a 5xx while it is full, nothing acknowledged is lost,
// and once space is freed sends work again and every acknowledged message
// is delivered. It needs root (mount); it fails rather than skips without.
func TestFaultDiskFull(t *testing.T) {
	fullLane(t)
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := proctest.Command(context.Background(), "mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", data).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s (the disk-full test needs root or CAP_SYS_ADMIN): %v %s", data, err, out)
	}
	t.Cleanup(func() { // after the hub is killed (cleanups run last-in first-out)
		if out, err := proctest.Command(context.Background(), "umount", data).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", data, err, out)
			_ = proctest.Command(context.Background(), "umount", "-l", data).Run()
		}
	})
	hub, c := startFaultHub(t, data)
	rv := newReceiver(nil)
	addr, _ := serveOn(t, "127.0.0.1:0", rv)
	registerAgent(t, c, "keeper", "http://"+addr, 600)
	l := newLedger()
	l.sendMany(t, c, "before", "keeper", 2, 10, 10*time.Minute)

	// Fill the file system.
	filler := filepath.Join(data, "filler")
	fh, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{0xAB}, 64<<10)
	for {
		if _, err := fh.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	fh.Close()

	// While full: every send is answered; the refused ones with a 5xx.
	full := newLedger()
	for i := 0; i < 40; i++ {
		_ = full.send(c, fmt.Sprintf("full-%03d", i), "writer", "keeper", 10*time.Minute)
	}
	for id, code := range full.refused {
		if code != http.StatusInsufficientStorage {
			t.Errorf("send %s refused with %d (%s), want 507 storage_full", id, code, full.answers[id])
		}
	}
	if len(full.refused) == 0 {
		t.Fatalf("all 40 sends accepted on a full disk")
	}
	var sample string
	for _, a := range full.answers {
		sample = a
		break
	}
	t.Logf("disk full: %d sends accepted, %d refused (e.g. %q)", len(full.accepted), len(full.refused), sample)
	if hub.Exited() {
		t.Fatalf("the hub exited on a full disk:\n%s", hub.Out.String())
	}

	// Free the space: the same ids are retried, then new ones sent.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	after := newLedger()
	// The hub may refuse a send or two while it recovers the space.
	retry := func(id string) {
		waitfor.OK(t, "send "+id+" to be accepted once space was freed", func() error {
			return after.send(c, id, "writer", "keeper", 10*time.Minute)
		})
	}
	for id := range full.refused {
		retry(id)
	}
	for i := 0; i < 20; i++ {
		retry(fmt.Sprintf("after-%03d", i))
	}
	all := newLedger()
	all.accepted = append(append(append(all.accepted, l.accepted...), full.accepted...), after.accepted...)
	tl := settle(t, c, all, []*receiver{rv}, 60*time.Second)
	if want := 20 + 40 + 20; tl.delivered != want {
		t.Fatalf("want %d delivered, got %+v", want, tl)
	}
}

// hangUp closes the request's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}
