package core

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// ActAs decides whether p may act as agent id, that is send as it
// (OpSendAs), in id's current identity, and does nothing else. It is for an
// adapter that must know before a side effect of its own (MAMP registers a
// remote receiver on the fly before it sends); the operations it calls then
// decide again.
func (r *Relay) ActAs(ctx context.Context, p Principal, id string) error {
	rel, err := r.relationToAgent(ctx, p, id)
	if err != nil {
		return err
	}
	if err := Authorize(p, OpSendAs, rel); err != nil {
		return fmt.Errorf("acting as %q: %w", id, err)
	}
	return nil
}

// PublicAgent returns agent id, from the relay's short-lived cache, to any
// caller, anonymous ones included, for the card every protocol publishes of
// it (MAMP's /mamp/v1/agents/{id}/card, A2A's agent card): cards are public
// by design (docs/security.md). A hidden agent is not found, but by the
// callers that may see hidden agents (OpListHidden). Callers must not modify
// the result.
func (r *Relay) PublicAgent(ctx context.Context, p Principal, id string) (*Agent, error) {
	if Hidden(id) && Authorize(p, OpListHidden, RelNone) != nil {
		return nil, fmt.Errorf("agent %q: %w", id, ErrNotFound)
	}
	a, err := r.Agent(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("agent %q: %w", id, ErrNotFound)
	}
	return a, err
}

// MaxTraceID bounds a trace id's length in bytes.
const MaxTraceID = 200

// SetTraceIDAs records agent's own trace id for conversation id (each
// participant of a conversation keeps its own, as MAMP has it), for p, who
// may act as agent (OpSendAs). Setting it is part of sending in the
// conversation: agent must be a member of it (OpSendInConversation), or the
// answer is that of an unknown conversation (ErrNoConversation); the
// operator and dev mode may set any agent's (which makes it a member, as an
// invitation would). The trace id is at most MaxTraceID bytes of UTF-8
// without control characters (ErrInvalid).
func (r *Relay) SetTraceIDAs(ctx context.Context, p Principal, id, agent, traceID string) error {
	if id == "" {
		return fmt.Errorf("conversation id is required: %w", ErrInvalid)
	}
	if err := checkTraceID(traceID); err != nil {
		return err
	}
	if err := r.ActAs(ctx, p, agent); err != nil {
		return err
	}
	rel, exists, err := r.membership(ctx, id, agent)
	switch {
	case err != nil:
		return err
	case !exists:
		return fmt.Errorf("conversation %q: %w", id, ErrNoConversation)
	}
	if err := Authorize(p, OpSendInConversation, rel); err != nil {
		return fmt.Errorf("conversation %q: %w", id, err)
	}
	return r.store.SetTraceID(ctx, id, agent, traceID, r.clock.Now())
}

// checkTraceID refuses a trace id longer than MaxTraceID or holding
// anything but printable UTF-8.
func checkTraceID(v string) error {
	if len(v) > MaxTraceID {
		return fmt.Errorf("trace id longer than %d bytes: %w", MaxTraceID, ErrInvalid)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("trace id is not valid UTF-8: %w", ErrInvalid)
	}
	for _, c := range v {
		if unicode.IsControl(c) {
			return fmt.Errorf("trace id holds a control character (%U): %w", c, ErrInvalid)
		}
	}
	return nil
}

// CredentialAccess decides whether p may rotate or revoke agent id's
// tokens (OpCredentials): its owner in its current identity, the operator,
// dev mode, the hub. The agent must be registered (ErrNotFound), which is
// told only to callers that may manage it. It returns the agent's identity
// generation, which a new credential is bound to, and does nothing else:
// the credentials live outside the core (package auth).
func (r *Relay) CredentialAccess(ctx context.Context, p Principal, id string) (generation string, err error) {
	rel, err := r.relationToAgent(ctx, p, id)
	if err != nil {
		return "", err
	}
	if err := Authorize(p, OpCredentials, rel); err != nil {
		return "", fmt.Errorf("credentials of %q: %w", id, err)
	}
	a, err := r.store.GetAgent(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return "", err // it names the agent
	}
	if err != nil {
		return "", fmt.Errorf("agent %q: %w", id, err)
	}
	return a.Generation, nil
}
