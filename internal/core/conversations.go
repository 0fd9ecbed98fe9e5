package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// memberKey names an agent's membership of a conversation in the relay's
// cache of memberships.
type memberKey struct{ conversation, agent string }

// errNotMember is what a membership read answers for a non-member, so that
// the cache (which keeps values, not errors) keeps only memberships.
var errNotMember = errors.New("not a member")

// membership tells whether conversation id exists and how agent stands to
// it. Memberships found are kept for agentCacheTTL (a membership ends only
// when the agent's identity ends, which drops the agent's entries on this
// instance at once); a non-member is asked of the store every time, since
// a message to it may make it a member at any moment.
func (r *Relay) membership(ctx context.Context, id, agent string) (rel Relation, exists bool, err error) {
	if agent == "" {
		_, err := r.store.GetConversation(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			return RelNone, false, nil
		case err != nil:
			return RelNone, false, err
		}
		return RelNone, true, nil
	}
	exists = true
	_, err = r.members.Get(memberKey{id, agent}, func() (struct{}, error) {
		c, err := r.store.GetConversation(ctx, id)
		if err != nil {
			return struct{}{}, err
		}
		if !slices.ContainsFunc(c.Participants, func(p Participant) bool { return p.AgentID == agent }) {
			return struct{}{}, errNotMember
		}
		return struct{}{}, nil
	})
	switch {
	case err == nil:
		return RelMember, true, nil
	case errors.Is(err, errNotMember):
		return RelNone, true, nil
	case errors.Is(err, ErrNotFound):
		return RelNone, false, nil
	}
	return RelNone, false, err
}

// conversationAccess decides whether p may do op on conversation id: the
// operator and dev mode may; an agent must be a member in its current
// identity. Refusals and unknown conversations answer alike
// (ErrNoConversation).
func (r *Relay) conversationAccess(ctx context.Context, p Principal, op Op, id string) error {
	if id == "" {
		return fmt.Errorf("conversation id is required: %w", ErrInvalid)
	}
	if p.Admin || p.Dev {
		return nil
	}
	if p.AgentID == "" {
		return Authorize(p, op, RelNone)
	}
	own, err := r.relationToAgent(ctx, p, p.AgentID)
	if err != nil {
		return err
	}
	rel := RelNone
	if own == RelOwner {
		if rel, _, err = r.membership(ctx, id, p.AgentID); err != nil {
			return err
		}
	}
	if err := Authorize(p, op, rel); err != nil {
		return fmt.Errorf("conversation %q: %w", id, err)
	}
	return nil
}

// Conversation returns conversation id to p, a member of it (or the
// operator). A conversation p may not see and one that does not exist get
// the same error, ErrNoConversation.
func (r *Relay) Conversation(ctx context.Context, p Principal, id string) (*Conversation, error) {
	if err := r.conversationAccess(ctx, p, OpReadConversation, id); err != nil {
		return nil, err
	}
	c, err := r.store.GetConversation(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("conversation %q: %w", id, ErrNoConversation)
	}
	return c, err
}

// ConversationMessages returns up to limit of conversation id's messages
// after seq afterSeq, in send order, to p, a member of it (or the
// operator); refused as Conversation is. Subscribing to a conversation is
// calling it again with the last seq seen.
func (r *Relay) ConversationMessages(ctx context.Context, p Principal, id string, afterSeq int64, limit int) ([]*Message, error) {
	if _, err := r.Conversation(ctx, p, id); err != nil {
		return nil, err
	}
	return r.store.ConversationMessages(ctx, id, afterSeq, limit)
}

// Conversations lists up to limit of the conversations agent takes part in,
// most recent first, to the agent itself (or the operator; an empty agent
// lists every conversation, for the operator only).
func (r *Relay) Conversations(ctx context.Context, p Principal, agent string, limit int) ([]*Conversation, error) {
	rel := RelNone
	if agent != "" {
		var err error
		if rel, err = r.relationToAgent(ctx, p, agent); err != nil {
			return nil, err
		}
	}
	if err := Authorize(p, OpListConversations, rel); err != nil {
		return nil, fmt.Errorf("conversations of %q: %w", agent, err)
	}
	return r.store.ListConversations(ctx, agent, limit)
}

// Invite makes agent a member of conversation id, for p, a member (or the
// operator). The invited agent must be registered (and, for an agent
// inviting, not hidden).
func (r *Relay) Invite(ctx context.Context, p Principal, id, agent string) error {
	if err := r.conversationAccess(ctx, p, OpInvite, id); err != nil {
		return err
	}
	if _, err := r.LookupAgent(ctx, p, agent); err != nil {
		return err
	}
	rel, exists, err := r.membership(ctx, id, agent)
	switch {
	case err != nil:
		return err
	case !exists:
		return fmt.Errorf("conversation %q: %w", id, ErrNoConversation)
	case rel == RelMember:
		return nil
	}
	return r.store.SetTraceID(ctx, id, agent, "", r.clock.Now())
}
