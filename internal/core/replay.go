package core

import (
	"context"
	"fmt"
	"time"
)

// replay re-queues a dead letter with a fresh TTL (its original TTL when
// ttl is 0). A message for an earlier identity of its receiver's id is
// not replayed (ErrConflict).
func (r *Relay) replay(ctx context.Context, id string, ttl time.Duration) (*Receipt, error) {
	m, err := r.store.GetMessage(ctx, id)
	if err != nil {
		return nil, err
	}
	if ttl == 0 {
		ttl = m.TTL
	}
	// A message that ended because its receiver deregistered must not go
	// to a later identity of the same id.
	if a, err := r.store.GetAgent(ctx, m.Receiver); err == nil && !ofReceiverIdentity(m, a) {
		return nil, fmt.Errorf("message %q was for an earlier identity of %q (it deregistered and registered again): %w", id, m.Receiver, ErrConflict)
	}
	if ttl <= 0 || ttl > r.cfg.MaxTTL {
		return nil, fmt.Errorf("ttl %v: %w", ttl, ErrInvalid)
	}
	now := r.clock.Now()
	rc, err := r.store.Replay(ctx, id, now, now.Add(ttl))
	if err != nil {
		return nil, err
	}
	r.wakeScheduler()
	r.wakeStream(rc.Receiver)
	r.events.Publish(Event{Type: EventReplayed, At: now, MessageID: id, Sender: rc.Sender, Receiver: rc.Receiver, Status: StatusQueued})
	return rc, nil
}

// ofReceiverIdentity reports whether m was accepted for a's identity (see
// ofIdentity; a message from before generations were kept is judged by
// its acceptance time).
func ofReceiverIdentity(m *Message, a *Agent) bool {
	if m.ReceiverGeneration == "" {
		return !m.ReceivedAt.Before(a.RegisteredAt)
	}
	return m.ReceiverGeneration == a.Generation
}

// ReplayAs re-queues dead letter id for p, the operator (see Replay).
func (r *Relay) ReplayAs(ctx context.Context, p Principal, id string, ttl time.Duration) (*Receipt, error) {
	if err := Authorize(p, OpOperator, RelNone); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return r.replay(ctx, id, ttl)
}

// DeadLetters lists dead letters to p, the operator, newest first.
func (r *Relay) DeadLetters(ctx context.Context, p Principal, f DeadLetterFilter) ([]*Receipt, error) {
	if err := Authorize(p, OpOperator, RelNone); err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return r.store.DeadLetters(ctx, f)
}

// Tail subscribes p, the operator, to the relay's events (see
// Bus.Subscribe).
func (r *Relay) Tail(p Principal, buffer int) (<-chan Event, func(), error) {
	if err := Authorize(p, OpOperator, RelNone); err != nil {
		return nil, nil, fmt.Errorf("tail: %w", err)
	}
	ch, cancel := r.events.Subscribe(buffer)
	return ch, cancel, nil
}

// Ping checks that the relay's store answers (readiness).
func (r *Relay) Ping(ctx context.Context) error { return r.store.Ping(ctx) }
