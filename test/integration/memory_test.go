package integration

import (
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pileup"
	"github.com/switchboard-hub/switchboard/internal/proctest"
)

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
	ctx := t.Context()
	load := pileup.Load{Base: "http://" + addr, Messages: messages, Size: size, Receivers: 4, Senders: 32, TTL: 10 * time.Minute,
		// The scenario: a refused sender backs off a second before it
		// tries again, up to 100 tries.
		Retry: func(attempt, _ int, _ string) (time.Duration, bool) { return time.Second, attempt < 99 },
		Answered: func(code int, retryAfter string) {
			if code != 200 && code != 0 && retryAfter == "" {
				t.Errorf("send refused %d without Retry-After", code)
			}
		}}
	if err := load.Register(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := rss(t, hub.Cmd.Process.Pid)
	res := load.Send(ctx)
	after, peak := rss(t, hub.Cmd.Process.Pid)
	t.Logf("accepted %d of %d (%d MiB of payload), %d refusals retried; hub RSS %d MiB before, %d MiB after, peak %d MiB (growth %d MiB, peak growth %d MiB; budget %d MiB)",
		res.Accepted, messages, res.Accepted*size>>20, res.Refused, before>>20, after>>20, peak>>20, (after-before)>>20, (peak-before)>>20, budget>>20)
	if res.Accepted != messages {
		t.Errorf("accepted %d of %d", res.Accepted, messages)
	}
	if peak-before > budget {
		t.Errorf("the hub's memory grew by %d MiB at its peak, past its budget of %d MiB", (peak-before)>>20, budget>>20)
	}
}

// rss reads a process's resident memory and its peak.
func rss(t *testing.T, pid int) (cur, peak int64) {
	t.Helper()
	cur, peak, err := pileup.RSS(pid)
	if err != nil {
		t.Fatalf("read the hub's memory: %v", err)
	}
	return cur, peak
}
