package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestAcceptSeesLaneClaim: an accept reports whether the message's lane
// was claimed for delivery as it was stored (core.AcceptResult.
// LaneClaimed), on the single-message path and in a batch, so that the
// relay does not look for due lanes a claimant already holds; a lane
// released, never claimed, or whose claim lapsed is not claimed.
func TestAcceptSeesLaneClaim(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	send := func(id, sender string, at time.Time) core.AcceptResult {
		t.Helper()
		m := &core.Message{ID: id, Sender: sender, Receiver: "r", Type: "t", ReceivedAt: at, ExpiresAt: at.Add(time.Hour), TTL: time.Hour}
		rc := &core.Receipt{MessageID: id, Sender: sender, Receiver: "r", Status: core.StatusQueued, CreatedAt: at, UpdatedAt: at, ExpiresAt: m.ExpiresAt}
		res, err := s.Accept(ctx, m, rc, 0)
		if err != nil {
			t.Fatalf("accept %s: %v", id, err)
		}
		return res
	}
	check := func(what string, res core.AcceptResult, want bool) {
		t.Helper()
		if res.LaneClaimed != want {
			t.Errorf("%s: LaneClaimed %v, want %v", what, res.LaneClaimed, want)
		}
	}
	check("first message of a new lane", send("m1", "a", base), false)
	claims, err := s.Claim(ctx, base, base.Add(time.Minute), "hub-1", 10, 10)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v, %v", claims, err)
	}
	check("a message to the claimed lane", send("m2", "a", base.Add(time.Second)), true)
	check("a message to another lane", send("o1", "b", base.Add(time.Second)), false)

	// Concurrent accepts share batches (acceptBatchSQL).
	var wg sync.WaitGroup
	results := make([]core.AcceptResult, 32)
	for i := range results {
		wg.Go(func() { results[i] = send(fmt.Sprintf("c%02d", i), "a", base.Add(2*time.Second)) })
	}
	wg.Wait()
	for i, res := range results {
		check(fmt.Sprintf("concurrent message %d to the claimed lane", i), res, true)
	}
	check("a message after the claim lapsed", send("late", "a", base.Add(2*time.Minute)), false)

	if err := s.Complete(ctx, "hub-1", []core.LaneResult{{Lane: claims[0].Lane}}); err != nil {
		t.Fatal(err)
	}
	check("a message to a released lane", send("m3", "a", base.Add(3*time.Second)), false)
}
