// Package auth authenticates requests to the hub and binds them to an
// identity: an agent (its credential), the operator (the admin token), or,
// with --dev on loopback, anyone.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Errors, matched with errors.Is.
var (
	// ErrUnauthenticated means the request carried no valid credential.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrNotPermitted means the credential does not allow the action.
	ErrNotPermitted = errors.New("not permitted")
)

// Principal is who a request acts for.
type Principal struct {
	// AgentID is the agent the credential belongs to, empty for others.
	AgentID string
	// Admin is the operator (admin token).
	Admin bool
	// Dev is set when auth is off (--dev): every action is allowed.
	Dev bool
}

// Authenticated reports whether the principal proved an identity.
func (p Principal) Authenticated() bool { return p.Admin || p.AgentID != "" }

// Key names the identity for per-caller bounds and sessions: "admin" for
// the operator, "agent:<id>" for an agent's credential, "" when the
// principal proved none.
func (p Principal) Key() string {
	switch {
	case p.Admin:
		return "admin"
	case p.AgentID != "":
		return "agent:" + p.AgentID
	}
	return ""
}

// CallerKey names who sent r, for per-caller bounds: its principal's Key,
// or, for a caller that proved no identity, "addr:" and the address it
// connects from (AddrKey).
func CallerKey(r *http.Request) string {
	if k := From(r.Context()).Key(); k != "" {
		return k
	}
	return AddrKey(r)
}

// AddrKey names a caller by the address it connects from: "addr:" and
// r.RemoteAddr's host.
func AddrKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

type ctxKey struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// From returns the principal in ctx (the zero Principal if none).
func From(ctx context.Context) Principal {
	p, _ := ctx.Value(ctxKey{}).(Principal)
	return p
}

// ActAs checks that the request may act as agentID: send as it, renew it,
// read its queue.
func ActAs(ctx context.Context, agentID string) error {
	p := From(ctx)
	switch {
	case p.Dev || p.Admin || (p.AgentID != "" && p.AgentID == agentID):
		return nil
	case !p.Authenticated():
		return fmt.Errorf("acting as %q needs that agent's credential: %w", agentID, ErrUnauthenticated)
	}
	return fmt.Errorf("credential of %q cannot act as %q: %w", p.AgentID, agentID, ErrNotPermitted)
}

// Admin checks that the request is the operator's.
func Admin(ctx context.Context) error {
	p := From(ctx)
	switch {
	case p.Dev || p.Admin:
		return nil
	case !p.Authenticated():
		return fmt.Errorf("operator action needs the admin token: %w", ErrUnauthenticated)
	}
	return fmt.Errorf("operator action needs the admin token: %w", ErrNotPermitted)
}

// MayRegister checks that the request may register agentID: an existing
// agent needs its own credential (or the operator's); a new id is open to
// any caller that does not hold another agent's credential.
func MayRegister(ctx context.Context, exists bool, agentID string) error {
	if exists {
		return ActAs(ctx, agentID)
	}
	if p := From(ctx); p.AgentID != "" && p.AgentID != agentID {
		return ActAs(ctx, agentID)
	}
	return nil
}

// Member checks that the request proved some identity (an agent's
// credential or the admin token), or that auth is off: agent listings and
// AMP ticks are for the hub's own agents, not for anonymous callers.
func Member(ctx context.Context) error {
	p := From(ctx)
	if p.Dev || p.Authenticated() {
		return nil
	}
	return fmt.Errorf("this needs a credential, any agent's or the admin token: %w", ErrUnauthenticated)
}
