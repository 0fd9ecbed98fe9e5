package core

import (
	"context"
	"fmt"
	"time"
)

// AgentFilter selects agents in ListAgents. Zero fields match everything.
type AgentFilter struct {
	Capability string
	// AliveAt, when non-zero, keeps only agents whose lease is current then.
	AliveAt time.Time
	Limit   int
}

// OutcomeKind is what a delivery attempt led to.
type OutcomeKind int

// Outcome kinds recorded by Complete.
const (
	// OutcomeDelivered marks the message delivered (terminal).
	OutcomeDelivered OutcomeKind = iota + 1
	// OutcomeRejected marks the message rejected by the receiver (terminal).
	OutcomeRejected
	// OutcomeRetry counts a failed attempt; the message stays queued.
	OutcomeRetry
	// OutcomeTimeout marks a message whose TTL passed before delivery
	// (terminal, dead letter).
	OutcomeTimeout
)

// Outcome is the result of one claimed message's delivery attempt.
type Outcome struct {
	MessageID string
	Kind      OutcomeKind
	At        time.Time
	NextAt    time.Time // for Retry: when the next attempt is due
	Code      int
	Error     string
	Reply     []byte
	Detail    string
}

// Lane is the (sender, receiver) pair that orders messages.
type Lane struct {
	Receiver string
	Sender   string
}

// LaneClaim is a claimed lane with its first queued messages.
type LaneClaim struct {
	Lane     Lane
	Messages []*Message
}

// LaneResult is what happened to a claimed lane.
type LaneResult struct {
	Lane     Lane
	Outcomes []Outcome
	// Park sets the lane aside until Wake (its receiver is offline or
	// pulls); otherwise the lane is due again at NextAt (now if zero).
	Park   bool
	NextAt time.Time
}

// AcceptResult is what Accept did.
type AcceptResult struct {
	Receipt   Receipt
	Duplicate bool // the message id was seen before; Receipt is the first outcome
	// LaneClaimed reports, when a store can tell, that the message's lane
	// was claimed for delivery (by any instance) as the message was
	// stored: the claimant delivers it, so the relay need not look for
	// due lanes. A store that releases a lane looks again afterwards,
	// which covers an accept racing the release.
	LaneClaimed bool
}

// DeadLetterFilter selects dead letters.
type DeadLetterFilter struct {
	Receiver string
	Limit    int
}

// Store is the persistence the relay needs. Every method is safe for
// concurrent use and every write is durable when it returns. Two backends
// implement it (embedded SQLite and PostgreSQL); both pass the same
// contract suite in internal/store/storetest.
type Store interface {
	// UpsertAgent creates or replaces an agent, keeping RegisteredAt of an
	// existing one. It reports whether the agent is new.
	UpsertAgent(ctx context.Context, a *Agent) (created bool, err error)
	// GetAgent returns ErrNotFound for an unknown id.
	GetAgent(ctx context.Context, id string) (*Agent, error)
	ListAgents(ctx context.Context, f AgentFilter) ([]*Agent, error)
	// CountAgents counts the registered agents, alive or not.
	CountAgents(ctx context.Context) (int, error)
	// RenewLease moves an agent's lease to expiresAt and LastSeen to now.
	RenewLease(ctx context.Context, id string, expiresAt, now time.Time) error
	DeleteAgent(ctx context.Context, id string) error
	// EndIdentity ends agent id's identity in one transaction: it deletes
	// the agent (ErrNotFound if there is none), ends its conversation
	// memberships and moves every message still queued for it to rejected
	// with Code 410 and detail in its history and last_error (a dead
	// letter). It returns the receipts of the messages it ended.
	EndIdentity(ctx context.Context, id string, now time.Time, detail string) ([]*Receipt, error)

	// Accept stores a new message and its receipt atomically. If a message
	// with the same id exists, it stores nothing and returns the existing
	// receipt with Duplicate set, or ErrIDConflict (see IDConflict) when
	// another sender used the id or this sender used it for another
	// receiver. When maxQueue > 0 and the receiver already has that many
	// queued messages, it stores nothing and returns ErrQueueFull. A
	// message accepted with a terminal receipt status (expired) is stored
	// but never scheduled.
	Accept(ctx context.Context, m *Message, r *Receipt, maxQueue int) (AcceptResult, error)
	GetMessage(ctx context.Context, id string) (*Message, error)
	GetReceipt(ctx context.Context, id string) (*Receipt, error)
	// Results returns the messages whose CorrelationID is id, oldest first.
	Results(ctx context.Context, correlationID string, limit int) ([]*Message, error)

	// Claim leases up to maxLanes (sender, receiver) lanes that have
	// queued messages, are due at now, are not parked and are not claimed by
	// another owner, until claimUntil; each comes with up to perLane of its
	// queued messages in send order. Claiming whole lanes keeps per-pair
	// order: a lane is delivered by one owner at a time, and a lane whose
	// head is waiting for a retry holds back the messages behind it.
	Claim(ctx context.Context, now, claimUntil time.Time, owner string, maxLanes, perLane int) ([]LaneClaim, error)
	// Complete records the outcomes of claimed lanes and releases them.
	// Outcomes for messages that are no longer queued are ignored.
	Complete(ctx context.Context, owner string, results []LaneResult) error
	// ExpireDue moves up to limit queued messages whose ExpiresAt is at or
	// before now to timeout and returns their receipts.
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]*Receipt, error)
	// Wake makes a receiver's parked lanes due at now; it returns how many
	// messages are queued for it.
	Wake(ctx context.Context, receiver string, now time.Time) (int, error)
	// QueueDepth counts a receiver's queued messages.
	QueueDepth(ctx context.Context, receiver string) (int, error)
	// Pull leases up to limit of a receiver's queued messages, in order, to
	// the puller until visibleAt. With autoAck the messages are marked
	// delivered in the same transaction instead.
	Pull(ctx context.Context, receiver string, now, visibleAt time.Time, limit int, autoAck bool) ([]*Message, error)
	// Ack marks pulled messages delivered; ids that are not the receiver's
	// or not queued are skipped. It returns how many were acknowledged.
	Ack(ctx context.Context, receiver string, ids []string, now time.Time) (int, error)

	// DeadLetters lists messages that ended timeout or rejected, newest first.
	DeadLetters(ctx context.Context, f DeadLetterFilter) ([]*Receipt, error)
	// Replay re-queues a dead letter with a fresh TTL from now.
	Replay(ctx context.Context, id string, now, expiresAt time.Time) (*Receipt, error)
	// PurgeBefore deletes terminal messages and receipts last updated
	// before t; it returns how many were deleted.
	PurgeBefore(ctx context.Context, t time.Time, limit int) (int, error)

	// GetConversation returns ErrNotFound for an unknown id.
	GetConversation(ctx context.Context, id string) (*Conversation, error)
	// ListConversations lists conversations an agent takes part in (all if
	// agentID is empty), most recent first.
	ListConversations(ctx context.Context, agentID string, limit int) ([]*Conversation, error)
	// CreateConversation stores a new conversation; ErrConflict if it exists.
	CreateConversation(ctx context.Context, c *Conversation) error
	// SetTraceID maps a conversation to an agent's own trace id, adding the
	// agent as a participant if needed.
	SetTraceID(ctx context.Context, conversationID, agentID, traceID string, now time.Time) error
	// ConversationMessages lists a conversation's messages in send order
	// after seq (0 for all).
	ConversationMessages(ctx context.Context, conversationID string, afterSeq int64, limit int) ([]*Message, error)

	// RecordStore is a small versioned document store for adapter state (A2A
	// tasks, push configs, AMP sessions, credentials).
	RecordStore

	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	Close() error
}

// LaneRenewer is an optional Store capability used by the scheduler: one
// write records a claimed lane's outcomes and, when the lane stays busy,
// renews the claim with its next messages, sparing a separate claim.
type LaneRenewer interface {
	// CompleteRenew records res as Complete does. Unless res parks the lane
	// or holds it for a retry (NextAt set), and while owner still holds the
	// lane, it renews the claim until claimUntil and returns up to perLane
	// of the lane's queued messages that are claimable at now, in order;
	// with none it releases the lane and returns none.
	CompleteRenew(ctx context.Context, owner string, res LaneResult, now, claimUntil time.Time, perLane int) ([]*Message, error)
}

// DetailPulled is the receipt history detail of a message handed out by a
// pull that awaits its acknowledgement; AcceptPulled records the same.
const DetailPulled = "pulled, awaiting ack"

// AcceptPuller is an optional Store capability used to hand a new message
// straight to a live stream of its receiver on this instance: the message
// is stored already pulled, so the stream needs no pull from the store.
type AcceptPuller interface {
	// AcceptPulled does what Accept does. In addition, when the message is
	// queued and none of the receiver's other queued messages could be
	// pulled at now (each is claimed past now or expired), it stores the message
	// pulled until visibleAt, as Pull would have handed it out (one
	// attempt), and reports pulled. Handing it out then keeps the
	// receiver's queue order. A store that cannot tell cheaply answers
	// false, and the message waits for a pull.
	AcceptPulled(ctx context.Context, m *Message, r *Receipt, maxQueue int, now, visibleAt time.Time) (res AcceptResult, pulled bool, err error)
}

// Record is a versioned document in a RecordStore.
type Record struct {
	Kind string
	ID   string
	// Index is a secondary key to list by (for example a task's context id
	// or agent id).
	Index     string
	Data      []byte
	Version   int64
	UpdatedAt time.Time
}

// RecordStore keeps versioned documents with optimistic concurrency.
type RecordStore interface {
	// PutRecord writes r. Version 0 creates (ErrConflict if it exists); a
	// positive Version must equal the stored one (else ErrConflict). It
	// returns the stored record with its new version.
	PutRecord(ctx context.Context, r Record) (Record, error)
	// GetRecord returns ErrNotFound for an unknown record.
	GetRecord(ctx context.Context, kind, id string) (Record, error)
	// ListRecords lists a kind's records, filtered by Index when index is
	// not empty, most recently updated first.
	ListRecords(ctx context.Context, kind, index string, limit int) ([]Record, error)
	// ListRecordsAfter lists a kind's records whose id sorts after
	// afterID (bytewise; "" for the first page), filtered by Index when
	// index is not empty, in id order: for going through all of them a
	// page at a time.
	ListRecordsAfter(ctx context.Context, kind, index, afterID string, limit int) ([]Record, error)
	DeleteRecord(ctx context.Context, kind, id string) error
}

// IDConflict is the error for m, whose id first carried the message of
// receipt first from another sender or to another receiver.
func IDConflict(m *Message, first *Receipt) error {
	if first.Sender != m.Sender {
		return fmt.Errorf("message %q is another sender's: %w", m.ID, ErrIDConflict)
	}
	return fmt.Errorf("message %q was sent to %q, not %q (a retry must repeat the message): %w", m.ID, first.Receiver, m.Receiver, ErrIDConflict)
}
