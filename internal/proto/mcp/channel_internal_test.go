package mcp

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// scriptedInbox hands out the same message until it is acknowledged; its
// first acknowledgement fails, as when the hub went away just after the
// channel event was written.
type scriptedInbox struct {
	mu       sync.Mutex
	acked    bool
	ackCalls int
}

func (in *scriptedInbox) prepare(context.Context) error { return nil }

func (in *scriptedInbox) pull(ctx context.Context, _ time.Duration) ([]inboxMessage, error) {
	in.mu.Lock()
	acked := in.acked
	in.mu.Unlock()
	if acked {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []inboxMessage{{ID: "m1", Sender: "alice", Type: "task", Text: "hello"}}, nil
}

func (in *scriptedInbox) ack(_ context.Context, ids []string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ackCalls++
	if in.ackCalls == 1 {
		return errors.New("hub unreachable")
	}
	in.acked = true
	return nil
}

// countingNotifier records the channel events written.
type countingNotifier struct {
	mu     sync.Mutex
	events []ChannelParams
}

func (n *countingNotifier) Notify(_ context.Context, method string, params any) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, params.(ChannelParams))
	return nil
}

// TestChannelDropsDuplicates: a message whose acknowledgement was lost
// comes back; it is acknowledged again but not pushed a second time.
func TestChannelDropsDuplicates(t *testing.T) {
	in := &scriptedInbox{}
	n := &countingNotifier{}
	ch := &channel{inbox: in, notify: n, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ready := make(chan struct{})
	close(ready)
	go func() { defer close(done); ch.run(ctx, ready) }()
	waitfor.TrueWithin(t, 20*time.Second, "the message to be acknowledged", func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.acked
	})
	cancel()
	<-done
	if len(n.events) != 1 || in.ackCalls != 2 {
		t.Fatalf("%d events (want 1), %d acknowledgements (want 2: the lost one and the one after the duplicate)", len(n.events), in.ackCalls)
	}
	if p := n.events[0]; p.Content != "hello" || p.Meta["message_id"] != "m1" || p.Meta["sender"] != "alice" {
		t.Fatalf("event = %+v", p)
	}
}

func TestIDSetBounded(t *testing.T) {
	s := newIDSet(3)
	for _, id := range []string{"a", "b", "c", "d"} {
		s.add(id)
	}
	if s.has("a") || !s.has("b") || !s.has("d") || len(s.ids) != 3 {
		t.Fatalf("set = %v", s.ids)
	}
}
