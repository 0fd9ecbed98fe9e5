package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// RegisterAs registers agent a for p, or refreshes it, and flushes its
// queue. It returns how many messages are queued for it and whether it is
// new. Who may bind which id is the authorization table's: a free local id
// anyone (but an agent for another id), a registered one its owner, a
// remote id (x@host) the hub's remote-agent registration or the operator,
// an internal id only the hub.
func (r *Relay) RegisterAs(ctx context.Context, p Principal, a *Agent, lease time.Duration) (queued int, created bool, err error) {
	ns := NamespaceOf(a.ID)
	if ns == NamespaceInternal && !validInternalID(a.ID) || ns != NamespaceInternal && !ValidAgentID(a.ID) {
		return 0, false, fmt.Errorf("agent id %q must be 1-128 characters of letters, digits and ._:@-, starting with a letter or digit: %w", a.ID, ErrInvalid)
	}
	old, err := r.store.GetAgent(ctx, a.ID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return 0, false, err
	}
	op := OpRegisterNew
	switch {
	case ns == NamespaceInternal:
		op = OpRegisterInternal
	case ns == NamespaceRemote:
		op = OpRegisterRemote
	case old != nil:
		op = OpRegisterExisting
	}
	rel := RelNone
	if p.AgentID == a.ID {
		if old != nil && p.Generation != "" && p.Generation != old.Generation {
			return 0, false, fmt.Errorf("agent %q: %w", a.ID, ErrIdentityEnded)
		}
		rel = RelOwner
	}
	if err := Authorize(p, op, rel); err != nil {
		if errors.Is(err, ErrNotPermitted) && op >= OpRegisterRemote && op <= OpRegisterInternal {
			return 0, false, fmt.Errorf("agent id %q is reserved (%s): %w", a.ID, op, ErrReservedID)
		}
		return 0, false, fmt.Errorf("register %q: %w", a.ID, err)
	}
	// A registered id keeps its identity; a free one starts a new one.
	if old != nil {
		a.Generation = old.Generation
	} else {
		a.Generation = newGeneration()
	}
	return r.register(ctx, a, lease)
}

// newGeneration returns a fresh identity generation: 128 random bits, so
// that no two identities of an id share one, whichever instance made them
// and whatever its clock says.
func newGeneration() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// register stores a, refreshing a registered agent or starting a new
// identity.
func (r *Relay) register(ctx context.Context, a *Agent, lease time.Duration) (queued int, created bool, err error) {
	lease, err = r.lease(lease)
	if err != nil {
		return 0, false, err
	}
	if a.Endpoint.Kind == "" {
		a.Endpoint.Kind = EndpointPull
	}
	if a.Endpoint.Pushable() && !r.Deliverable(a.Endpoint.Kind) {
		return 0, false, fmt.Errorf("endpoint kind %q: %w", a.Endpoint.Kind, ErrInvalid)
	}
	if err := r.checkAgentLimit(ctx, a.ID); err != nil {
		return 0, false, err
	}
	now := r.clock.Now()
	a.LeaseSeconds = int(lease / time.Second)
	a.ExpiresAt = now.Add(lease)
	a.LastSeen = now
	a.RegisteredAt = now
	if created, err = r.store.UpsertAgent(ctx, a); err != nil {
		return 0, false, err
	}
	if created {
		r.countMu.Lock()
		r.count.n++
		r.countMu.Unlock()
	}
	r.forget(a.ID)
	if queued, err = r.store.Wake(ctx, a.ID, now); err != nil {
		return 0, created, err
	}
	r.wakeScheduler()
	r.wakeStream(a.ID)
	r.events.Publish(Event{Type: EventRegistered, At: now, Agent: a.ID, Queued: queued})
	return queued, created, nil
}

// checkAgentLimit refuses to register agent id, if it is new, when the hub
// holds Config.MaxAgents agents. Counting the agents reads them all, so
// while a count (plus this instance's registrations since) is under 90% of
// the limit no exact check is made; the count is renewed every 10 s, or
// every second past half the limit. Nearer the limit every registration
// of a new id counts exactly; registrations on several instances at once
// can still pass the limit by their number.
func (r *Relay) checkAgentLimit(ctx context.Context, id string) error {
	max := r.cfg.MaxAgents
	if max <= 0 {
		return nil
	}
	now := time.Now()
	r.countMu.Lock()
	c := r.count
	r.countMu.Unlock()
	renew := 10 * time.Second
	if c.n*2 >= max {
		renew = time.Second
	}
	count := func() error {
		n, err := r.store.CountAgents(ctx)
		if err != nil {
			return fmt.Errorf("count agents: %w", err)
		}
		c = cachedCount{n: n, at: now}
		r.countMu.Lock()
		r.count = c
		r.countMu.Unlock()
		return nil
	}
	if c.at.IsZero() || now.Sub(c.at) > renew {
		if err := count(); err != nil {
			return err
		}
	}
	if c.n*10 < max*9 {
		return nil
	}
	switch _, err := r.store.GetAgent(ctx, id); {
	case err == nil:
		return nil // not new
	case !errors.Is(err, ErrNotFound):
		return err
	}
	if err := count(); err != nil {
		return err
	}
	if c.n >= max {
		return fmt.Errorf("the hub holds %d agents (--max-agents %d): %w", c.n, max, ErrAgentLimit)
	}
	return nil
}

func (r *Relay) lease(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return r.cfg.DefaultLease, nil
	case d < time.Second || d > r.cfg.MaxLease:
		return 0, fmt.Errorf("lease %v outside 1s..%v: %w", d, r.cfg.MaxLease, ErrInvalid)
	}
	return d, nil
}

// HeartbeatAs renews agent id's lease for p (its owner, the operator) and
// flushes its queue.
func (r *Relay) HeartbeatAs(ctx context.Context, p Principal, id string, lease time.Duration) (*Agent, int, error) {
	rel, err := r.relationToAgent(ctx, p, id)
	if err != nil {
		return nil, 0, err
	}
	if err := Authorize(p, OpRegisterExisting, rel); err != nil {
		return nil, 0, fmt.Errorf("heartbeat %q: %w", id, err)
	}
	return r.heartbeat(ctx, id, lease)
}

func (r *Relay) heartbeat(ctx context.Context, id string, lease time.Duration) (*Agent, int, error) {
	a, err := r.store.GetAgent(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if lease == 0 {
		lease = time.Duration(a.LeaseSeconds) * time.Second
	}
	if lease, err = r.lease(lease); err != nil {
		return nil, 0, err
	}
	now := r.clock.Now()
	if err := r.store.RenewLease(ctx, id, now.Add(lease), now); err != nil {
		return nil, 0, err
	}
	r.forget(id)
	queued, err := r.store.Wake(ctx, id, now)
	if err != nil {
		return nil, 0, err
	}
	r.wakeScheduler()
	r.wakeStream(id)
	a.ExpiresAt, a.LastSeen, a.LeaseSeconds = now.Add(lease), now, int(lease/time.Second)
	return a, queued, nil
}

// DetailDeregistered is the detail (and last_error, with code 410) of a
// message that was still queued for an agent when it deregistered: it ends
// rejected, a dead letter, and is never handed to a later registration of
// the same id.
const DetailDeregistered = "receiver deregistered before delivery"

// CodeDeregistered is the code of a message ended by its receiver's
// deregistration (HTTP 410 Gone).
const CodeDeregistered = 410

// CredentialRevoker removes every credential of an agent; the relay calls
// it when an identity ends (package auth's Credentials is one).
type CredentialRevoker interface {
	Revoke(ctx context.Context, agentID string) error
}

// SetRevoker sets who revokes an agent's credentials when its identity
// ends. Call it before serving.
func (r *Relay) SetRevoker(rv CredentialRevoker) { r.revoker = rv }

// DeregisterAs ends agent id's identity for p (its owner, the operator):
// the agent is removed, its credentials revoked, its conversation
// memberships ended, and the messages still queued for it end rejected
// (code 410, DetailDeregistered) as dead letters. Registering the id again
// starts a new identity that sees nothing of this one.
func (r *Relay) DeregisterAs(ctx context.Context, p Principal, id string) error {
	rel, err := r.relationToAgent(ctx, p, id)
	if err != nil {
		return err
	}
	if err := Authorize(p, OpDeregister, rel); err != nil {
		return fmt.Errorf("deregister %q: %w", id, err)
	}
	return r.deregister(ctx, id)
}

func (r *Relay) deregister(ctx context.Context, id string) error {
	// No send to id is between reading its receiver and storing the
	// message while the identity ends (identityLocks).
	mu := r.identityLock(id)
	mu.Lock()
	now := r.clock.Now()
	ended, err := r.store.EndIdentity(ctx, id, now, DetailDeregistered)
	if err == nil {
		r.forgetIdentity(id)
	}
	mu.Unlock()
	if err != nil {
		return err
	}
	if r.revoker != nil {
		// The id is free again: its old credentials must not act for the
		// next identity. (The agent is gone already; a failure here is
		// the answer, and the credentials are refused anyway once
		// another identity registers, see Principal.Generation.)
		if err := r.revoker.Revoke(ctx, id); err != nil {
			return fmt.Errorf("revoke the credentials of %q: %w", id, err)
		}
	}
	for _, rc := range ended {
		r.events.Publish(Event{Type: EventRejected, At: now, MessageID: rc.MessageID, Sender: rc.Sender, Receiver: rc.Receiver,
			Status: StatusRejected, Code: rc.Code, Detail: DetailDeregistered})
		r.notify(rc.MessageID)
	}
	r.events.Publish(Event{Type: EventDeregistered, At: now, Agent: id})
	return nil
}

// relationToAgent is how p stands to agent id: RelOwner when p holds the
// credential of id's current identity. A credential of another generation
// of id, or for an id no longer registered, belongs to an ended identity:
// ErrIdentityEnded.
func (r *Relay) relationToAgent(ctx context.Context, p Principal, id string) (Relation, error) {
	if p.AgentID == "" || p.AgentID != id {
		return RelNone, nil
	}
	if p.Generation == "" {
		return RelOwner, nil
	}
	a, err := r.Agent(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return RelNone, fmt.Errorf("agent %q is not registered: %w", id, ErrIdentityEnded)
	case err != nil:
		return RelNone, err
	case p.Generation != a.Generation:
		return RelNone, fmt.Errorf("agent %q was registered again since the credential was issued: %w", id, ErrIdentityEnded)
	}
	return RelOwner, nil
}
