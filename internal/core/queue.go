package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// pull hands an agent up to limit of its queued messages. With autoAck they
// count as delivered at once (at-most-once, the tutorial's pending call);
// otherwise they stay queued, invisible to other pulls for visibility, until
// Ack.
func (r *Relay) pull(ctx context.Context, agentID string, limit int, visibility time.Duration, autoAck bool) ([]*Message, error) {
	if _, err := r.Agent(ctx, agentID); err != nil {
		return nil, err
	}
	if visibility <= 0 {
		visibility = 30 * time.Second
	}
	now := r.clock.Now()
	ms, err := r.store.Pull(ctx, agentID, now, now.Add(visibility), limit, autoAck)
	if err != nil {
		return nil, err
	}
	if autoAck {
		for _, m := range ms {
			r.delivered(m, now, "pulled")
		}
	}
	return ms, nil
}

// ack acknowledges pulled messages.
func (r *Relay) ack(ctx context.Context, agentID string, ids []string) (int, error) {
	now := r.clock.Now()
	n, err := r.store.Ack(ctx, agentID, ids, now)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		r.notify(id)
	}
	return n, nil
}

func (r *Relay) delivered(m *Message, at time.Time, detail string) {
	r.events.Publish(Event{Type: EventDelivered, At: at, MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver,
		Status: StatusDelivered, Protocol: m.Protocol, ConversationID: m.ConversationID, Detail: detail, Attempts: m.Attempts})
	r.notify(m.ID)
}

// QueueAccess decides whether p may take agent id's queue (pull,
// acknowledge, stream): its owner in its current identity, the operator,
// dev mode, the hub. The agent must be registered.
func (r *Relay) QueueAccess(ctx context.Context, p Principal, id string) error {
	rel, err := r.relationToAgent(ctx, p, id)
	if err != nil {
		return err
	}
	if err := Authorize(p, OpQueue, rel); err != nil {
		return fmt.Errorf("queue of %q: %w", id, err)
	}
	if _, err := r.Agent(ctx, id); errors.Is(err, ErrNotFound) {
		return err // it names the agent
	} else if err != nil {
		return fmt.Errorf("agent %q: %w", id, err)
	}
	return nil
}

// ParseAckMode reads a pull's acknowledgement mode as the adapters take
// it from a client: "" or "auto" (the messages count as delivered as they
// are handed out: autoAck) or "manual" (they stay queued until acked).
// Anything else is ErrInvalid: a misspelt mode must not fall back to auto,
// which would count the messages delivered.
func ParseAckMode(v string) (autoAck bool, err error) {
	switch v {
	case "", "auto":
		return true, nil
	case "manual":
		return false, nil
	}
	return false, fmt.Errorf("ack must be auto (the default) or manual: %w", ErrInvalid)
}

// PullAs hands p up to limit of agent id's queued messages (see pull),
// when p may take the queue (QueueAccess).
func (r *Relay) PullAs(ctx context.Context, p Principal, id string, limit int, visibility time.Duration, autoAck bool) ([]*Message, error) {
	if err := r.QueueAccess(ctx, p, id); err != nil {
		return nil, err
	}
	return r.pull(ctx, id, limit, visibility, autoAck)
}

// AckAs acknowledges, for p, messages pulled from agent id's queue, as ack
// does, when p may take the queue (QueueAccess).
func (r *Relay) AckAs(ctx context.Context, p Principal, id string, ids []string) (int, error) {
	if err := r.QueueAccess(ctx, p, id); err != nil {
		return 0, err
	}
	return r.ack(ctx, id, ids)
}

// QueueDepth counts the messages queued for agent id, for p, who may see
// the queue as it may take it (OpQueue): its owner in its current
// identity, the operator, dev mode, the hub. The dashboard and the metrics
// read it as the operator and as the hub.
func (r *Relay) QueueDepth(ctx context.Context, p Principal, id string) (int, error) {
	rel, err := r.relationToAgent(ctx, p, id)
	if err != nil {
		return 0, err
	}
	if err := Authorize(p, OpQueue, rel); err != nil {
		return 0, fmt.Errorf("queue of %q: %w", id, err)
	}
	return r.store.QueueDepth(ctx, id)
}
