package a2a

import (
	"container/heap"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
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
