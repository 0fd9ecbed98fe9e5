package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SendResult is the answer to Send.
type SendResult struct {
	Receipt   Receipt
	Duplicate bool
	// ConversationID is, for a Duplicate, the conversation of the message
	// first accepted with the id (a retry may name none, or another).
	ConversationID string
	// claimed: the message's lane was claimed as it was accepted, for the
	// sender's own first attempt (SendAsAwaitAttempt).
	claimed bool
}

// SendAs accepts message m for p: when it returns without error the
// message is durable and will end in exactly one terminal status. m.ID,
// Sender and Receiver must be set; ReceivedAt and ExpiresAt are set here
// from the hub's clock.
//
// It decides, in this order, before anything is stored: p may send as
// m.Sender (its owner, the operator, the hub); the receiver exists and p
// may send to it (internal ids take messages only from the hub; the
// receiver card's access rules); an answer (CorrelationID = M) comes from
// M's receiver; a message in an existing conversation comes from a member
// (the receiver becomes one). A message whose id was accepted before is a
// retry when it comes from the same sender to the same receiver with the
// same content (SameContent): it gets the first outcome with Duplicate set
// and is not routed again; otherwise the error is ErrIDConflict.
func (r *Relay) SendAs(ctx context.Context, p Principal, m *Message) (SendResult, error) {
	return r.sendAs(ctx, p, m, false)
}

// sendAs is SendAs; with claim, the store may claim the message's lane as
// it accepts it (see SendAsAwaitAttempt).
func (r *Relay) sendAs(ctx context.Context, p Principal, m *Message, claim bool) (SendResult, error) {
	if m.Sender != "" {
		rel, err := r.relationToAgent(ctx, p, m.Sender)
		if err != nil {
			return SendResult{}, err
		}
		if err := Authorize(p, OpSendAs, rel); err != nil {
			return SendResult{}, fmt.Errorf("sender %q: %w", m.Sender, err)
		}
	}
	return r.send(ctx, p, m, claim)
}

func (r *Relay) send(ctx context.Context, p Principal, m *Message, claim bool) (SendResult, error) {
	if m.ID == "" || len(m.ID) > 200 {
		return SendResult{}, fmt.Errorf("message_id must be 1..200 characters: %w", ErrInvalid)
	}
	if m.Sender == "" || m.Receiver == "" {
		return SendResult{}, fmt.Errorf("sender and receiver are required: %w", ErrInvalid)
	}
	if m.TTL == 0 {
		m.TTL = r.cfg.DefaultTTL
	}
	if m.TTL < time.Millisecond || m.TTL > r.cfg.MaxTTL {
		return SendResult{}, fmt.Errorf("ttl %v outside 1ms..%v: %w", m.TTL, r.cfg.MaxTTL, ErrInvalid)
	}
	if m.Type == "" {
		m.Type = "message"
	}
	if len(m.Parts) > r.cfg.MaxParts {
		return SendResult{}, fmt.Errorf("%d content parts, at most %d: %w", len(m.Parts), r.cfg.MaxParts, ErrTooLarge)
	}
	mu := r.identityLock(m.Receiver)
	mu.RLock()
	defer mu.RUnlock()
	recv, err := r.Agent(ctx, m.Receiver)
	if errors.Is(err, ErrNotFound) {
		// A repeated id whose first send was accepted still answers with
		// the first outcome, even if the receiver has since gone.
		if rc, err2 := r.store.GetReceipt(ctx, m.ID); err2 == nil && rc.Sender == m.Sender && rc.Receiver == m.Receiver {
			conv, err := r.sameContent(ctx, m)
			if err != nil {
				return SendResult{}, err
			}
			return SendResult{Receipt: *rc, Duplicate: true, ConversationID: conv}, nil
		}
		return SendResult{}, fmt.Errorf("receiver %q: %w", m.Receiver, ErrUnknownReceiver)
	}
	if err != nil {
		return SendResult{}, err
	}
	if Hidden(recv.ID) {
		if err := r.checkToInternal(ctx, p, m); err != nil {
			return SendResult{}, err
		}
	}
	if err := CheckAccess(recv, r.URI(m.Sender), p.Authenticated()); err != nil {
		return SendResult{}, err
	}
	if err := CheckCard(recv, m); err != nil {
		return SendResult{}, err
	}
	if err := r.checkAnswer(ctx, p, m); err != nil {
		return SendResult{}, err
	}
	if err := r.checkConversation(ctx, p, m); err != nil {
		return SendResult{}, err
	}
	if m.TraceParent == "" {
		m.TraceParent = TraceParentFrom(ctx)
	}
	m.ReceiverGeneration = recv.Generation
	m.SenderGeneration = p.Generation
	if p.AgentID != m.Sender || p.Generation == "" {
		m.SenderGeneration = ""
		if s, err := r.Agent(ctx, m.Sender); err == nil {
			m.SenderGeneration = s.Generation
		}
	}
	now := r.clock.Now()
	m.ReceivedAt = now
	m.ExpiresAt = now.Add(m.TTL)
	rc := Receipt{MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Status: StatusQueued,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: m.ExpiresAt}
	if !m.SentAt.IsZero() && m.SentAt.Add(m.TTL+r.cfg.Skew).Before(now) {
		rc.Status = StatusExpired
		rc.History = []ReceiptEvent{{At: now, Status: StatusExpired, Detail: "past its ttl on arrival"}}
	} else {
		rc.History = []ReceiptEvent{{At: now, Status: StatusQueued, Detail: "accepted"}}
	}
	// The lane is claimed in the accept only for a receiver the scheduler
	// would push to now.
	claim = claim && recv.Endpoint.Pushable() && recv.Alive(now) && r.Deliverable(recv.Endpoint.Kind)
	res, feed, claimed, err := r.accept(ctx, m, &rc, now, claim)
	if err != nil {
		return SendResult{}, err
	}
	if res.Duplicate {
		conv, err := r.sameContent(ctx, m)
		if err != nil {
			return SendResult{}, err
		}
		return SendResult{Receipt: res.Receipt, Duplicate: true, ConversationID: conv}, nil
	}
	r.events.Publish(Event{Type: EventAccepted, At: now, MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver,
		Status: rc.Status, Protocol: m.Protocol, ConversationID: m.ConversationID, CorrelationID: m.CorrelationID, MessageType: m.Type})
	if rc.Status == StatusQueued {
		r.queued(m.Receiver)
		r.queuedBytes(m)
		switch {
		case claimed:
			// The caller makes the first attempt (attemptClaimed); the
			// scheduler takes the lane when it is released.
		case feed != nil:
			// Stored pulled for a stream here: it is the stream's until
			// its lease runs out.
			cp := *m // the stream reads it after Send returns
			if !feed.put(&cp) {
				r.log.Debug("stream ended during a hand-off; the message is pulled again when its lease runs out",
					"message_id", m.ID, "receiver", m.Receiver)
			}
		case recv.Endpoint.Pushable() && recv.Alive(now):
			if !res.LaneClaimed {
				// A claimed lane's claimant takes the message: a look for
				// due lanes would find nothing (a transaction on a shared
				// store, for each message to a busy lane).
				r.wakeScheduler()
			}
			r.wakeStream(m.Receiver)
		default:
			// Only a pull or a stream can take it now. The scheduler would
			// claim the lane just to park it (a write per message when the
			// lane keeps emptying), so it is left to the next poll; a
			// registration that makes the receiver pushable wakes it.
			r.wakeStream(m.Receiver)
		}
	} else {
		r.notify(m.ID)
	}
	if m.CorrelationID != "" {
		r.notify(resultKeyPrefix + m.CorrelationID)
	}
	return SendResult{Receipt: res.Receipt, claimed: claimed}, nil
}

// accept stores m. When the receiver has a stream on this instance with
// room and the store can hand the message out in the same write, it is
// stored pulled for that stream, whose feed is returned. With claim, when
// the store can (AcceptClaimer), m's lane is claimed for this instance in
// the same write, and claimed reports it.
func (r *Relay) accept(ctx context.Context, m *Message, rc *Receipt, now time.Time, claim bool) (_ AcceptResult, _ *Feed, claimed bool, _ error) {
	if rc.Status == StatusQueued {
		if err := r.checkQueueBytes(ctx, m); err != nil {
			return AcceptResult{}, nil, false, err
		}
	}
	limit := r.queueLimit(ctx, m.Receiver)
	if ac, ok := r.store.(AcceptClaimer); ok && claim && rc.Status == StatusQueued {
		res, claimed, err := ac.AcceptClaimed(ctx, m, rc, limit, now, now.Add(r.cfg.ClaimLease), r.cfg.Owner)
		return res, nil, claimed && err == nil && !res.Duplicate, err
	}
	if ap, ok := r.store.(AcceptPuller); ok && rc.Status == StatusQueued {
		if f := r.feedFor(m.Receiver); f != nil {
			res, pulled, err := ap.AcceptPulled(ctx, m, rc, limit, now, now.Add(f.visibility))
			if !pulled {
				f = nil
			}
			return res, f, false, err
		}
	}
	res, err := r.store.Accept(ctx, m, rc, limit)
	return res, nil, false, err
}

// sameContent checks that m, whose id was already accepted from the same
// sender for the same receiver, repeats that message: a retry answers the
// first outcome, but an id reused for other content is ErrIDConflict,
// since answering "duplicate" would let the sender believe a message the
// hub never took was sent. Content is the type, the correlation id and the
// parts, compared as JSON values (key order and number spelling do not
// matter); conversation ids, metadata, TTL and timestamps may differ
// between attempts. A first message purged since counts as the same. It
// returns the first message's conversation id (m's if it was purged).
func (r *Relay) sameContent(ctx context.Context, m *Message) (conversationID string, err error) {
	first, err := r.store.GetMessage(ctx, m.ID)
	if errors.Is(err, ErrNotFound) {
		return m.ConversationID, nil
	}
	if err != nil {
		return "", fmt.Errorf("read message %q: %w", m.ID, err)
	}
	if !SameContent(first, m) {
		return "", fmt.Errorf("message %q was sent before with other content (a retry must repeat the message): %w", m.ID, ErrIDConflict)
	}
	return first.ConversationID, nil
}

// checkAnswer refuses an answer (CorrelationID = M) whose sender is not
// M's receiver, in its current identity; the operator (and dev mode) may
// answer anything.
func (r *Relay) checkAnswer(ctx context.Context, p Principal, m *Message) error {
	if m.CorrelationID == "" || p.Admin || p.Dev {
		return nil
	}
	refuse := func() error {
		if first, err := r.store.GetReceipt(ctx, m.ID); err == nil {
			// The id is taken: that it was not a retry is the better
			// answer (a retry of an accepted answer passes the check).
			if first.Sender != m.Sender || first.Receiver != m.Receiver {
				return IDConflict(m, first)
			}
			return fmt.Errorf("message %q was sent before with other content (a retry must repeat the message): %w", m.ID, ErrIDConflict)
		}
		return fmt.Errorf("correlation_id %q: %q did not receive that message: %w", m.CorrelationID, m.Sender, ErrNotAnswerable)
	}
	rc, err := r.store.GetReceipt(ctx, m.CorrelationID)
	switch {
	case errors.Is(err, ErrNotFound):
		return refuse()
	case err != nil:
		return err
	}
	rel, err := r.relationToMessage(ctx, m.Sender, rc, true)
	if err != nil {
		return err
	}
	if Authorize(p, OpAnswer, rel) != nil {
		return refuse()
	}
	return nil
}

// checkToInternal decides whether p may send m to an internal id: the hub,
// the operator and dev mode may; an agent only to answer a message that
// internal id sent it (OpAnswerInternal), such as the MCP operator's
// request to a worker. Every refusal is ErrUnknownReceiver, as for an id
// that does not exist, so that internal ids cannot be probed.
func (r *Relay) checkToInternal(ctx context.Context, p Principal, m *Message) error {
	if Authorize(p, OpSendToInternal, RelNone) == nil {
		return nil
	}
	rel := RelNone
	if m.CorrelationID != "" && p.AgentID != "" {
		rc, err := r.store.GetReceipt(ctx, m.CorrelationID)
		switch {
		case err == nil && rc.Sender == m.Receiver:
			if rel, err = r.relationToMessage(ctx, m.Sender, rc, true); err != nil {
				return err
			}
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
	}
	if Authorize(p, OpAnswerInternal, rel) != nil {
		return fmt.Errorf("receiver %q: %w", m.Receiver, ErrUnknownReceiver)
	}
	return nil
}

// relationToMessage is how agent id stands to the message of receipt rc:
// RelOwner when it is the message's receiver (or, unless onlyReceiver, its
// sender) in the identity it has now, the generation the message was
// accepted for (Message.SenderGeneration, ReceiverGeneration).
func (r *Relay) relationToMessage(ctx context.Context, id string, rc *Receipt, onlyReceiver bool) (Relation, error) {
	receiver := rc.Receiver == id
	if id == "" || (!receiver && (onlyReceiver || rc.Sender != id)) {
		return RelNone, nil
	}
	a, err := r.Agent(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		// Not registered (dev mode sends as anyone): the id alone.
		return RelOwner, nil
	case err != nil:
		return RelNone, err
	}
	m, err := r.store.GetMessage(ctx, rc.MessageID)
	if errors.Is(err, ErrNotFound) {
		return RelNone, nil // purged meanwhile
	}
	if err != nil {
		return RelNone, err
	}
	if ofIdentity(m, rc, a, receiver) {
		return RelOwner, nil
	}
	if !receiver || onlyReceiver || rc.Sender != id {
		return RelNone, nil // an earlier identity's message
	}
	// Sent to itself: it may stand as the sender instead.
	if ofIdentity(m, rc, a, false) {
		return RelOwner, nil
	}
	return RelNone, nil
}

// ofIdentity reports whether message m, of receipt rc, belongs to agent
// a's identity as its receiver (or else its sender): accepted for a's
// generation. A message accepted before generations were kept carries
// none; for it alone the old rule stands, that it was accepted after a
// registered.
func ofIdentity(m *Message, rc *Receipt, a *Agent, receiver bool) bool {
	mg := m.SenderGeneration
	if receiver {
		mg = m.ReceiverGeneration
	}
	if mg == "" {
		return !rc.CreatedAt.Before(a.RegisteredAt)
	}
	return mg == a.Generation
}

// checkConversation refuses a message in an existing conversation whose
// sender is not a member of it, with the answer a read of a conversation
// that does not exist gets (ErrNoConversation). A conversation that does
// not exist yet is started by the message, its sender and receiver its
// first members; a member's message makes its receiver a member.
func (r *Relay) checkConversation(ctx context.Context, p Principal, m *Message) error {
	if m.ConversationID == "" || p.Admin || p.Dev {
		return nil
	}
	rel, exists, err := r.membership(ctx, m.ConversationID, m.Sender)
	if err != nil || !exists {
		return err
	}
	if err := Authorize(p, OpSendInConversation, rel); err != nil {
		return fmt.Errorf("conversation %q: %w", m.ConversationID, err)
	}
	return nil
}
