package core

import (
	"context"
	"errors"
)

// answersHelper reports whether m, sent by p to the hidden helper
// m.Receiver, answers a message that helper sent: its CorrelationID names
// a message M whose sender is m.Receiver and whose receiver is m.Sender in
// its current identity, and the table lets p answer M (OpAnswer). The
// hub's helpers send on behalf of callers that have no agent of their own
// (an A2A task's reply path): the agent they wrote to must be able to
// answer them, though no agent may otherwise write to an internal id.
func (r *Relay) answersHelper(ctx context.Context, p Principal, m *Message) (bool, error) {
	if m.CorrelationID == "" {
		return false, nil
	}
	rc, err := r.store.GetReceipt(ctx, m.CorrelationID)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case rc.Sender != m.Receiver:
		return false, nil
	}
	rel, err := r.relationToMessage(ctx, m.Sender, rc, true)
	if err != nil {
		return false, err
	}
	return Authorize(p, OpAnswer, rel) == nil, nil
}
