package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/postgres"
)

// TestRecordAnnouncedAcrossInstances: a record write one instance
// announces reaches another instance's receipt listener, which reads it
// as that record's event; the announcing instance, which hears its own
// notifications too, reads none from the same payload.
func TestRecordAnnouncedAcrossInstances(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s1, s2 := twoInstances(t)
	receipts, err := s2.Notifier().Listen(ctx, s2.ReceiptChannel())
	if err != nil {
		t.Fatal(err)
	}
	r, err := s1.PutRecord(ctx, core.Record{Kind: "mcp_task", ID: "t1", Index: "owner", Data: []byte(`{}`), UpdatedAt: base})
	if err != nil {
		t.Fatal(err)
	}
	ev := core.RecordEvent{Kind: r.Kind, ID: r.ID, Index: r.Index, Version: r.Version}
	s1.AnnounceRecord(ev)
	p := recv(t, receipts, "the announcement of a record write")
	if got := s2.RecordEvents(p); !slices.Equal(got, []core.RecordEvent{ev}) {
		t.Fatalf("payload %q: RecordEvents on the other instance = %v, want %v", p, got, ev)
	}
	if got := s1.RecordEvents(p); len(got) != 0 {
		t.Fatalf("payload %q: RecordEvents on the announcing instance = %v, want none", p, got)
	}
	if got := postgres.ParseReceipts(p); len(got) != 0 {
		t.Fatalf("payload %q: ParseReceipts = %v, want no receipts", p, got)
	}
}

// TestResultAnnouncedAcrossInstances: a message correlated to another one
// (a reply), accepted by one instance, is announced to the others'
// receipt listeners as a result of the message it answers.
func TestResultAnnouncedAcrossInstances(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s1, s2 := twoInstances(t)
	receipts, err := s2.Notifier().Listen(ctx, s2.ReceiptChannel())
	if err != nil {
		t.Fatal(err)
	}
	m := &core.Message{ID: "answer-1", Sender: "helper", Receiver: "asker", Type: "task.result", CorrelationID: "question-1",
		ReceivedAt: base, ExpiresAt: base.Add(time.Hour), TTL: time.Hour}
	r := &core.Receipt{MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Status: core.StatusQueued, CreatedAt: base, UpdatedAt: base, ExpiresAt: m.ExpiresAt}
	if _, err := s1.Accept(ctx, m, r, 0); err != nil {
		t.Fatal(err)
	}
	p := recv(t, receipts, "the announcement of a result")
	if got := s2.ResultEvents(p); !slices.Equal(got, []string{"question-1"}) {
		t.Fatalf("payload %q: ResultEvents on the other instance = %q, want question-1", p, got)
	}
	if got := s1.ResultEvents(p); len(got) != 0 {
		t.Fatalf("payload %q: ResultEvents on the accepting instance = %q, want none", p, got)
	}
}
