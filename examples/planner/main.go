// Command planner is the ATP tutorial's planner written with the Go client:
// it sends a task to "worker", waits for the receipt and then for the
// worker's result, and retries with a fresh id after a terminal failure,
// up to three attempts.
//
// It runs unchanged against a default hub (auth on) on the same machine.
// Its token: -token, else SWITCHBOARD_PLANNER_TOKEN, else planner.token; a
// token the hub issues at the first registration is written to that file
// (mode 0600), so the next run registers again with it.
//
//	go run ./examples/planner -hub http://127.0.0.1:8080 -text "multi agent via relay"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/examples/internal/agenttoken"
)

func main() {
	hub := flag.String("hub", envOr("SWITCHBOARD_HUB", "http://127.0.0.1:8080"), "hub URL (env SWITCHBOARD_HUB)")
	id := flag.String("id", "planner", "agent id")
	to := flag.String("to", "worker", "the worker's agent id")
	text := flag.String("text", "multi agent via relay", "text to reverse")
	ttl := flag.Duration("ttl", 5*time.Second, "message TTL")
	token := flag.String("token", "", "the planner's token (default: $SWITCHBOARD_<ID>_TOKEN, else the token file)")
	tokenFile := flag.String("token-file", "", "where the planner keeps its token between runs (default: <id>.token)")
	flag.Parse()
	if *tokenFile == "" {
		*tokenFile = agenttoken.DefaultFile(*id)
	}
	ctx := context.Background()
	tok, err := agenttoken.Load(*id, *token, *tokenFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c := client.New(*hub, client.WithToken(tok))
	r, err := c.Register(ctx, client.Registration{AgentID: *id, Capabilities: []string{"plan"}, LeaseSeconds: 300})
	if err != nil {
		fmt.Fprintf(os.Stderr, "register %s: %v (a hub with auth on needs the token of an id registered before: -token, %s or %s)\n",
			*id, err, agenttoken.EnvVar(*id), *tokenFile)
		os.Exit(1)
	}
	if r.Token != "" {
		if err := agenttoken.Save(*tokenFile, r.Token); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("the hub issued %s a token; saved in %s (mode 0600) for the next run\n", *id, *tokenFile)
	}
	rc, result, err := sendTask(ctx, c, *id, *to, *text, *ttl, 3)
	if err != nil {
		fmt.Println("final: failed:", err)
		os.Exit(1)
	}
	fmt.Printf("final: %s %s\n", rc.Status, result)
	// The result was read by its correlation id; take it off the planner's
	// queue too, so it does not wait there until its TTL.
	_, _ = c.Pull(ctx, *id, 100, false, 0)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// sendTask sends the task until it is delivered (at most attempts times)
// and returns its receipt and the worker's result.
func sendTask(ctx context.Context, c *client.Client, from, to, text string, ttl time.Duration, attempts int) (*client.Receipt, string, error) {
	id := client.NewID()
	var last error
	for a := 1; a <= attempts; a++ {
		res, err := c.Send(ctx, client.Message{MessageID: id, Sender: from, Receiver: to, Type: "task.request",
			TTL: ttl, Payload: map[string]any{"text": text}})
		if err != nil {
			return nil, "", err
		}
		fmt.Printf("attempt %d → %s\n", a, res.Status)
		wctx, cancel := context.WithTimeout(ctx, ttl+2*time.Second)
		rc, err := c.WaitReceipt(wctx, id)
		cancel()
		if err == nil && rc.Status == "delivered" {
			rctx, cancel := context.WithTimeout(ctx, ttl+2*time.Second)
			env, err := c.WaitResult(rctx, id)
			cancel()
			if err != nil {
				return rc, "", fmt.Errorf("delivered, but no result: %w", err)
			}
			return rc, string(env.Payload), nil
		}
		if err == nil {
			last = errors.New(rc.Status)
			id = client.NewID() // the hub ended that id; a new attempt needs a new one
		} else {
			last = err
		}
		fmt.Printf("no receipt: %v\n", last)
		time.Sleep(time.Duration(500<<(a-1)) * time.Millisecond)
	}
	return nil, "", last
}
