package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
	"github.com/switchboard-hub/switchboard/webhooksig"
)

// TestSignedWebhooks registers a worker on an auth-on hub, verifies the
// hub's signature on each delivery, and refuses a replayed and a forged
// request.
func TestSignedWebhooks(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	ctx := context.Background()

	var handled atomic.Int32
	var mu sync.Mutex
	var captured *http.Request
	var capturedBody []byte
	verifier := &webhooksig.Verifier{}
	h := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		handled.Add(1)
		return client.Reply{Result: map[string]any{"ok": true}}, nil
	}, client.CallbackOptions{Verifier: verifier})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if captured == nil {
			captured, capturedBody = r.Clone(context.Background()), body
		}
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	worker := client.New(base)
	reg, err := worker.Register(ctx, client.Registration{AgentID: "worker", CallbackURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Token == "" || reg.SigningSecret == "" {
		t.Fatalf("registration must return a credential and a signing secret: %+v", reg)
	}
	verifier.Secret = []byte(reg.SigningSecret)

	planner := client.New(base)
	if _, err := planner.Register(ctx, client.Registration{AgentID: "planner"}); err != nil {
		t.Fatal(err)
	}
	res, err := planner.Send(ctx, client.Message{Sender: "planner", Receiver: "worker", Type: "task.request", Payload: map[string]any{"text": "x"}}, 5*time.Second)
	if err != nil || res.Status != "delivered" {
		t.Fatalf("signed delivery: %+v %v", res, err)
	}
	// Replay the captured delivery, then forge one without a signature.
	replay := func(sign bool) int {
		req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(capturedBody))
		if sign {
			req.Header = captured.Header.Clone()
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := replay(true); code != http.StatusUnauthorized {
		t.Fatalf("replayed webhook answered %d, want 401", code)
	}
	if code := replay(false); code != http.StatusUnauthorized {
		t.Fatalf("unsigned webhook answered %d, want 401", code)
	}
	if n := handled.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// TestPullLoopAcks receives by pull with acknowledgements.
func TestPullLoopAcks(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client.New(base)
	if _, err := c.Register(ctx, client.Registration{AgentID: "puller"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	go c.PullLoop(ctx, "puller", func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		got <- env.MessageID
		return client.Reply{}, nil
	}, time.Minute)
	res, err := c.Send(ctx, client.Message{MessageID: "p1", Sender: "x", Receiver: "puller", Type: "t"})
	if err != nil || res.Status != "queued" {
		t.Fatalf("send: %+v %v", res, err)
	}
	if id := waitfor.Recv(t, "the pull loop to receive p1", got); id != "p1" {
		t.Fatalf("got %s", id)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	rc, err := c.WaitReceipt(wctx, "p1")
	if err != nil || rc.Status != "delivered" {
		t.Fatalf("acknowledged pull: %+v %v", rc, err)
	}
}

// TestStream receives over the live stream, acknowledging each message.
func TestStream(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client.New(base)
	if _, err := c.Register(ctx, client.Registration{AgentID: "live", Delivery: "stream"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	go c.Stream(ctx, "live", func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		got <- env.MessageID
		return client.Reply{}, nil
	}, time.Minute)
	for _, id := range []string{"s1", "s2"} {
		if _, err := c.Send(ctx, client.Message{MessageID: id, Sender: "x", Receiver: "live", Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"s1", "s2"} {
		if id := waitfor.Recv(t, "the stream to deliver "+want, got); id != want {
			t.Fatalf("got %s, want %s", id, want)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if rc, err := c.WaitReceipt(wctx, "s2"); err != nil || rc.Status != "delivered" {
		t.Fatalf("acknowledged stream message: %+v %v", rc, err)
	}
}

// TestStreamKeepsSendOrder receives, over one stream, messages queued
// before it opened (pulled) and messages sent while it is open (handed to
// it as they are accepted, or pulled when it falls behind): each arrives
// once, in the order it was sent.
func TestStreamKeepsSendOrder(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client.New(base)
	if _, err := c.Register(ctx, client.Registration{AgentID: "ordered", Delivery: "stream"}); err != nil {
		t.Fatal(err)
	}
	var want []string
	send := func(i int) {
		t.Helper()
		id := fmt.Sprintf("o-%03d", i)
		want = append(want, id)
		if _, err := c.Send(ctx, client.Message{MessageID: id, Sender: "x", Receiver: "ordered", Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 150 {
		send(i)
	}
	got := make(chan string, 1000)
	var handled atomic.Int64
	go c.Stream(ctx, "ordered", func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		got <- env.MessageID
		handled.Add(1)
		return client.Reply{}, nil
	}, time.Minute)
	for i := 150; i < 400; i++ {
		send(i)
		if i%50 == 0 {
			// Now and then the stream catches up, so that later sends
			// find it idle and are handed to it as they are accepted.
			n := len(want)
			waitfor.True(t, fmt.Sprintf("the stream to catch up with %d sends", n), func() bool { return handled.Load() >= int64(n) })
		}
	}
	for n, w := range want {
		if id := waitfor.Recv(t, fmt.Sprintf("message %d of %d over the stream", n, len(want)), got); id != w {
			t.Fatalf("message %d over the stream is %s, want %s", n, id, w)
		}
	}
	// Every message was acknowledged; none came twice meanwhile.
	for _, id := range want {
		wctx, wcancel := context.WithTimeout(ctx, waitfor.Timeout)
		rc, err := c.WaitReceipt(wctx, id)
		wcancel()
		if err != nil || rc.Status != "delivered" {
			t.Fatalf("%s: %+v %v", id, rc, err)
		}
	}
	select {
	case id := <-got:
		t.Fatalf("%s came again", id)
	default:
	}
}

// TestStreamAcksEveryHandledMessage sends a burst over the stream: every
// handled message ends delivered (acknowledged in batches), and one whose
// handler failed comes again after the visibility timeout.
func TestStreamAcksEveryHandledMessage(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client.New(base)
	if _, err := c.Register(ctx, client.Registration{AgentID: "burst", Delivery: "stream"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	go c.Stream(ctx, "burst", func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[env.MessageID]++
		if env.MessageID == "b-fails-once" && seen[env.MessageID] == 1 {
			return client.Reply{}, errors.New("not now")
		}
		return client.Reply{}, nil
	}, 700*time.Millisecond)
	ids := []string{"b-fails-once"}
	for i := range 150 {
		ids = append(ids, fmt.Sprintf("b-%d", i))
	}
	for _, id := range ids {
		if _, err := c.Send(ctx, client.Message{MessageID: id, Sender: "x", Receiver: "burst", Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	for _, id := range ids {
		if rc, err := c.WaitReceipt(wctx, id); err != nil || rc.Status != "delivered" {
			t.Fatalf("%s: %+v %v", id, rc, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["b-fails-once"] != 2 {
		t.Errorf("the failed message was handled %d times, want 2 (again after the visibility timeout)", seen["b-fails-once"])
	}
	for _, id := range ids[1:] {
		if seen[id] != 1 {
			t.Errorf("%s handled %d times, want once (acknowledged before its lease ended)", id, seen[id])
		}
	}
}
