package storetest

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// richMessage sets every field a message can carry.
func richMessage(id string) (*core.Message, *core.Receipt) {
	m := &core.Message{
		ID:            id,
		Sender:        "alice",
		Receiver:      "bob",
		Type:          "task",
		CorrelationID: "corr-0",
		Parts: []core.Part{
			{Kind: core.PartText, Text: "héllo ✓ \"quoted\" \x00 nul"},
			{Kind: core.PartCode, Text: "fmt.Println(1)", Language: "go"},
			{Kind: core.PartImage, MediaType: "image/png", Name: "dot.png", Bytes: []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff, 0xfe}},
			{Kind: core.PartFile, MediaType: "application/pdf", Name: "a.pdf", URL: "https://example.com/a.pdf"},
			{Kind: core.PartData, Data: json.RawMessage(`{"z":1.5,"a":[true,null,"x"],"n":{"deep":[1,2,3]}}`), Meta: map[string]any{"schema": "v1", "n": float64(2)}},
		},
		Metadata: map[string]any{
			"trace_id": "t-1",
			"priority": float64(3),
			"flags":    map[string]any{"urgent": true, "tags": []any{"a", "b"}},
		},
		Protocol:    "mamp",
		TTL:         90 * time.Minute,
		SentAt:      base.Add(-1500 * time.Millisecond),
		ReceivedAt:  base,
		ExpiresAt:   base.Add(90 * time.Minute),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	r := receiptFor(m)
	r.History = append(r.History, core.ReceiptEvent{At: base, Status: core.StatusQueued, Detail: "receiver offline"})
	return m, r
}

var acceptCases = []testCase{
	{"round trips every field", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		m, r := richMessage("m1")
		wantMsg, wantRcpt := normMessage(m), normReceipt(r)
		res := mustAcceptMsg(t, s, m, r)
		if res.Receipt.MessageID != "m1" || res.Receipt.Status != core.StatusQueued {
			t.Fatalf("AcceptResult.Receipt = %+v", res.Receipt)
		}
		got, err := s.GetMessage(ctx, "m1")
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		if got.Seq <= 0 {
			t.Fatalf("stored Seq = %d, want > 0", got.Seq)
		}
		wantMsg.Seq = got.Seq
		if g := normMessage(got); !reflect.DeepEqual(g, wantMsg) {
			t.Fatalf("GetMessage round trip:\n got %s\nwant %s", jsonText(g), jsonText(wantMsg))
		}
		rc := receipt(t, s, "m1")
		if g := normReceipt(rc); !reflect.DeepEqual(g, wantRcpt) {
			t.Fatalf("GetReceipt round trip:\n got %s\nwant %s", jsonText(g), jsonText(wantRcpt))
		}
		m2 := send(t, s, "m2", "alice", "bob", at(time.Second))
		g2, err := s.GetMessage(ctx, m2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if g2.Seq <= got.Seq {
			t.Fatalf("second message Seq = %d, want > %d", g2.Seq, got.Seq)
		}
	}},
	{"unknown ids are ErrNotFound", func(t *testing.T, s core.Store) {
		_, err := s.GetMessage(context.Background(), "nope")
		wantErr(t, "GetMessage", err, core.ErrNotFound)
		_, err = s.GetReceipt(context.Background(), "nope")
		wantErr(t, "GetReceipt", err, core.ErrNotFound)
	}},
	{"duplicate from same sender returns first receipt", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		first := send(t, s, "m1", "alice", "bob", base)
		firstRcpt := normReceipt(receipt(t, s, "m1"))

		// The same sender and receiver: a retry, whatever else changed.
		again, r := newMessage("m1", "alice", "bob", at(time.Minute))
		again.Parts = []core.Part{{Kind: core.PartText, Text: "changed"}}
		again.ConversationID = "conv-dup"
		r.Status = core.StatusQueued
		res, err := s.Accept(ctx, again, r, 0)
		if err != nil {
			t.Fatalf("Accept duplicate: %v", err)
		}
		if !res.Duplicate {
			t.Fatal("Accept duplicate: Duplicate = false")
		}
		if g := normReceipt(&res.Receipt); !reflect.DeepEqual(g, firstRcpt) {
			t.Fatalf("duplicate receipt:\n got %s\nwant %s", jsonText(g), jsonText(firstRcpt))
		}
		got, err := s.GetMessage(ctx, "m1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Receiver != "bob" || got.Parts[0].Text != first.Parts[0].Text || got.ConversationID != "" {
			t.Fatalf("duplicate overwrote the message: %s", jsonText(got))
		}
		wantDepth(t, s, "bob", 1)
		wantDepth(t, s, "carol", 0)
		_, err = s.GetConversation(ctx, "conv-dup")
		wantErr(t, "conversation of a duplicate", err, core.ErrNotFound)

		// Once delivered, a duplicate reports the first outcome.
		settle(t, s, at(time.Minute), map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered, Code: 200}})
		dup, r2 := newMessage("m1", "alice", "bob", at(2*time.Minute))
		res, err = s.Accept(ctx, dup, r2, 0)
		if err != nil || !res.Duplicate || res.Receipt.Status != core.StatusDelivered {
			t.Fatalf("Accept duplicate after delivery = %+v, %v; want duplicate with status delivered", res, err)
		}
		wantDepth(t, s, "bob", 0)
		if cs := claim(t, s, at(time.Hour), at(2*time.Hour), "o", 10, 10); len(cs) != 0 {
			t.Fatalf("duplicate after delivery was scheduled: %q", claimShape(cs))
		}
	}},
	{"same id from another sender is ErrIDConflict", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		m, r := newMessage("m1", "mallory", "bob", at(time.Second))
		_, err := s.Accept(ctx, m, r, 0)
		wantErr(t, "Accept foreign id", err, core.ErrIDConflict)
		got, err := s.GetMessage(ctx, "m1")
		if err != nil || got.Sender != "alice" {
			t.Fatalf("GetMessage after conflict = %v, %v; want alice's message", got, err)
		}
		wantDepth(t, s, "bob", 1)
	}},
	{"same id to another receiver is ErrIDConflict", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		m, r := newMessage("m1", "alice", "carol", at(time.Second))
		_, err := s.Accept(ctx, m, r, 0)
		wantErr(t, "Accept id for another receiver", err, core.ErrIDConflict)
		got, err := s.GetMessage(ctx, "m1")
		if err != nil || got.Receiver != "bob" {
			t.Fatalf("GetMessage after conflict = %v, %v; want the message to bob", got, err)
		}
		wantDepth(t, s, "bob", 1)
		wantDepth(t, s, "carol", 0)
	}},
	{"concurrent accepts of one id store it once", func(t *testing.T, s core.Store) {
		const n = 50
		var wg sync.WaitGroup
		var mu sync.Mutex
		fresh, dups := 0, 0
		var errs []error
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				m, r := newMessage("same", "alice", "bob", at(time.Duration(i)*time.Millisecond))
				<-start
				res, err := s.Accept(context.Background(), m, r, 0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case res.Duplicate:
					dups++
				default:
					fresh++
				}
			})
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 || fresh != 1 || dups != n-1 {
			t.Fatalf("concurrent accepts: %d new, %d duplicates, errors %v; want 1, %d, none", fresh, dups, errs, n-1)
		}
		wantDepth(t, s, "bob", 1)
		cs := claim(t, s, at(time.Hour), at(2*time.Hour), "o", 10, 100)
		wantClaims(t, "claim after concurrent accepts", cs, "bob/alice:same")
	}},
	{"max queue", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		acc := func(id, sender, receiver string, max int) (core.AcceptResult, error) {
			m, r := newMessage(id, sender, receiver, at(time.Second))
			return s.Accept(ctx, m, r, max)
		}
		for _, id := range []string{"q1", "q2"} {
			if _, err := acc(id, "alice", "bob", 2); err != nil {
				t.Fatalf("Accept %s under max: %v", id, err)
			}
		}
		_, err := acc("q3", "alice", "bob", 2)
		wantErr(t, "Accept over max", err, core.ErrQueueFull)
		_, err = acc("q4", "carl", "bob", 2)
		wantErr(t, "Accept over max from another sender", err, core.ErrQueueFull)
		for _, id := range []string{"q3", "q4"} {
			_, err = s.GetMessage(ctx, id)
			wantErr(t, "GetMessage refused "+id, err, core.ErrNotFound)
			_, err = s.GetReceipt(ctx, id)
			wantErr(t, "GetReceipt refused "+id, err, core.ErrNotFound)
		}
		wantDepth(t, s, "bob", 2)
		// A duplicate of a stored message is answered, not refused.
		if res, err := acc("q1", "alice", "bob", 2); err != nil || !res.Duplicate {
			t.Fatalf("duplicate at max = %+v, %v; want duplicate", res, err)
		}
		// Other receivers are not affected; no limit means no limit.
		if _, err := acc("x1", "alice", "carol", 2); err != nil {
			t.Fatalf("Accept for another receiver: %v", err)
		}
		if _, err := acc("q5", "alice", "bob", 0); err != nil {
			t.Fatalf("Accept with maxQueue 0: %v", err)
		}
		wantDepth(t, s, "bob", 3)
		// Delivered messages leave the queue and make room.
		settle(t, s, at(time.Minute), map[string]core.Outcome{
			"q1": {Kind: core.OutcomeDelivered}, "q2": {Kind: core.OutcomeDelivered},
		})
		if _, err := acc("q3", "alice", "bob", 2); err != nil {
			t.Fatalf("Accept after the queue drained: %v", err)
		}
		wantDepth(t, s, "bob", 2)
	}},
	{"expired on arrival is stored but never scheduled", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		m, r := newMessage("old", "alice", "bob", base)
		m.ExpiresAt = base.Add(-time.Second)
		r.ExpiresAt = m.ExpiresAt
		r.Status = core.StatusExpired
		r.History = []core.ReceiptEvent{{At: base, Status: core.StatusExpired, Detail: "ttl passed before arrival"}}
		res, err := s.Accept(ctx, m, r, 1)
		if err != nil || res.Duplicate {
			t.Fatalf("Accept expired = %+v, %v", res, err)
		}
		if rc := receipt(t, s, "old"); rc.Status != core.StatusExpired {
			t.Fatalf("stored status = %s, want expired", rc.Status)
		}
		wantDepth(t, s, "bob", 0)
		send(t, s, "fresh", "alice", "bob", at(time.Second))
		wantClaims(t, "claim", claim(t, s, at(time.Hour), at(2*time.Hour), "o", 10, 10), "bob/alice:fresh")
		ms, err := s.Pull(ctx, "bob", at(3*time.Hour), at(4*time.Hour), 10, false)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "pulled", messageIDs(ms), []string{"fresh"})
		rs, err := s.ExpireDue(ctx, at(48*time.Hour), 10)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "ExpireDue", receiptIDs(rs), []string{"fresh"})
		dl, err := s.DeadLetters(ctx, core.DeadLetterFilter{})
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "DeadLetters (expired is not a dead letter)", receiptIDs(dl), []string{"fresh"})
	}},
	{"results by correlation id", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		for i, spec := range []struct{ id, sender, corr string }{
			{"r1", "bob", "ask"}, {"x", "bob", "other"}, {"r2", "carol", "ask"}, {"plain", "bob", ""}, {"r3", "bob", "ask"},
		} {
			m, r := newMessage(spec.id, spec.sender, "alice", at(time.Duration(i)*time.Second))
			m.CorrelationID = spec.corr
			mustAcceptMsg(t, s, m, r)
		}
		ms, err := s.Results(ctx, "ask", 0)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "Results", messageIDs(ms), []string{"r1", "r2", "r3"})
		if ms[0].CorrelationID != "ask" || ms[0].Parts[0].Text != "body of r1" {
			t.Fatalf("result message = %s", jsonText(ms[0]))
		}
		ms, err = s.Results(ctx, "ask", 2)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "Results limit 2", messageIDs(ms), []string{"r1", "r2"})
		ms, err = s.Results(ctx, "none", 0)
		if err != nil || len(ms) != 0 {
			t.Fatalf("Results unknown = %v, %v; want none", ms, err)
		}
	}},
}
