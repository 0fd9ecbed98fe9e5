package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// exampleHub starts a hub for the examples — what `switchboard serve
// --allow-loopback-callbacks` runs, with auth on, on a free loopback port
// — and returns its URL and a function that stops it. Against your own
// hub, use its URL ("http://127.0.0.1:8080" by default).
func exampleHub() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "switchboard-example-")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := hub.New(ctx, hub.Options{DataDir: dir, Addr: "127.0.0.1:0", AdminToken: "sba_example",
		Callbacks: ssrf.Policy{AllowLoopback: true}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() {
		cancel()
		<-done
		_ = h.Close()
		_ = os.RemoveAll(dir)
	}
}

// An agent receives by callback: CallbackHandler is the http.Handler
// behind the callback_url it registers. It decodes each delivery, runs
// the handler once per message id (a redelivery is answered with the
// first reply) and answers the hub with the Reply, which becomes the
// message's receipt. To check the hub's signature on each delivery, set
// CallbackOptions.Verifier (see package webhooksig) with the
// registration's SigningSecret.
func ExampleCallbackHandler() {
	hubURL, stop := exampleHub()
	defer stop()
	ctx := context.Background()

	// The worker: a callback server that upper-cases text.
	handler := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		var p struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(env.Payload, &p); err != nil || p.Text == "" {
			return client.Reject(400, "payload.text is empty"), nil
		}
		return client.Reply{Result: map[string]string{"text": strings.ToUpper(p.Text)}}, nil
	}, client.CallbackOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	// Registering returns the agent's credential; the client keeps it.
	worker := client.New(hubURL)
	if _, err := worker.Register(ctx, client.Registration{AgentID: "worker", CallbackURL: "http://" + ln.Addr().String(),
		Capabilities: []string{"text.upper"}}); err != nil {
		log.Fatal(err)
	}

	// The planner sends, and waits up to 10 s for the receipt.
	planner := client.New(hubURL)
	if _, err := planner.Register(ctx, client.Registration{AgentID: "planner"}); err != nil {
		log.Fatal(err)
	}
	res, err := planner.Send(ctx, client.Message{Sender: "planner", Receiver: "worker", Type: "task.request",
		Payload: map[string]string{"text": "hello"}}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	var receipt struct {
		Result struct {
			Text string `json:"text"`
		} `json:"result"`
	}
	_ = json.Unmarshal(res.Receipt, &receipt)
	fmt.Println(res.Status, receipt.Result.Text)
	// Output: delivered HELLO
}

// An agent without a public address receives by pulling: PullLoop fetches
// its messages, runs the handler on each and acknowledges the ones it
// handled (a message whose handler failed comes back after the visibility
// timeout). The business result goes back as a message of its own,
// correlated to the request; the sender waits for it with WaitResult.
func ExampleClient_PullLoop() {
	hubURL, stop := exampleHub()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	worker := client.New(hubURL)
	if _, err := worker.Register(ctx, client.Registration{AgentID: "worker"}); err != nil { // no callback: pull
		log.Fatal(err)
	}
	planner := client.New(hubURL)
	if _, err := planner.Register(ctx, client.Registration{AgentID: "planner"}); err != nil {
		log.Fatal(err)
	}
	sent, err := planner.Send(ctx, client.Message{Sender: "planner", Receiver: "worker", Type: "task.request",
		Payload: map[string]string{"text": "hello"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent:", sent.Status)

	// The worker's loop: handle, answer with a result, acknowledge.
	loop, stopLoop := context.WithCancel(ctx)
	go func() {
		_ = worker.PullLoop(loop, "worker", func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
			fmt.Printf("worker got %s from %s\n", env.Payload, env.Sender)
			_, err := worker.Send(ctx, client.Message{Sender: "worker", Receiver: env.Sender, Type: "task.result",
				CorrelationID: env.MessageID, Payload: map[string]string{"text": "olleh"}})
			return client.Reply{}, err
		}, time.Minute)
	}()
	defer stopLoop()

	result, err := planner.WaitResult(ctx, sent.MessageID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("planner got %s\n", result.Payload)
	receipt, err := planner.WaitReceipt(ctx, sent.MessageID) // acknowledged by the loop
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("receipt:", receipt.Status)
	// Output:
	// sent: queued
	// worker got {"text":"hello"} from planner
	// planner got {"text":"olleh"}
	// receipt: delivered
}

// Send returns once the hub has stored the message: "queued" until the
// receiver takes it. Sending the same message_id again (a retry after a
// lost answer, say) returns the first outcome and never routes twice.
func ExampleClient_Send() {
	hubURL, stop := exampleHub()
	defer stop()
	ctx := context.Background()

	if _, err := client.New(hubURL).Register(ctx, client.Registration{AgentID: "worker"}); err != nil {
		log.Fatal(err)
	}
	// The planner's first registration returns its credential, which the
	// client then sends with (keep reg.Token to use it again later, with
	// client.WithToken).
	planner := client.New(hubURL)
	if _, err := planner.Register(ctx, client.Registration{AgentID: "planner"}); err != nil {
		log.Fatal(err)
	}
	m := client.Message{MessageID: "order-42", Sender: "planner", Receiver: "worker", Type: "task.request",
		TTL: time.Hour, Payload: map[string]any{"item": "book", "quantity": 1}}
	first, err := planner.Send(ctx, m)
	if err != nil {
		log.Fatal(err)
	}
	again, err := planner.Send(ctx, m)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Status, first.Duplicate)
	fmt.Println(again.Status, again.Duplicate)
	// Output:
	// queued false
	// queued true
}
