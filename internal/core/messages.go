package core

import (
	"context"
	"errors"
	"fmt"
)

// MessageFor returns message id to p, who may read it as it may read its
// receipt (OpReadReceipt): its sender or receiver in the identity that
// sent or received it, the operator, dev mode, the hub. Any other caller
// gets ErrNotFound, as for a message that does not exist. A receiver
// answering a message reads it for its conversation and sender.
func (r *Relay) MessageFor(ctx context.Context, p Principal, id string) (*Message, error) {
	if _, err := r.receiptAccess(ctx, p, id); err != nil {
		return nil, err
	}
	m, err := r.store.GetMessage(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("message %q: %w", id, ErrNotFound)
	}
	return m, err
}
