package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestLaneRestoredAfterRacingDelete: an accept that found its lane there
// (so did not create it) commits its message after the purge deleted the
// lane as empty; the store restores the lane, and the message
// is claimed.
func TestLaneRestoredAfterRacingDelete(t *testing.T) {
	ctx := context.Background()
	u, schema := freshSchema(t)
	s := openAt(t, u, schema)
	m0 := &core.Message{ID: "m0", Sender: "alice", Receiver: "bob", Type: "t", ReceivedAt: base, ExpiresAt: base.Add(time.Hour), TTL: time.Hour}
	r0 := &core.Receipt{MessageID: "m0", Sender: "alice", Receiver: "bob", Status: core.StatusQueued,
		History: []core.ReceiptEvent{{At: base, Status: core.StatusQueued}}, CreatedAt: base, UpdatedAt: base, ExpiresAt: m0.ExpiresAt}
	if _, err := s.Accept(ctx, m0, r0, 0); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Claim(ctx, base, base.Add(time.Minute), "o", 10, 10)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v %v", cs, err)
	}
	// The racing accept: its message, in a transaction still open, of the
	// lane that exists.
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"message_id":"m1","sender":"alice","receiver":"bob","type":"t","ttl":3600000000000}`
	if _, err := tx.Exec(ctx, `INSERT INTO messages (id, sender, receiver, state, status, history, expires_at, created_at, updated_at, body)
		VALUES ('m1', 'alice', 'bob', 0, 'queued', '[]', $1, $2, $2, $3)`, base.Add(time.Hour), base, []byte(body)); err != nil {
		t.Fatal(err)
	}
	// The owner delivers m0 and releases the lane; the purge finds it
	// empty (m1 is not visible yet) and deletes it.
	if err := s.Complete(ctx, "o", []core.LaneResult{{Lane: cs[0].Lane, Outcomes: []core.Outcome{{MessageID: "m0", Kind: core.OutcomeDelivered, At: base}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PurgeBefore(ctx, base.Add(-time.Hour), 1000); err != nil {
		t.Fatal(err)
	}
	var lanes int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM lanes").Scan(&lanes); err != nil {
		t.Fatal(err)
	}
	if lanes != 0 {
		t.Fatalf("%d lanes after the release; the race this test sets up did not happen", lanes)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The lane comes back and m1 is claimed.
	waitfor.TrueWithin(t, 30*time.Second, "the lane of m1, accepted while it was deleted, to be restored and m1 claimed", func() bool {
		cs, err := s.Claim(ctx, base.Add(time.Second), base.Add(time.Minute), "o", 10, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(cs) == 1 && len(cs[0].Messages) == 1 && cs[0].Messages[0].ID == "m1"
	})
}
