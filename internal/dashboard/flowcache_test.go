package dashboard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// countingFlow is a FlowStore that counts its reads, answers the read's
// number as the first bucket's accepted count, and holds each read until
// released when gate is set.
type countingFlow struct {
	reads atomic.Int64
	gate  chan struct{}
	fail  atomic.Bool
}

func (c *countingFlow) MessageFlow(ctx context.Context, q core.FlowQuery) ([]core.FlowBucket, error) {
	n := c.reads.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	if c.fail.Load() {
		return nil, errors.New("store down")
	}
	return []core.FlowBucket{{Accepted: int(n)}}, nil
}

func TestFlowCache(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	q := flowQuery(time.Hour, now)
	other := flowQuery(15*time.Minute, now)
	ctx := context.Background()
	tests := []struct {
		name      string
		steps     func(c *flowCache, st *countingFlow) []int // the accepted counts answered
		want      []int
		wantReads int64
	}{
		{"same query within the TTL: one read", func(c *flowCache, st *countingFlow) []int {
			return []int{first(t, c, st, now, q), first(t, c, st, now.Add(flowTTL-time.Millisecond), q)}
		}, []int{1, 1}, 1},
		{"after the TTL: read again", func(c *flowCache, st *countingFlow) []int {
			return []int{first(t, c, st, now, q), first(t, c, st, now.Add(flowTTL), q)}
		}, []int{1, 2}, 2},
		{"another query: its own read", func(c *flowCache, st *countingFlow) []int {
			return []int{first(t, c, st, now, q), first(t, c, st, now, other)}
		}, []int{1, 2}, 2},
		{"an error is not kept", func(c *flowCache, st *countingFlow) []int {
			st.fail.Store(true)
			if _, err := c.get(ctx, st, now, q); err == nil {
				t.Error("no error from a failing store")
			}
			st.fail.Store(false)
			return []int{first(t, c, st, now, q)}
		}, []int{2}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c flowCache
			st := &countingFlow{}
			got := tt.steps(&c, st)
			if len(got) != len(tt.want) {
				t.Fatalf("answers %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("answers %v, want %v", got, tt.want)
					break
				}
			}
			if n := st.reads.Load(); n != tt.wantReads {
				t.Errorf("%d store reads, want %d", n, tt.wantReads)
			}
		})
	}
}

// TestFlowCacheOneReadAtATime: pages asking at once share one read, and a
// page that gives up does not end the read the others wait for.
func TestFlowCacheOneReadAtATime(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	q := flowQuery(time.Hour, now)
	var c flowCache
	st := &countingFlow{gate: make(chan struct{})}
	quitter, quit := context.WithCancel(context.Background())
	quitErr := make(chan error, 1)
	go func() { _, err := c.get(quitter, st, now, q); quitErr <- err }()
	var wg sync.WaitGroup
	answers := make([]int, 8)
	for i := range answers {
		wg.Go(func() {
			b, err := c.get(context.Background(), st, now, q)
			if err != nil || len(b) != 1 {
				t.Errorf("get: %v, %v", b, err)
				return
			}
			answers[i] = b[0].Accepted
		})
	}
	quit()
	if err := <-quitErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the page that gave up got %v", err)
	}
	close(st.gate)
	wg.Wait()
	for i, a := range answers {
		if a != 1 {
			t.Errorf("page %d got read %d, want the shared read 1", i, a)
		}
	}
	if n := st.reads.Load(); n != 1 {
		t.Errorf("%d store reads for pages asking at once, want 1", n)
	}
}

func first(t *testing.T, c *flowCache, st FlowStore, now time.Time, q core.FlowQuery) int {
	t.Helper()
	b, err := c.get(context.Background(), st, now, q)
	if err != nil || len(b) == 0 {
		t.Fatalf("get: %v, %v", b, err)
	}
	return b[0].Accepted
}
