package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

var claimCases = []testCase{
	{"lanes in due order, messages in send order", func(t *testing.T, s core.Store) {
		send(t, s, "a1", "s1", "r", at(2*time.Second))
		send(t, s, "b1", "s2", "r", at(1*time.Second))
		send(t, s, "c1", "s3", "r2", at(3*time.Second))
		send(t, s, "a2", "s1", "r", at(4*time.Second))
		send(t, s, "a3", "s1", "r", at(5*time.Second))
		send(t, s, "f1", "s4", "r", at(20*time.Second)) // not due yet at 10s

		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "o1", 2, 2)
		wantClaims(t, "first claim", cs, "r/s2:b1", "r/s1:a1,a2")
		m := cs[1].Messages[0]
		if m.Sender != "s1" || m.Receiver != "r" || m.Parts[0].Text != "body of a1" || m.Seq <= 0 || m.Attempts != 0 {
			t.Fatalf("claimed message = %s", jsonText(m))
		}
		wantTime(t, "claimed message ExpiresAt", m.ExpiresAt, at(2*time.Second+defaultTTL))
		if cs[1].Messages[0].Seq >= cs[1].Messages[1].Seq {
			t.Fatalf("messages out of order: seq %d then %d", cs[1].Messages[0].Seq, cs[1].Messages[1].Seq)
		}

		cs = claim(t, s, at(10*time.Second), at(40*time.Second), "o2", 10, 10)
		wantClaims(t, "second owner", cs, "r2/s3:c1")
		cs = claim(t, s, at(30*time.Second), at(40*time.Second), "o3", 10, 10)
		wantClaims(t, "third owner, claims held", cs, "r/s4:f1")
	}},
	{"one owner per lane, taken over after claimUntil", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		wantClaims(t, "o1", claim(t, s, at(10*time.Second), at(30*time.Second), "o1", 10, 10), "bob/alice:m1,m2")
		// A new message on a claimed lane does not free it.
		send(t, s, "m3", "alice", "bob", at(12*time.Second))
		wantClaims(t, "o2 before claimUntil", claim(t, s, at(20*time.Second), at(50*time.Second), "o2", 10, 10))
		wantClaims(t, "o2 just before claimUntil", claim(t, s, at(30*time.Second-time.Microsecond), at(50*time.Second), "o2", 10, 10))
		// o1 crashed: its claim lapses and o2 takes the lane over, in order.
		wantClaims(t, "o2 after claimUntil", claim(t, s, at(31*time.Second), at(60*time.Second), "o2", 10, 10), "bob/alice:m1,m2,m3")
		wantClaims(t, "o1 back, lane held by o2", claim(t, s, at(40*time.Second), at(70*time.Second), "o1", 10, 10))
	}},
	{"not claimed when nothing is due", func(t *testing.T, s core.Store) {
		wantClaims(t, "empty store", claim(t, s, base, at(time.Minute), "o", 10, 10))
		send(t, s, "m1", "alice", "bob", at(time.Minute))
		wantClaims(t, "before received", claim(t, s, base, at(time.Minute), "o", 10, 10))
		wantClaims(t, "at received", claim(t, s, at(time.Minute), at(2*time.Minute), "o", 10, 10), "bob/alice:m1")
	}},
}

var completeCases = []testCase{
	{"outcomes update receipts", func(t *testing.T, s core.Store) {
		reply := json.RawMessage(`{"ok":true,"n":1}`)
		tests := []struct {
			name     string
			outcome  core.Outcome
			status   core.Status
			attempts int
			depth    int
			dead     bool
		}{
			{"delivered", core.Outcome{Kind: core.OutcomeDelivered, Code: 200, Reply: reply, Detail: "pushed"}, core.StatusDelivered, 1, 0, false},
			{"rejected", core.Outcome{Kind: core.OutcomeRejected, Code: 403, Error: "forbidden", Reply: json.RawMessage(`{"error":"no"}`), Detail: "refused"}, core.StatusRejected, 1, 0, true},
			{"timeout", core.Outcome{Kind: core.OutcomeTimeout, Error: "ttl", Detail: "ttl passed"}, core.StatusTimeout, 0, 0, true},
			{"retry", core.Outcome{Kind: core.OutcomeRetry, Code: 503, Error: "unavailable", NextAt: at(time.Minute)}, core.StatusQueued, 1, 1, false},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := context.Background()
				recv := fmt.Sprintf("rcv-%d", i)
				send(t, s, tt.name, "alice", recv, base)
				cs := claim(t, s, at(10*time.Second), at(40*time.Second), "o1", 10, 10)
				wantClaims(t, "claim", cs, recv+"/alice:"+tt.name)
				o := tt.outcome
				o.MessageID, o.At = tt.name, at(11*time.Second)
				complete(t, s, "o1", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{o}, NextAt: o.NextAt})

				r := receipt(t, s, tt.name)
				if r.Status != tt.status || r.Attempts != tt.attempts || r.Code != o.Code || r.LastError != o.Error {
					t.Fatalf("receipt = status %s attempts %d code %d error %q; want %s %d %d %q",
						r.Status, r.Attempts, r.Code, r.LastError, tt.status, tt.attempts, o.Code, o.Error)
				}
				if tt.status.Terminal() && string(r.Reply) != string(o.Reply) {
					t.Fatalf("receipt reply = %s, want %s", r.Reply, o.Reply)
				}
				wantTime(t, "UpdatedAt", r.UpdatedAt, o.At)
				wantTime(t, "CreatedAt", r.CreatedAt, base)
				if len(r.History) != 2 || r.History[0].Detail != "accepted" {
					t.Fatalf("history = %s, want accepted then the outcome", jsonText(r.History))
				}
				ev := lastEvent(t, r)
				if ev.Status != tt.status || !ev.At.Equal(o.At) {
					t.Fatalf("last event = %+v, want status %s at %s", ev, tt.status, o.At)
				}
				if tt.status.Terminal() && ev.Detail != o.Detail {
					t.Fatalf("last event detail = %q, want %q", ev.Detail, o.Detail)
				}
				if tt.outcome.Kind == core.OutcomeRetry {
					wantTime(t, "NextAttempt", r.NextAttempt, at(time.Minute))
					m, err := s.GetMessage(ctx, tt.name)
					if err != nil || m.Attempts != 1 {
						t.Fatalf("GetMessage after retry: attempts %v, %v; want 1", m, err)
					}
				}
				wantDepth(t, s, recv, tt.depth)
				dl, err := s.DeadLetters(ctx, core.DeadLetterFilter{Receiver: recv})
				if err != nil {
					t.Fatal(err)
				}
				if got := len(dl) == 1; got != tt.dead {
					t.Fatalf("in dead letters = %v, want %v", got, tt.dead)
				}
				// A terminal lane has nothing left to claim.
				if tt.depth == 0 {
					wantClaims(t, "claim after terminal outcome", claim(t, s, at(time.Hour), at(2*time.Hour), "o2", 10, 10))
				}
			})
		}
	}},
	{"a timeout after failed attempts keeps the last error", func(t *testing.T, s core.Store) {
		// The scheduler ends a message whose TTL passed at its next
		// attempt with a timeout outcome that carries no error of its own:
		// the dead letter must keep what the last attempt saw.
		tests := []struct {
			name  string
			retry core.Outcome
			end   core.Outcome
			code  int
			err   string
		}{
			{"receiver answered 500", core.Outcome{Kind: core.OutcomeRetry, Code: 500, Error: "receiver answered 500"},
				core.Outcome{Kind: core.OutcomeTimeout, Detail: "ttl passed before delivery"}, 500, "receiver answered 500"},
			{"connection refused", core.Outcome{Kind: core.OutcomeRetry, Error: "dial tcp 127.0.0.1:9: connect: connection refused"},
				core.Outcome{Kind: core.OutcomeTimeout, Detail: "ttl passed before delivery"}, 0, "dial tcp 127.0.0.1:9: connect: connection refused"},
			{"a timeout with its own error", core.Outcome{Kind: core.OutcomeRetry, Code: 503, Error: "busy"},
				core.Outcome{Kind: core.OutcomeTimeout, Code: 504, Error: "gave up"}, 504, "gave up"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id, recv := fmt.Sprintf("kept-%d", i), fmt.Sprintf("kept-rcv-%d", i)
				send(t, s, id, "alice", recv, base)
				cs := claim(t, s, at(10*time.Second), at(40*time.Second), "o1", 10, 10)
				wantClaims(t, "claim", cs, recv+"/alice:"+id)
				o := tt.retry
				o.MessageID, o.At, o.NextAt = id, at(11*time.Second), at(20*time.Second)
				complete(t, s, "o1", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{o}, NextAt: o.NextAt})
				cs = claim(t, s, at(20*time.Second), at(50*time.Second), "o1", 10, 10)
				wantClaims(t, "claim again", cs, recv+"/alice:"+id)
				o = tt.end
				o.MessageID, o.At = id, at(21*time.Second)
				complete(t, s, "o1", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{o}})
				r := receipt(t, s, id)
				if r.Status != core.StatusTimeout || r.Attempts != 1 || r.Code != tt.code || r.LastError != tt.err {
					t.Fatalf("receipt = status %s attempts %d code %d error %q; want timeout 1 %d %q",
						r.Status, r.Attempts, r.Code, r.LastError, tt.code, tt.err)
				}
				dl, err := s.DeadLetters(context.Background(), core.DeadLetterFilter{Receiver: recv})
				if err != nil || len(dl) != 1 || dl[0].LastError != tt.err || dl[0].Code != tt.code {
					t.Fatalf("dead letters = %s, %v; want one with code %d and error %q", jsonText(dl), err, tt.code, tt.err)
				}
			})
		}
	}},
	{"a dead letter without an error can be given one, once", func(t *testing.T, s core.Store) {
		noter, ok := s.(core.DeadLetterNoter)
		if !ok {
			t.Skip("the store does not implement core.DeadLetterNoter")
		}
		ctx := context.Background()
		send(t, s, "held", "alice", "held-rcv", base)
		// Still queued: nothing changes.
		if err := noter.NoteDeadLetter(ctx, "held", 500, "too early"); err != nil {
			t.Fatal(err)
		}
		if r := receipt(t, s, "held"); r.LastError != "" || r.Status != core.StatusQueued {
			t.Fatalf("a queued message was noted: %+v", r)
		}
		if _, err := s.ExpireDue(ctx, at(defaultTTL+time.Hour), 10); err != nil {
			t.Fatal(err)
		}
		for _, note := range []string{"held behind m0", "a second note"} {
			if err := noter.NoteDeadLetter(ctx, "held", 503, note); err != nil {
				t.Fatal(err)
			}
		}
		r := receipt(t, s, "held")
		if r.Status != core.StatusTimeout || r.Code != 503 || r.LastError != "held behind m0" {
			t.Fatalf("receipt = %s %d %q; want timeout 503 \"held behind m0\" (the first note only)", r.Status, r.Code, r.LastError)
		}
	}},
	{"retry holds the lane back until NextAt", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		send(t, s, "o1", "carol", "bob", at(2*time.Second))
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "w", 1, 10)
		wantClaims(t, "claim", cs, "bob/alice:m1,m2")
		complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, NextAt: at(time.Minute), Outcomes: []core.Outcome{
			{MessageID: "m1", Kind: core.OutcomeRetry, At: at(11 * time.Second), NextAt: at(time.Minute), Error: "busy"},
		}})
		// Only carol's lane is due; alice's waits behind its head's retry.
		wantClaims(t, "before NextAt", claim(t, s, at(30*time.Second), at(2*time.Minute), "w", 10, 10), "bob/carol:o1")
		cs = claim(t, s, at(time.Minute), at(2*time.Minute), "w", 10, 10)
		wantClaims(t, "at NextAt", cs, "bob/alice:m1,m2")
		if cs[0].Messages[0].Attempts != 1 || cs[0].Messages[1].Attempts != 0 {
			t.Fatalf("attempts = %d, %d; want 1, 0", cs[0].Messages[0].Attempts, cs[0].Messages[1].Attempts)
		}
		wantDepth(t, s, "bob", 3)
	}},
	{"release with zero NextAt is due at once", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", base.Add(time.Millisecond))
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "w", 10, 1)
		wantClaims(t, "claim one", cs, "bob/alice:m1")
		complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{{MessageID: "m1", Kind: core.OutcomeDelivered, At: at(11 * time.Second)}}})
		wantClaims(t, "claim next", claim(t, s, at(11*time.Second), at(40*time.Second), "w", 10, 10), "bob/alice:m2")
	}},
	{"park holds the lane until Wake", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		send(t, s, "x1", "alice", "carol", at(2*time.Second))
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "w", 10, 10)
		wantClaims(t, "claim", cs, "bob/alice:m1,m2", "carol/alice:x1")
		complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, Park: true}, core.LaneResult{Lane: cs[1].Lane, Park: true})
		wantClaims(t, "parked", claim(t, s, at(time.Hour), at(2*time.Hour), "w", 10, 10))
		n, err := s.Wake(ctx, "bob", at(2*time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("Wake(bob) = %d, %v; want 2", n, err)
		}
		wantClaims(t, "after wake", claim(t, s, at(2*time.Hour), at(3*time.Hour), "w", 10, 10), "bob/alice:m1,m2")
		wantDepth(t, s, "carol", 1)
	}},
	{"stale owner records outcomes but keeps the new claim", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		cs := claim(t, s, at(10*time.Second), at(30*time.Second), "old", 10, 10)
		wantClaims(t, "old owner", cs, "bob/alice:m1,m2")
		lane := cs[0].Lane
		wantClaims(t, "takeover", claim(t, s, at(40*time.Second), at(70*time.Second), "new", 10, 10), "bob/alice:m1,m2")
		// The old owner finishes late: its outcome counts, its release does not.
		complete(t, s, "old", core.LaneResult{Lane: lane, Outcomes: []core.Outcome{{MessageID: "m1", Kind: core.OutcomeDelivered, At: at(45 * time.Second), Code: 200}}})
		if r := receipt(t, s, "m1"); r.Status != core.StatusDelivered || r.Attempts != 1 {
			t.Fatalf("m1 after stale complete: %s attempts %d", r.Status, r.Attempts)
		}
		wantDepth(t, s, "bob", 1)
		wantClaims(t, "lane still held by new owner", claim(t, s, at(50*time.Second), at(80*time.Second), "third", 10, 10))
		// The new owner's outcome for m1 is ignored (no longer queued).
		complete(t, s, "new", core.LaneResult{Lane: lane, Outcomes: []core.Outcome{
			{MessageID: "m1", Kind: core.OutcomeRejected, At: at(50 * time.Second), Code: 500},
			{MessageID: "m2", Kind: core.OutcomeDelivered, At: at(50 * time.Second)},
		}})
		r := receipt(t, s, "m1")
		if r.Status != core.StatusDelivered || r.Attempts != 1 || r.Code != 200 || len(r.History) != 2 {
			t.Fatalf("m1 changed by an outcome for a finished message: %s", jsonText(r))
		}
		wantTime(t, "m1 UpdatedAt", r.UpdatedAt, at(45*time.Second))
		if r := receipt(t, s, "m2"); r.Status != core.StatusDelivered {
			t.Fatalf("m2 status = %s", r.Status)
		}
		wantDepth(t, s, "bob", 0)
		// The lane counts stay right: a new message makes depth 1 and is claimable.
		send(t, s, "m3", "alice", "bob", at(time.Minute))
		wantDepth(t, s, "bob", 1)
		wantClaims(t, "new message after all", claim(t, s, at(2*time.Minute), at(3*time.Minute), "third", 10, 10), "bob/alice:m3")
	}},
	{"repeated outcome is ignored", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		settle(t, s, at(time.Second), map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered}})
		complete(t, s, "settle", core.LaneResult{Lane: core.Lane{Receiver: "bob", Sender: "alice"},
			Outcomes: []core.Outcome{{MessageID: "m1", Kind: core.OutcomeDelivered, At: at(time.Minute)}}})
		r := receipt(t, s, "m1")
		if r.Attempts != 1 || len(r.History) != 2 {
			t.Fatalf("receipt after repeated outcome: attempts %d, %d events", r.Attempts, len(r.History))
		}
		wantDepth(t, s, "bob", 0)
		send(t, s, "m2", "alice", "bob", at(2*time.Minute))
		wantDepth(t, s, "bob", 1)
	}},
	{"history is capped and keeps the first and latest events", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		now := base
		for i := range 70 {
			now = at(time.Duration(i+1) * time.Minute)
			cs := claim(t, s, now, now.Add(time.Second), "w", 1, 1)
			if len(cs) != 1 {
				t.Fatalf("round %d: claimed %d lanes", i, len(cs))
			}
			complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{
				{MessageID: "m1", Kind: core.OutcomeRetry, At: now, Error: fmt.Sprintf("try %d", i)},
			}})
		}
		now = now.Add(time.Minute)
		settle(t, s, now, map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered, Detail: "finally"}})
		r := receipt(t, s, "m1")
		if len(r.History) != 64 {
			t.Fatalf("history has %d events, want 64", len(r.History))
		}
		if r.History[0].Detail != "accepted" {
			t.Fatalf("first event = %+v, want the accepted event", r.History[0])
		}
		if ev := lastEvent(t, r); ev.Status != core.StatusDelivered || ev.Detail != "finally" || !ev.At.Equal(now) {
			t.Fatalf("last event = %+v, want delivered/finally", ev)
		}
		if r.Attempts != 71 {
			t.Fatalf("attempts = %d, want 71", r.Attempts)
		}
	}},
	{"receipt without history still records events", func(t *testing.T, s core.Store) {
		m, r := newMessage("m1", "alice", "bob", base)
		r.History = nil
		mustAcceptMsg(t, s, m, r)
		settle(t, s, at(time.Second), map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered, Detail: "done"}})
		rc := receipt(t, s, "m1")
		if len(rc.History) != 1 || rc.History[0].Status != core.StatusDelivered {
			t.Fatalf("history = %s, want one delivered event", jsonText(rc.History))
		}
	}},
}
