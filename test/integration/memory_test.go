package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/proctest"
)

// rss reads a process's resident memory and its peak from /proc.
func rss(t *testing.T, pid int) (cur, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the hub's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			cur = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	return cur, peak
}

// TestMemoryBudgetHolds sends 400 messages of 950 KiB from 32 concurrent
// senders to four receivers that never take them, through a real hub with
// --memory-budget 128MiB, and wants the hub's resident memory (its peak
// included) to grow by less than the budget, every message accepted in the
// end (a send refused 507 over_budget is retried after its Retry-After),
// and every refusal to carry Retry-After. Before byte budgets, 320 such
// messages to four agents raised the hub's memory by 467 MiB.
func TestMemoryBudgetHolds(t *testing.T) {
	const (
		budget   = 128 << 20
		messages = 400
		size     = 950 << 10
	)
	addr := proctest.FreeAddr(t)
	hub := proctest.StartHub(t, addr, "--dev", "--data", t.TempDir(), "--rate-limit", "-1", "--memory-budget", "128MiB")
	base := "http://" + addr
	post := func(path string, body []byte) (int, string) {
		resp, err := http.Post(base+path, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, ""
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for _, id := range []string{"r0", "r1", "r2", "r3", "sender"} {
		if code, _ := post("/atp/register", []byte(`{"agent_id":"`+id+`"}`)); code != 200 {
			t.Fatalf("register %s: %d", id, code)
		}
	}
	before, _ := rss(t, hub.Cmd.Process.Pid)
	text := strings.Repeat("x", size)
	var next, accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < messages; i = int(next.Add(1)) - 1 {
				body, _ := json.Marshal(map[string]any{"message_id": fmt.Sprintf("m%04d", i), "sender": "sender",
					"receiver": fmt.Sprintf("r%d", i%4), "type": "blob", "ttl_ms": 600000, "payload": map[string]string{"text": text}})
				for attempt := 0; attempt < 100; attempt++ {
					code, retry := post("/atp/send", body)
					if code == 200 {
						accepted.Add(1)
						break
					}
					refused.Add(1)
					if code != 0 && retry == "" {
						t.Errorf("send refused %d without Retry-After", code)
					}
					time.Sleep(time.Second) // the scenario: a refused sender backs off before it tries again
				}
			}
		}()
	}
	wg.Wait()
	after, peak := rss(t, hub.Cmd.Process.Pid)
	t.Logf("accepted %d of %d (%d MiB of payload), %d refusals retried; hub RSS %d MiB before, %d MiB after, peak %d MiB (growth %d MiB, peak growth %d MiB; budget %d MiB)",
		accepted.Load(), messages, accepted.Load()*size>>20, refused.Load(), before>>20, after>>20, peak>>20, (after-before)>>20, (peak-before)>>20, budget>>20)
	if accepted.Load() != messages {
		t.Errorf("accepted %d of %d", accepted.Load(), messages)
	}
	if peak-before > budget {
		t.Errorf("the hub's memory grew by %d MiB at its peak, past its budget of %d MiB", (peak-before)>>20, budget>>20)
	}
}
