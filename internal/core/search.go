package core

import "context"

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
