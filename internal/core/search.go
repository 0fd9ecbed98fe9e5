package core

import (
	"context"
	"fmt"
)

// MessageQuery selects stored messages for an operator's history view.
// Zero fields match everything.
type MessageQuery struct {
	// Text is found in the message id, sender, receiver, type or
	// content (case-sensitive substring).
	Text string
	// Agent matches the sender or the receiver.
	Agent    string
	Sender   string
	Receiver string
	// Status is a receipt status (queued, delivered, rejected, timeout,
	// expired).
	Status         Status
	Protocol       string
	ConversationID string
	// BeforeSeq pages back: only messages older than this Seq (0: from
	// the newest).
	BeforeSeq int64
	// Limit bounds the answer [50, at most 500].
	Limit int
}

// Normalized returns q with its Limit in bounds.
func (q MessageQuery) Normalized() MessageQuery {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	if q.Limit > 500 {
		q.Limit = 500
	}
	return q
}

// StoredMessage is one message of a search with its receipt.
type StoredMessage struct {
	Message *Message
	Receipt *Receipt
}

// MessageSearcher is an optional Store capability: the operator's
// history of stored messages (terminal ones are kept for Retention),
// newest first, a page at a time.
type MessageSearcher interface {
	SearchMessages(ctx context.Context, q MessageQuery) ([]StoredMessage, error)
}

// ErrSearchUnsupported is returned by Relay.SearchMessages on a store
// that cannot search its messages.
var ErrSearchUnsupported = NewError(KindUnsupported, "this store cannot search messages")

// SearchMessages is the operator's history of stored messages (see
// MessageSearcher). Only the operator may search: the history holds every
// agent's mail.
func (r *Relay) SearchMessages(ctx context.Context, p Principal, q MessageQuery) ([]StoredMessage, error) {
	if err := Authorize(p, OpOperator, RelNone); err != nil {
		return nil, fmt.Errorf("search messages: %w", err)
	}
	searcher, ok := r.store.(MessageSearcher)
	if !ok {
		return nil, ErrSearchUnsupported
	}
	return searcher.SearchMessages(ctx, q)
}
