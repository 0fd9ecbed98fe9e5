package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// renewCases check core.LaneRenewer on stores that implement it.
var renewCases = []testCase{
	{"renews a busy lane with its next messages", func(t *testing.T, s core.Store) {
		rn := renewer(t, s)
		for i, id := range []string{"m1", "m2", "m3"} {
			send(t, s, id, "alice", "bob", at(time.Duration(i)*time.Second))
		}
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "w", 10, 1)
		wantClaims(t, "first claim", cs, "bob/alice:m1")
		next, err := rn.CompleteRenew(context.Background(), "w", delivered(cs[0].Lane, "m1", at(11*time.Second)), at(11*time.Second), at(41*time.Second), 2)
		if err != nil {
			t.Fatalf("CompleteRenew: %v", err)
		}
		wantIDs(t, "renewed", messageIDs(next), []string{"m2", "m3"})
		if r := receipt(t, s, "m1"); r.Status != core.StatusDelivered {
			t.Fatalf("m1 = %s, want delivered", r.Status)
		}
		wantDepth(t, s, "bob", 2)
		// The lane stays claimed by w: nobody else gets it before 41s.
		wantClaims(t, "while renewed", claim(t, s, at(20*time.Second), at(50*time.Second), "other", 10, 10))
		next, err = rn.CompleteRenew(context.Background(), "w", delivered(cs[0].Lane, "m2", at(12*time.Second), "m3"), at(12*time.Second), at(42*time.Second), 2)
		if err != nil {
			t.Fatalf("CompleteRenew: %v", err)
		}
		wantIDs(t, "drained lane", messageIDs(next), []string{})
		wantDepth(t, s, "bob", 0)
		// Released: a new message is claimable at once.
		send(t, s, "m4", "alice", "bob", at(13*time.Second))
		wantClaims(t, "after release", claim(t, s, at(14*time.Second), at(44*time.Second), "other", 10, 10), "bob/alice:m4")
	}},
	{"a parked or retrying lane is released, not renewed", func(t *testing.T, s core.Store) {
		rn := renewer(t, s)
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "w", 10, 1)
		retry := core.LaneResult{Lane: cs[0].Lane, NextAt: at(20 * time.Second), Outcomes: []core.Outcome{
			{MessageID: "m1", Kind: core.OutcomeRetry, At: at(11 * time.Second), NextAt: at(20 * time.Second), Code: 503}}}
		next, err := rn.CompleteRenew(context.Background(), "w", retry, at(11*time.Second), at(41*time.Second), 10)
		if err != nil {
			t.Fatalf("CompleteRenew: %v", err)
		}
		wantIDs(t, "retrying lane", messageIDs(next), []string{})
		wantClaims(t, "before the retry is due", claim(t, s, at(15*time.Second), at(45*time.Second), "w", 10, 10))
		wantClaims(t, "retry due", claim(t, s, at(20*time.Second), at(50*time.Second), "w", 10, 10), "bob/alice:m1,m2")
		next, err = rn.CompleteRenew(context.Background(), "w", core.LaneResult{Lane: cs[0].Lane, Park: true}, at(21*time.Second), at(51*time.Second), 10)
		if err != nil {
			t.Fatalf("CompleteRenew: %v", err)
		}
		wantIDs(t, "parked lane", messageIDs(next), []string{})
		wantClaims(t, "parked", claim(t, s, at(60*time.Second), at(90*time.Second), "w", 10, 10))
	}},
	{"a stale owner gets nothing and leaves the new claim", func(t *testing.T, s core.Store) {
		rn := renewer(t, s)
		for i, id := range []string{"m1", "m2", "m3"} {
			send(t, s, id, "alice", "bob", at(time.Duration(i)*time.Second))
		}
		cs := claim(t, s, at(10*time.Second), at(30*time.Second), "old", 10, 1)
		wantClaims(t, "takeover", claim(t, s, at(40*time.Second), at(70*time.Second), "new", 10, 1), "bob/alice:m1")
		next, err := rn.CompleteRenew(context.Background(), "old", delivered(cs[0].Lane, "m1", at(45*time.Second)), at(45*time.Second), at(75*time.Second), 10)
		if err != nil {
			t.Fatalf("CompleteRenew: %v", err)
		}
		wantIDs(t, "stale owner", messageIDs(next), []string{})
		if r := receipt(t, s, "m1"); r.Status != core.StatusDelivered {
			t.Fatalf("m1 = %s, want delivered (the late outcome counts)", r.Status)
		}
		wantClaims(t, "still held by new", claim(t, s, at(50*time.Second), at(80*time.Second), "third", 10, 10))
	}},
}

func renewer(t *testing.T, s core.Store) core.LaneRenewer {
	t.Helper()
	rn, ok := s.(core.LaneRenewer)
	if !ok {
		t.Skip("store does not implement core.LaneRenewer")
	}
	return rn
}

// delivered is a lane result with the messages ids delivered at when.
func delivered(l core.Lane, id string, when time.Time, more ...string) core.LaneResult {
	res := core.LaneResult{Lane: l}
	for _, id := range append([]string{id}, more...) {
		res.Outcomes = append(res.Outcomes, core.Outcome{MessageID: id, Kind: core.OutcomeDelivered, At: when, Code: 200})
	}
	return res
}

// isolationCases check that the messages a store hands out do not share
// memory with the ones it was given or with each other (a store may cache
// what it accepted).
var isolationCases = []testCase{
	{"claimed and pulled messages do not alias the accepted one", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		m, r := newMessage("m1", "alice", "bob", base)
		m.Metadata = map[string]any{"k": "v"}
		mustAcceptMsg(t, s, m, r)
		m.Parts[0].Text = "changed by the sender"
		m.Metadata["k"] = "changed"
		m.Type = "changed"
		cs := claim(t, s, at(time.Second), at(10*time.Second), "w", 10, 10)
		wantClaims(t, "claim", cs, "bob/alice:m1")
		got := cs[0].Messages[0]
		if got.Parts[0].Text != "body of m1" || got.Metadata["k"] != "v" || got.Type != "message" {
			t.Fatalf("claimed message shows the sender's later changes: %s", jsonText(got))
		}
		got.Parts[0].Text = "changed by the deliverer"
		got.Metadata["k"] = "changed again"
		pulled, err := s.Pull(ctx, "bob", at(20*time.Second), at(30*time.Second), 10, false)
		if err != nil {
			t.Fatalf("Pull: %v", err)
		}
		if len(pulled) != 1 || pulled[0].Parts[0].Text != "body of m1" || pulled[0].Metadata["k"] != "v" {
			t.Fatalf("pulled message shows earlier changes: %s", jsonText(pulled))
		}
		if pulled[0].Attempts != 1 {
			t.Fatalf("pulled attempts = %d, want 1", pulled[0].Attempts)
		}
	}},
}
