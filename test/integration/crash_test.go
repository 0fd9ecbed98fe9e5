// Package integration runs the real switchboard binary through faults.
package integration

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestKill9UnderLoad kills the hub with SIGKILL while 16 senders push
// messages to a worker, restarts it on the same data directory, and checks
// that every message the hub acknowledged reaches a terminal status, none is
// lost, and none is routed twice (re-sending an acknowledged id is answered
// as a duplicate; the worker handles each id once).
func TestKill9UnderLoad(t *testing.T) {
	fullLane(t)
	data := t.TempDir()
	hub := proctest.StartHub(t, "", "--dev", "--data", data)

	var deliveries, handled atomic.Int64
	var mu sync.Mutex
	handledIDs := map[string]int{}
	cb := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		handled.Add(1)
		mu.Lock()
		handledIDs[env.MessageID]++
		mu.Unlock()
		return client.Reply{Result: map[string]any{"ok": true}}, nil
	}, client.CallbackOptions{})
	worker := httptest.NewServer(countingHandler(cb, &deliveries))
	defer worker.Close()

	ctx := context.Background()
	c := client.New(hub.URL)
	if _, err := c.Register(ctx, client.Registration{AgentID: "worker", CallbackURL: worker.URL, LeaseSeconds: 600}); err != nil {
		t.Fatal(err)
	}

	var accepted sync.Map // id → true once the hub acknowledged it
	var attempted sync.Map
	var nAccepted, failedAfterKill atomic.Int64
	var killed atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for s := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("s%02d-%06d", s, i)
				attempted.Store(id, true)
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := c.Send(sctx, client.Message{MessageID: id, Sender: fmt.Sprintf("planner%02d", s), Receiver: "worker", Type: "task.request", TTL: 10 * time.Minute, Payload: map[string]any{"n": i}})
				cancel()
				if err == nil {
					accepted.Store(id, true)
					nAccepted.Add(1)
				} else if killed.Load() {
					failedAfterKill.Add(1)
				}
			}
		})
	}
	waitfor.True(t, "300 messages accepted under load", func() bool { return nAccepted.Load() >= 300 })
	killed.Store(true)
	hub.Kill() // SIGKILL mid-load
	waitfor.True(t, "16 sends to fail after the kill", func() bool { return failedAfterKill.Load() >= 16 })
	close(stop)
	wg.Wait()

	count := func(m *sync.Map) (n int) {
		m.Range(func(_, _ any) bool { n++; return true })
		return
	}
	acceptedBefore := count(&accepted)
	if acceptedBefore < 100 {
		t.Fatalf("only %d messages accepted before the kill; the load did not run", acceptedBefore)
	}
	hub = proctest.StartHub(t, "", "--dev", "--data", data) // on a port of its own choosing
	c = client.New(hub.URL)

	// Every acknowledged message exists after the restart (none lost).
	lost := 0
	accepted.Range(func(k, _ any) bool {
		if _, err := c.Receipt(ctx, k.(string)); err != nil {
			lost++
			t.Errorf("accepted message %s lost: %v", k, err)
		}
		return true
	})
	// Senders retry what they could not confirm, with the same ids; ids
	// the hub had acknowledged must come back as duplicates.
	dupAnswers := 0
	attempted.Range(func(k, _ any) bool {
		id := k.(string)
		var s, i int
		if _, err := fmt.Sscanf(id, "s%02d-%06d", &s, &i); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		// A retry repeats the message (the hub refuses an id reused for
		// other content).
		res, err := c.Send(ctx, client.Message{MessageID: id, Sender: fmt.Sprintf("planner%02d", s), Receiver: "worker", Type: "task.request", TTL: 10 * time.Minute, Payload: map[string]any{"n": i}})
		if err != nil {
			t.Fatalf("retry %s: %v", id, err)
		}
		if _, ok := accepted.Load(id); ok && !res.Duplicate {
			t.Errorf("acknowledged message %s was routed a second time", id)
		}
		if res.Duplicate {
			dupAnswers++
		}
		return true
	})
	total := count(&attempted)
	var statuses map[string]int
	waitfor.OKWithin(t, 90*time.Second, "every message to be delivered", func() error {
		statuses = map[string]int{}
		attempted.Range(func(k, _ any) bool {
			rc, err := c.Receipt(ctx, k.(string))
			if err != nil {
				statuses["missing"]++
			} else {
				statuses[rc.Status]++
			}
			return true
		})
		if statuses["delivered"] != total {
			return fmt.Errorf("%v of %d", statuses, total)
		}
		return nil
	})
	mu.Lock()
	twice := 0
	for id, n := range handledIDs {
		if n != 1 {
			twice++
			t.Errorf("worker handled %s %d times", id, n)
		}
	}
	mu.Unlock()
	if len(handledIDs) != total {
		t.Fatalf("worker handled %d distinct messages, want %d", len(handledIDs), total)
	}
	t.Logf("accepted before kill %d, attempted %d, delivered %d, lost %d, duplicate deliveries absorbed by the client %d, duplicate send answers %d",
		acceptedBefore, total, statuses["delivered"], lost, deliveries.Load()-handled.Load(), dupAnswers)
}
