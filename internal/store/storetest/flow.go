package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// flowStore is what the flow cases need of a store: the message flow the
// dashboard draws its charts from.
type flowStore interface {
	MessageFlow(ctx context.Context, q core.FlowQuery) ([]core.FlowBucket, error)
}

// flowFixture stores messages accepted, delivered, rejected and timed out
// around the window [base, base+60s), each on a lane of its own.
func flowFixture(t *testing.T, s core.Store) {
	t.Helper()
	send(t, s, "pre-late", "s1", "bob", at(-30*time.Second)) // queued at the start, delivered in it
	send(t, s, "pre-done", "s2", "bob", at(-20*time.Second)) // ended before the window
	settle(t, s, at(-10*time.Second), map[string]core.Outcome{"pre-done": {Kind: core.OutcomeDelivered}})
	send(t, s, "pre", "s3", "bob", at(-5*time.Second)) // queued throughout
	send(t, s, "a1", "s4", "bob", at(2*time.Second))
	send(t, s, "a2", "s5", "bob", at(3*time.Second))
	settle(t, s, at(12*time.Second), map[string]core.Outcome{"a1": {Kind: core.OutcomeDelivered}})
	settle(t, s, at(15*time.Second), map[string]core.Outcome{"pre-late": {Kind: core.OutcomeDelivered}})
	send(t, s, "a3", "s6", "bob", at(21*time.Second)) // queued throughout
	m, r := newMessage("a4", "s7", "bob", at(22*time.Second))
	m.ExpiresAt, r.ExpiresAt = at(40*time.Second), at(40*time.Second)
	mustAcceptMsg(t, s, m, r)
	settle(t, s, at(25*time.Second), map[string]core.Outcome{"a2": {Kind: core.OutcomeRejected, Code: 422}})
	if n, err := s.ExpireDue(context.Background(), at(45*time.Second), 10); err != nil || len(n) != 1 {
		t.Fatalf("ExpireDue: %d, %v; want a4 timed out", len(n), err)
	}
	send(t, s, "later", "s8", "bob", at(70*time.Second)) // after the window
}

var flowCases = []testCase{
	{"buckets of accepted, delivered, dead and queued", func(t *testing.T, s core.Store) {
		fs, ok := s.(flowStore)
		if !ok {
			t.Fatal("the store does not implement MessageFlow (the dashboard's charts need it)")
		}
		flowFixture(t, s)
		b := func(start time.Duration, acc, del, dead, queued int) core.FlowBucket {
			return core.FlowBucket{Start: at(start), Accepted: acc, Delivered: del, DeadLetters: dead, Queued: queued}
		}
		tests := []struct {
			name string
			q    core.FlowQuery
			want []core.FlowBucket
		}{
			{"six buckets of 10s", core.FlowQuery{Since: base, Width: 10 * time.Second, Buckets: 6}, []core.FlowBucket{
				b(0, 2, 0, 0, 4),                // a1, a2 accepted; pre-late and pre queued since before
				b(10*time.Second, 0, 2, 0, 2),   // a1, pre-late delivered
				b(20*time.Second, 2, 0, 1, 3),   // a3, a4 accepted; a2 rejected
				b(30*time.Second, 0, 0, 0, 3),   // nothing
				b(40*time.Second, 0, 0, 1, 2),   // a4 timed out
				b(50*time.Second, 0, 0, 0, 2)}}, // pre and a3 still queued
			{"the hour before", core.FlowQuery{Since: at(-time.Hour), Width: time.Hour, Buckets: 1}, []core.FlowBucket{
				b(-time.Hour, 3, 1, 0, 2)}}, // pre-late, pre-done, pre accepted; pre-done delivered
			{"one wide bucket", core.FlowQuery{Since: at(-time.Minute), Width: 3 * time.Minute, Buckets: 1}, []core.FlowBucket{
				b(-time.Minute, 8, 3, 2, 3)}}, // everything; pre, a3, later queued at its end
			{"long after", core.FlowQuery{Since: at(time.Hour), Width: time.Minute, Buckets: 2}, []core.FlowBucket{
				b(time.Hour, 0, 0, 0, 3), b(time.Hour+time.Minute, 0, 0, 0, 3)}},
		}
		for _, tt := range tests {
			got, err := fs.MessageFlow(context.Background(), tt.q)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%s: %d buckets, want %d: %+v", tt.name, len(got), len(tt.want), got)
			}
			for i := range got {
				if !got[i].Start.Equal(tt.want[i].Start) || got[i].Accepted != tt.want[i].Accepted || got[i].Delivered != tt.want[i].Delivered ||
					got[i].DeadLetters != tt.want[i].DeadLetters || got[i].Queued != tt.want[i].Queued {
					t.Errorf("%s: bucket %d = %+v, want %+v", tt.name, i, got[i], tt.want[i])
				}
			}
		}
	}},
	{"an empty store has an empty flow", func(t *testing.T, s core.Store) {
		fs, ok := s.(flowStore)
		if !ok {
			t.Fatal("the store does not implement MessageFlow")
		}
		got, err := fs.MessageFlow(context.Background(), core.FlowQuery{Since: base, Width: time.Minute, Buckets: 3})
		if err != nil || len(got) != 3 {
			t.Fatalf("MessageFlow: %v, %v", got, err)
		}
		for _, g := range got {
			if g.Accepted+g.Delivered+g.DeadLetters+g.Queued != 0 {
				t.Errorf("bucket %+v of an empty store", g)
			}
		}
	}},
	{"bad queries are refused", func(t *testing.T, s core.Store) {
		fs, ok := s.(flowStore)
		if !ok {
			t.Fatal("the store does not implement MessageFlow")
		}
		for _, q := range []core.FlowQuery{
			{Since: base, Width: time.Minute, Buckets: 0},
			{Since: base, Width: time.Minute, Buckets: core.MaxFlowBuckets + 1},
			{Since: base, Width: time.Microsecond, Buckets: 10},
			{Width: time.Minute, Buckets: 10},
		} {
			if _, err := fs.MessageFlow(context.Background(), q); !errors.Is(err, core.ErrInvalid) {
				t.Errorf("%+v: %v, want ErrInvalid", q, err)
			}
		}
	}},
}
