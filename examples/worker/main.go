// Command worker is the ATP tutorial's worker written with the Go client:
// it registers, keeps its lease alive, reverses the text it is sent and
// answers the sender with the result (a message whose correlation_id is
// the task's id).
//
// It runs unchanged against a default hub (auth on, loopback callbacks
// refused) on the same machine: by default it receives over a live stream
// (/atp/stream), which needs no callback URL. With -listen it registers a
// callback instead, for hubs that may call it (--allow-loopback-callbacks,
// --dev, or a worker on another host), and verifies the hub's signatures.
//
// Its token: -token, else SWITCHBOARD_WORKER_TOKEN, else worker.token; a
// token the hub issues at the first registration is written to that file
// (mode 0600), so the next run registers again with it.
//
//	go run ./examples/worker -hub http://127.0.0.1:8080
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/examples/internal/agenttoken"
	"github.com/switchboard-hub/switchboard/webhooksig"
)

func main() {
	hub := flag.String("hub", envOr("SWITCHBOARD_HUB", "http://127.0.0.1:8080"), "hub URL (env SWITCHBOARD_HUB)")
	id := flag.String("id", "worker", "agent id")
	listen := flag.String("listen", "", "receive by callback on this address (e.g. 127.0.0.1:8002) instead of a stream; the hub must be allowed to call it")
	token := flag.String("token", "", "the worker's token (default: $SWITCHBOARD_<ID>_TOKEN, else the token file)")
	tokenFile := flag.String("token-file", "", "where the worker keeps its token between runs (default: <id>.token)")
	flag.Parse()
	if *tokenFile == "" {
		*tokenFile = agenttoken.DefaultFile(*id)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *hub, *listen, *id, *token, *tokenFile); err != nil {
		slog.Error("worker", "err", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func run(ctx context.Context, hub, listen, id, token, tokenFile string) error {
	tok, err := agenttoken.Load(id, token, tokenFile)
	if err != nil {
		return err
	}
	c := client.New(hub, client.WithToken(tok))
	// handle reverses a task's text: the result goes back to the sender as
	// a message answering the task, and (by callback) in the receipt too.
	handle := func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		if env.Type != "task.request" {
			return client.Reject(415, "unknown type "+env.Type), nil
		}
		var p struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(env.Payload, &p); err != nil || p.Text == "" {
			return client.Reject(400, "payload.text is empty"), nil
		}
		result := map[string]any{"text": reverse(p.Text)}
		if _, err := c.Send(ctx, client.Message{Sender: id, Receiver: env.Sender, Type: "task.result",
			CorrelationID: env.MessageID, Payload: result}); err != nil {
			slog.Warn("send the result", "task", env.MessageID, "err", err)
		}
		fmt.Printf("reversed %q for %s\n", p.Text, env.Sender)
		return client.Reply{Result: result}, nil
	}

	reg := client.Registration{AgentID: id, Capabilities: []string{"text.reverse"}, LeaseSeconds: 30}
	var verifier *webhooksig.Verifier
	var srv *http.Server
	if listen != "" {
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		verifier = &webhooksig.Verifier{}
		srv = &http.Server{Handler: client.CallbackHandler(handle, client.CallbackOptions{Verifier: verifier}), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		reg.CallbackURL = "http://" + ln.Addr().String() + "/atp/inbox"
	}
	r, err := c.Register(ctx, reg)
	if err != nil {
		return fmt.Errorf("register %s: %w (a hub with auth on needs the token of an id registered before: -token, %s or %s)",
			id, err, agenttoken.EnvVar(id), tokenFile)
	}
	if r.Token != "" {
		if err := agenttoken.Save(tokenFile, r.Token); err != nil {
			return err
		}
		fmt.Printf("the hub issued %s a token; saved in %s (mode 0600) for the next run\n", id, tokenFile)
	}
	if verifier != nil {
		verifier.Secret = []byte(r.SigningSecret)
	}
	mode := "by stream"
	if listen != "" {
		mode = "by callback at " + reg.CallbackURL
	}
	fmt.Printf("registered %s (%d queued), receiving %s\n", r.URI, r.Queued, mode)
	go c.KeepAlive(ctx, reg, func(err error) { slog.Warn("lease renewal", "err", err) })
	if listen != "" {
		<-ctx.Done()
		return nil
	}
	return c.Stream(ctx, id, handle, 30*time.Second)
}
