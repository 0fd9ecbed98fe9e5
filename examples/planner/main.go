// Command planner is the ATP tutorial's planner written with the Go client:
// it sends a task to "worker", waits for the receipt, and retries with a
// fresh id after a terminal failure, up to three attempts.
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
)

func main() {
	hub := flag.String("hub", "http://127.0.0.1:8080", "hub URL")
	text := flag.String("text", "multi agent via relay", "text to reverse")
	ttl := flag.Duration("ttl", 5*time.Second, "message TTL")
	token := flag.String("token", os.Getenv("SWITCHBOARD_TOKEN"), "planner credential (auth-on hubs)")
	flag.Parse()
	ctx := context.Background()
	c := client.New(*hub, client.WithToken(*token))
	if _, err := c.Register(ctx, client.Registration{AgentID: "planner", Capabilities: []string{"plan"}, LeaseSeconds: 300}); err != nil {
		fmt.Fprintln(os.Stderr, "register:", err)
		os.Exit(1)
	}
	rc, err := sendTask(ctx, c, *text, *ttl, 3)
	if err != nil {
		fmt.Println("final: failed:", err)
		os.Exit(1)
	}
	fmt.Printf("final: %s %s\n", rc.Status, rc.Receipt)
}

func sendTask(ctx context.Context, c *client.Client, text string, ttl time.Duration, attempts int) (*client.Receipt, error) {
	id := client.NewID()
	var last error
	for a := 1; a <= attempts; a++ {
		res, err := c.Send(ctx, client.Message{MessageID: id, Sender: "planner", Receiver: "worker", Type: "task.request",
			TTL: ttl, Payload: map[string]any{"text": text}})
		if err != nil {
			return nil, err
		}
		fmt.Printf("attempt %d → %s\n", a, res.Status)
		wctx, cancel := context.WithTimeout(ctx, ttl+2*time.Second)
		rc, err := c.WaitReceipt(wctx, id)
		cancel()
		if err == nil && rc.Status == "delivered" {
			return rc, nil
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
	return nil, last
}
