// Command capacity checks the embedded store's capacity claims: it seeds a
// data directory with many registered agents and queued messages (through
// the store's own Accept, with group commit), then starts the real
// switchboard binary on it and reports the time until it is ready, the time
// until the first queued message can be pulled, and the hub's resident
// memory.
//
//	go run ./scripts/capacity -agents 100000 -messages 1000000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/pileup"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
	"github.com/switchboard-hub/switchboard/scripts/internal/hubbin"
)

func main() {
	agents := flag.Int("agents", 100000, "registered agents")
	messages := flag.Int("messages", 1000000, "queued messages")
	dir := flag.String("data", "", "data directory (default: a temporary one)")
	bin := hubbin.BinFlag()
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "switchboard-capacity-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	b, err := hubbin.Build(*bin, *dir)
	if err != nil {
		log.Fatal(err)
	}
	data := filepath.Join(*dir, "data")
	seed(data, *agents, *messages)
	measure(b, data)
}

func seed(dir string, agents, messages int) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, dir, sqlite.Options{Sync: "normal"})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	start := time.Now()
	inParallel(agents, func(i int64) {
		a := &core.Agent{ID: fmt.Sprintf("agent-%06d", i), Capabilities: []string{"cap-" + strconv.Itoa(int(i%100))},
			Endpoint: core.Endpoint{Kind: core.EndpointPull}, LeaseSeconds: 86400, ExpiresAt: now.Add(24 * time.Hour),
			RegisteredAt: now, LastSeen: now}
		if _, err := st.UpsertAgent(ctx, a); err != nil {
			log.Fatal(err)
		}
	})
	log.Printf("seeded %d agents in %v", agents, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	inParallel(messages, func(i int64) {
		m := &core.Message{ID: fmt.Sprintf("m-%07d", i), Sender: fmt.Sprintf("agent-%06d", i%int64(agents)),
			Receiver: fmt.Sprintf("agent-%06d", (i*7919)%int64(agents)), Type: "task.request",
			Parts: []core.Part{{Kind: core.PartText, Text: "capacity check message " + strconv.FormatInt(i, 10)}},
			TTL:   24 * time.Hour, ReceivedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
		rc := &core.Receipt{MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Status: core.StatusQueued,
			CreatedAt: now, UpdatedAt: now, ExpiresAt: m.ExpiresAt}
		if _, err := st.Accept(ctx, m, rc, 0); err != nil {
			log.Fatal(err)
		}
		if i%100000 == 0 && i > 0 {
			log.Printf("  %d messages", i)
		}
	})
	log.Printf("seeded %d queued messages in %v", messages, time.Since(start).Round(time.Millisecond))
	var size int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, _ error) error {
		if fi != nil && !fi.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	log.Printf("data directory: %.0f MiB", float64(size)/(1<<20))
}

// inParallel calls f with 0, 1, … n-1 from 64 goroutines (the store
// groups their writes into shared commits) and returns when all are done.
func inParallel(n int, f func(i int64)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}

func measure(bin, data string) {
	addr, err := hubbin.FreeAddr()
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	hub, err := hubbin.Start(bin, addr, "--data", data, "--max-queue", "-1", "--log-level", "warn")
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Stop()
	base := hub.Base
	if err := hub.WaitReady(5*time.Millisecond, time.Minute); err != nil {
		log.Fatal(err)
	}
	ready := time.Since(start)
	// The first queued message of some agent can be pulled.
	resp, err := http.Get(base + "/atp/pending/agent-000007?ack=manual&limit=1")
	if err != nil {
		log.Fatal(err)
	}
	var out struct {
		Messages []json.RawMessage `json:"messages"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	firstPull := time.Since(start)
	// A capability lookup over all agents, and a send.
	t0 := time.Now()
	resp, err = http.Get(base + "/atp/agents?capability=cap-42&limit=10")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	capLookup := time.Since(t0)
	t0 = time.Now()
	resp, err = http.Post(base+"/atp/send", "application/json", strings.NewReader(`{"sender":"agent-000001","receiver":"agent-000002","type":"t","payload":{"text":"x"}}`))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	send := time.Since(t0)
	time.Sleep(2 * time.Second) // let the scheduler's first passes run
	rss, _, err := pileup.RSS(hub.Cmd.Process.Pid)
	if err != nil {
		log.Print(err)
	}
	fmt.Printf("ready after %v; first pull (%d message) after %v; capability lookup %v; send %v (%d); hub RSS %.0f MiB\n",
		ready.Round(time.Millisecond), len(out.Messages), firstPull.Round(time.Millisecond), capLookup.Round(time.Microsecond),
		send.Round(time.Microsecond), resp.StatusCode, float64(rss)/(1<<20))
}
