// Command worker is the ATP tutorial's worker written with the Go client:
// it registers a callback, keeps its lease alive, reverses text it is sent
// and answers duplicates from memory.
//
//	go run ./examples/worker -hub http://127.0.0.1:8080 -listen 127.0.0.1:8002
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
)

func main() {
	hub := flag.String("hub", "http://127.0.0.1:8080", "hub URL")
	listen := flag.String("listen", "127.0.0.1:8002", "callback listen address")
	id := flag.String("id", "worker", "agent id")
	token := flag.String("token", os.Getenv("SWITCHBOARD_TOKEN"), "agent credential (auth-on hubs issue one at first registration)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *hub, *listen, *id, *token); err != nil {
		slog.Error("worker", "err", err)
		os.Exit(1)
	}
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func run(ctx context.Context, hub, listen, id, token string) error {
	handler := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		if env.Type != "task.request" {
			return client.Reject(415, "unknown type "+env.Type), nil
		}
		var p struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(env.Payload, &p); err != nil || p.Text == "" {
			return client.Reject(400, "payload.text is empty"), nil
		}
		return client.Reply{Result: map[string]any{"text": reverse(p.Text)}}, nil
	}, client.CallbackOptions{})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	go func() { _ = srv.Serve(ln) }()

	c := client.New(hub, client.WithToken(token))
	reg := client.Registration{AgentID: id, CallbackURL: "http://" + ln.Addr().String() + "/atp/inbox", Capabilities: []string{"text.reverse"}, LeaseSeconds: 30}
	r, err := c.Register(ctx, reg)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	fmt.Printf("registered %s (%d queued)\n", r.URI, r.Queued)
	if r.Token != "" {
		fmt.Println("credential issued; keep it to re-register:", r.Token)
	}
	c.KeepAlive(ctx, reg, func(err error) { slog.Warn("lease renewal", "err", err) })
	return nil
}
