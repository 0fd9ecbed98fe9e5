package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestAcceptsShareLaneWrites runs accepts to two lanes in one group commit,
// whose lane counts are written together (addPending), followed in the
// same transaction by a request that reads the lanes: it must see every
// accept's count, and the lanes must end as one upsert per accept would
// have left them (an empty parked lane unparked and due at the accept).
func TestAcceptsShareLaneWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// "old" is an empty lane, parked and due long ago; "new" does not exist.
	if _, err := s.wdb.ExecContext(ctx, `INSERT INTO lanes(receiver, sender, pending, next_at, parked) VALUES ('r', 'old', 0, 1, 1)`); err != nil {
		t.Fatal(err)
	}

	// Hold the writer in a request until the others are queued behind
	// it, so the writer takes them as one batch.
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before Close, should the test stop early
	held := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.write(ctx, func(*wtx) error { held <- struct{}{}; <-release; return nil }); err != nil {
			t.Error(err)
		}
	})
	waitfor.Recv(t, "the writer to hold", held)
	counts := map[string]int{"old": 3, "new": 2}
	for sender, n := range counts {
		for i := range n {
			wg.Go(func() {
				m := &core.Message{ID: fmt.Sprintf("%s-%d", sender, i), Sender: sender, Receiver: "r", Type: "message", Protocol: "atp",
					Parts: []core.Part{{Kind: core.PartText, Text: "hello"}}, TTL: time.Hour, ReceivedAt: at, ExpiresAt: at.Add(time.Hour)}
				r := &core.Receipt{MessageID: m.ID, Sender: sender, Receiver: "r", Status: core.StatusQueued,
					History:   []core.ReceiptEvent{{At: at, Status: core.StatusQueued, Detail: "accepted"}},
					CreatedAt: at, UpdatedAt: at, ExpiresAt: m.ExpiresAt}
				if _, err := s.Accept(ctx, m, r, 0); err != nil {
					t.Error(err)
				}
			})
		}
	}
	waitfor.True(t, "the accepts to queue", func() bool { return len(s.ops) == 5 })
	var seen int
	wg.Go(func() {
		err := s.write(ctx, func(tx *wtx) error {
			return tx.QueryRowContext(ctx, "SELECT SUM(pending) FROM lanes WHERE receiver = 'r'").Scan(&seen)
		})
		if err != nil {
			t.Error(err)
		}
	})
	waitfor.True(t, "the read to queue", func() bool { return len(s.ops) == 6 })
	releaseOnce()
	wg.Wait()
	if seen != 5 {
		t.Errorf("a request after the accepts read %d pending, want 5", seen)
	}
	for sender, n := range counts {
		var pending, parked int
		var next int64
		if err := s.wdb.QueryRowContext(ctx, "SELECT pending, parked, next_at FROM lanes WHERE receiver = 'r' AND sender = ?", sender).
			Scan(&pending, &parked, &next); err != nil {
			t.Fatalf("lane %s: %v", sender, err)
		}
		if pending != n || parked != 0 || next != ts(at) {
			t.Errorf("lane %s: pending %d parked %d next_at %d, want %d, 0, %d", sender, pending, parked, next, n, ts(at))
		}
	}
}
