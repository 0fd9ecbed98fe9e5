package a2a

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// BenchmarkFollowerIdlePass is a pass of the task follower over 100,000
// followed messages none of which is due: it takes the due checks off its
// queue instead of walking them all (9 ms a pass when it walked them,
// four passes a second).
func BenchmarkFollowerIdlePass(b *testing.B) {
	s := &Server{relay: core.NewRelay(nil, nil, core.Config{}, nil)}
	f := newFollowers(s)
	now := s.relay.Clock().Now()
	for i := range 100_000 {
		id := fmt.Sprint("m", i)
		e := &followed{agent: "a", task: id, until: now.Add(time.Hour), next: now.Add(time.Minute), gap: time.Minute}
		f.byMsg[id] = e
		heap.Push(&f.queue, check{e.next, id, e})
	}
	b.ResetTimer()
	for b.Loop() {
		f.pass(context.Background())
	}
}

// TestAdoptReadsEveryMark: a hub that starts adopts every follow mark in
// the store, past one page of them.
func TestAdoptReadsEveryMark(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	relay := core.NewRelay(st, nil, core.Config{}, nil)
	s := New(relay, Options{})
	s.opt.Context = ctx // stops the follower when the test ends
	const n = adoptPage + 1
	until := relay.Clock().Now().Add(time.Hour)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("msg-%05d", i)
			if err := s.followers.remember(ctx, "agent", "task-"+id, id, until); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// (Followed, the marks' tasks, which do not exist, are soon dropped.)
	if got, err := s.followers.adopt(ctx); err != nil || got != n {
		t.Fatalf("adopted %d of %d marks (%v)", got, n, err)
	}
}
