package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

var claimBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func claimMessage(id, sender, receiver string) (*core.Message, *core.Receipt) {
	m := &core.Message{ID: id, Sender: sender, Receiver: receiver, Type: "message", Protocol: "atp",
		Parts: []core.Part{{Kind: core.PartText, Text: "body of " + id}}, TTL: time.Hour,
		ReceivedAt: claimBase, ExpiresAt: claimBase.Add(time.Hour)}
	r := &core.Receipt{MessageID: id, Sender: sender, Receiver: receiver, Status: core.StatusQueued,
		History:   []core.ReceiptEvent{{At: claimBase, Status: core.StatusQueued, Detail: "accepted"}},
		CreatedAt: claimBase, UpdatedAt: claimBase, ExpiresAt: m.ExpiresAt}
	return m, r
}

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAcceptClaimed checks when an accept claims its lane: only when the
// message is the lane's only one and the lane is neither parked nor
// claimed. The accept reads that from the lane row it writes, so each
// case is one where the answer could go wrong.
func TestAcceptClaimed(t *testing.T) {
	ctx := context.Background()
	now, until := claimBase, claimBase.Add(time.Minute)
	tests := []struct {
		name        string
		setup       func(t *testing.T, s *sqlite.Store)
		id          string
		maxQueue    int
		wantClaimed bool
		wantDup     bool
		wantErr     error
		wantQueued  int // messages queued for the receiver afterwards
	}{
		{name: "empty lane is claimed", id: "m1", wantClaimed: true, wantQueued: 1},
		{name: "busy lane is not claimed again", setup: func(t *testing.T, s *sqlite.Store) {
			accept(t, s, "m0", 0)
		}, id: "m1", wantQueued: 2},
		{name: "lane with unclaimed messages is not claimed", setup: func(t *testing.T, s *sqlite.Store) {
			m, r := claimMessage("m0", "alice", "bob")
			if _, err := s.Accept(ctx, m, r, 0); err != nil {
				t.Fatal(err)
			}
		}, id: "m1", wantQueued: 2},
		{name: "emptied lane is claimed afresh", setup: func(t *testing.T, s *sqlite.Store) {
			accept(t, s, "m0", 0)
			if err := s.Complete(ctx, "owner-1", []core.LaneResult{{Lane: core.Lane{Receiver: "bob", Sender: "alice"},
				Outcomes: []core.Outcome{{MessageID: "m0", Kind: core.OutcomeDelivered, At: now, Code: 200}}}}); err != nil {
				t.Fatal(err)
			}
		}, id: "m1", wantClaimed: true, wantQueued: 1},
		{name: "parked empty lane is unparked and claimed", setup: func(t *testing.T, s *sqlite.Store) {
			accept(t, s, "m0", 0)
			if err := s.Complete(ctx, "owner-1", []core.LaneResult{{Lane: core.Lane{Receiver: "bob", Sender: "alice"}, Park: true,
				Outcomes: []core.Outcome{{MessageID: "m0", Kind: core.OutcomeDelivered, At: now, Code: 200}}}}); err != nil {
				t.Fatal(err)
			}
		}, id: "m1", wantClaimed: true, wantQueued: 1},
		{name: "parked lane with messages is not claimed", setup: func(t *testing.T, s *sqlite.Store) {
			accept(t, s, "m0", 0)
			if err := s.Complete(ctx, "owner-1", []core.LaneResult{{Lane: core.Lane{Receiver: "bob", Sender: "alice"}, Park: true}}); err != nil {
				t.Fatal(err)
			}
		}, id: "m1", wantQueued: 2},
		{name: "duplicate claims nothing", setup: func(t *testing.T, s *sqlite.Store) {
			accept(t, s, "m1", 0)
		}, id: "m1", wantDup: true, wantQueued: 1},
		{name: "full queue is refused and claims nothing", setup: func(t *testing.T, s *sqlite.Store) {
			m, r := claimMessage("m0", "carol", "bob")
			if _, err := s.Accept(ctx, m, r, 0); err != nil {
				t.Fatal(err)
			}
		}, id: "m1", maxQueue: 1, wantErr: core.ErrQueueFull, wantQueued: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			if tt.setup != nil {
				tt.setup(t, s)
			}
			m, r := claimMessage(tt.id, "alice", "bob")
			res, claimed, err := s.AcceptClaimed(ctx, m, r, tt.maxQueue, now, until, "owner-1")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("AcceptClaimed: err %v, want %v", err, tt.wantErr)
			}
			if claimed != tt.wantClaimed || res.Duplicate != tt.wantDup {
				t.Errorf("claimed %v duplicate %v, want %v %v", claimed, res.Duplicate, tt.wantClaimed, tt.wantDup)
			}
			if n, err := s.QueueDepth(ctx, "bob"); err != nil || n != tt.wantQueued {
				t.Errorf("QueueDepth = %d, %v; want %d", n, err, tt.wantQueued)
			}
			// A claimed lane is not handed to the scheduler again until
			// its claim ends; an unclaimed one with messages is.
			cs, err := s.Claim(ctx, now, until, "owner-2", 10, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.Lane == (core.Lane{Receiver: "bob", Sender: "alice"}) && tt.wantClaimed {
					t.Errorf("lane claimed at accept was claimed again by the scheduler")
				}
			}
		})
	}
}

// accept accepts id from alice to bob, claiming the lane.
func accept(t *testing.T, s *sqlite.Store, id string, maxQueue int) {
	t.Helper()
	m, r := claimMessage(id, "alice", "bob")
	if _, _, err := s.AcceptClaimed(context.Background(), m, r, maxQueue, claimBase, claimBase.Add(time.Minute), "owner-1"); err != nil {
		t.Fatalf("accept %s: %v", id, err)
	}
}

// TestAcceptClaimedConcurrent sends many messages on one lane at once, so
// the writer commits them in shared transactions, with one sender refused
// for its receiver's full queue in among them: exactly one accept claims
// the lane, the refusal loses no one else's message, and every other
// message is queued.
func TestAcceptClaimedConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	// A receiver whose queue is full: its sends are refused.
	m0, r0 := claimMessage("full-0", "carol", "dave")
	if _, err := s.Accept(ctx, m0, r0, 0); err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	claims := make(chan bool, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			receiver, maxQueue := "bob", 0
			if i%8 == 0 {
				receiver, maxQueue = "dave", 1
			}
			m, r := claimMessage(fmt.Sprintf("m%d", i), "alice", receiver)
			_, claimed, err := s.AcceptClaimed(ctx, m, r, maxQueue, claimBase, claimBase.Add(time.Minute), "owner-1")
			switch {
			case receiver == "dave" && !errors.Is(err, core.ErrQueueFull):
				errs <- fmt.Errorf("%s to the full queue: err %v, want ErrQueueFull", m.ID, err)
			case receiver == "bob" && err != nil:
				errs <- fmt.Errorf("%s: %w", m.ID, err)
			case receiver == "bob":
				claims <- claimed
			}
		})
	}
	wg.Wait()
	close(errs)
	close(claims)
	for err := range errs {
		t.Error(err)
	}
	claimedN := 0
	for c := range claims {
		if c {
			claimedN++
		}
	}
	if claimedN != 1 {
		t.Errorf("%d accepts claimed the lane, want 1", claimedN)
	}
	if got, err := s.QueueDepth(ctx, "bob"); err != nil || got != n-n/8 {
		t.Errorf("bob's queue = %d, %v; want %d", got, err, n-n/8)
	}
	if got, err := s.QueueDepth(ctx, "dave"); err != nil || got != 1 {
		t.Errorf("dave's queue = %d, %v; want 1", got, err)
	}
}

// BenchmarkAcceptClaimedOneLane is the store's side of pushed sends on one
// sender-receiver lane: 64 senders accept with a claim, the first into the
// empty lane claims it, the rest find it busy.
func BenchmarkAcceptClaimedOneLane(b *testing.B) {
	s, err := sqlite.Open(context.Background(), b.TempDir(), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m, r := claimMessage(fmt.Sprintf("m%d", next.Add(1)), "alice", "bob")
			if _, _, err := s.AcceptClaimed(ctx, m, r, 0, claimBase, claimBase.Add(time.Minute), "owner-1"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
