// Package auth authenticates requests to the hub into a core.Principal: an
// agent (its credential), the operator (the admin token), or, with --dev on
// loopback, anyone. It does not decide what a principal may do: the core
// does (core.Authorize); the helpers below that check a request only ask
// the core's table, for the adapters that are not yet converted to the
// relay's principal-taking operations.
package auth

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Errors, matched with errors.Is: the core's.
var (
	// ErrUnauthenticated means the request carried no valid credential.
	ErrUnauthenticated = core.ErrUnauthenticated
	// ErrNotPermitted means the credential does not allow the action.
	ErrNotPermitted = core.ErrNotPermitted
)

// Principal is who a request acts for: the core's principal.
type Principal = core.Principal

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

// With returns ctx carrying p (core.WithPrincipal).
func With(ctx context.Context, p Principal) context.Context { return core.WithPrincipal(ctx, p) }

// From returns the principal in ctx (anonymous if none).
func From(ctx context.Context) Principal { return core.PrincipalFrom(ctx) }

// owner is the relation of the request's principal to agentID as far as
// the credential tells (the relay also checks that the credential is of
// the id's current identity).
func owner(p Principal, agentID string) core.Relation {
	if p.AgentID != "" && p.AgentID == agentID {
		return core.RelOwner
	}
	return core.RelNone
}

// ActAs checks that the request may act as agentID: send as it, renew it,
// read its queue (core.OpSendAs).
func ActAs(ctx context.Context, agentID string) error {
	p := From(ctx)
	if err := core.Authorize(p, core.OpSendAs, owner(p, agentID)); err != nil {
		return fmt.Errorf("acting as %q: %w", agentID, err)
	}
	return nil
}

// Admin checks that the request is the operator's (core.OpOperator).
func Admin(ctx context.Context) error {
	if err := core.Authorize(From(ctx), core.OpOperator, core.RelNone); err != nil {
		return fmt.Errorf("operator action needs the admin token: %w", err)
	}
	return nil
}

// MayRegister checks that the request may register agentID: an existing
// agent needs its own credential (or the operator's); a new local id is
// open to any caller that does not hold another agent's credential; a
// remote id (x@host) is the operator's to bind, an internal one the hub's
// (core.ErrReservedID).
func MayRegister(ctx context.Context, exists bool, agentID string) error {
	p := From(ctx)
	op := core.OpRegisterNew
	switch {
	case core.NamespaceOf(agentID) == core.NamespaceInternal:
		op = core.OpRegisterInternal
	case core.NamespaceOf(agentID) == core.NamespaceRemote:
		op = core.OpRegisterRemote
	case exists:
		op = core.OpRegisterExisting
	}
	if err := core.Authorize(p, op, owner(p, agentID)); err != nil {
		if op == core.OpRegisterInternal || op == core.OpRegisterRemote {
			return fmt.Errorf("agent id %q is reserved (%s): %w", agentID, op, core.ErrReservedID)
		}
		return fmt.Errorf("register %q: %w", agentID, err)
	}
	return nil
}

// Member checks that the request proved some identity (an agent's
// credential or the admin token), or that auth is off: agent listings and
// AMP ticks are for the hub's own agents, not for anonymous callers
// (core.OpListAgents).
func Member(ctx context.Context) error {
	if err := core.Authorize(From(ctx), core.OpListAgents, core.RelNone); err != nil {
		return fmt.Errorf("this needs a credential, any agent's or the admin token: %w", err)
	}
	return nil
}
