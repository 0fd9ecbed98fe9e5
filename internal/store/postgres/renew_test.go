package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// CompleteRenew picks the lane's next messages only once it holds the
// lane's lock: another instance's transaction that ended a message and
// still holds the lane makes it wait, and the message it ended is not
// handed out again.
func TestCompleteRenewAfterConcurrentOutcomes(t *testing.T) {
	ctx := context.Background()
	u, schema := freshSchema(t)
	s := openAt(t, u, schema)
	for i, id := range []string{"m1", "m2", "m3"} {
		accept(t, s, id, "alice", "bob", base.Add(time.Duration(i)*time.Second))
	}
	cs, err := s.Claim(ctx, base.Add(10*time.Second), base.Add(40*time.Second), "w", 10, 1)
	if err != nil || len(cs) != 1 || len(cs[0].Messages) != 1 || cs[0].Messages[0].ID != "m1" {
		t.Fatalf("Claim = %v, %v; want the lane with m1", cs, err)
	}

	// Another instance ends m2 and holds the lane, uncommitted.
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{
		"UPDATE messages SET state = 1, status = 'delivered' WHERE id = 'm2'",
		"UPDATE lanes SET pending = pending - 1 WHERE receiver = 'bob' AND sender = 'alice'",
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	type result struct {
		ms  []*core.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		res := core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{
			{MessageID: "m1", Kind: core.OutcomeDelivered, At: base.Add(11 * time.Second), Code: 200}}}
		ms, err := s.CompleteRenew(ctx, "w", res, base.Add(11*time.Second), base.Add(41*time.Second), 10)
		done <- result{ms, err}
	}()
	// CompleteRenew must block on the lane's lock: wait until the server
	// shows a session of this database waiting for a lock (it must not
	// return meanwhile).
	waitfor.OK(t, "CompleteRenew to wait for the lock another transaction holds", func() error {
		select {
		case r := <-done:
			t.Fatalf("CompleteRenew returned %v, %v while another transaction held the lane", ids(r.ms), r.err)
		default:
		}
		var waiting int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting); err != nil {
			return err
		}
		if waiting == 0 {
			return errors.New("no session waits for a lock yet")
		}
		return nil
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	r := waitfor.Recv(t, "CompleteRenew to return once the lane was free", done)
	if r.err != nil {
		t.Fatalf("CompleteRenew: %v", r.err)
	}
	if got := ids(r.ms); !slices.Equal(got, []string{"m3"}) {
		t.Fatalf("CompleteRenew = %v, want [m3]", got)
	}
	if depth, err := s.QueueDepth(ctx, "bob"); err != nil || depth != 1 {
		t.Fatalf("QueueDepth = %d, %v; want 1", depth, err)
	}
}

// A lane whose messages are all leased to a puller is released by
// CompleteRenew, not dropped: the next claim parks it.
func TestCompleteRenewReleasesLeasedLane(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	accept(t, s, "m1", "alice", "bob", base)
	accept(t, s, "m2", "alice", "bob", base.Add(time.Second))
	cs, err := s.Claim(ctx, base.Add(10*time.Second), base.Add(40*time.Second), "w", 10, 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim = %v, %v", cs, err)
	}
	pulled, err := s.Pull(ctx, "bob", base.Add(10*time.Second), base.Add(100*time.Second), 10, false)
	if err != nil || len(pulled) != 2 {
		t.Fatalf("Pull = %v, %v; want m1 and m2", ids(pulled), err)
	}
	res := core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{
		{MessageID: "m1", Kind: core.OutcomeDelivered, At: base.Add(11 * time.Second), Code: 200}}}
	ms, err := s.CompleteRenew(ctx, "w", res, base.Add(11*time.Second), base.Add(41*time.Second), 10)
	if err != nil || len(ms) != 0 {
		t.Fatalf("CompleteRenew = %v, %v; want nothing (m2 is leased)", ids(ms), err)
	}
	if depth, err := s.QueueDepth(ctx, "bob"); err != nil || depth != 1 {
		t.Fatalf("QueueDepth = %d, %v; want 1", depth, err)
	}
	// Released: another owner may claim it at once (and parks it, since m2
	// is leased); after the lease a wake makes it deliverable again.
	if cs, err := s.Claim(ctx, base.Add(12*time.Second), base.Add(42*time.Second), "other", 10, 10); err != nil || len(cs) != 0 {
		t.Fatalf("Claim while leased = %v, %v; want nothing", cs, err)
	}
	if _, err := s.Wake(ctx, "bob", base.Add(101*time.Second)); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	cs, err = s.Claim(ctx, base.Add(101*time.Second), base.Add(131*time.Second), "other", 10, 10)
	if err != nil || len(cs) != 1 || !slices.Equal(ids(cs[0].Messages), []string{"m2"}) {
		t.Fatalf("Claim after the lease = %v, %v; want the lane with m2", cs, err)
	}
}

func ids(ms []*core.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
