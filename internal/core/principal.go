package core

import "context"

// Principal is who an operation acts for. Adapters authenticate a request
// into a Principal (package auth does it for HTTP) and pass it to every
// relay operation; the relay decides (Authorize).
//
// The zero Principal is anonymous: it proved no identity.
type Principal struct {
	// AgentID is the agent whose credential the caller holds.
	AgentID string
	// Generation is the identity generation of AgentID the credential was
	// issued to (Agent.Generation). Deregistering an id ends its
	// generation and registering it again starts another, so a credential
	// of another generation belongs to an ended identity and is refused.
	// Empty: not known (a credential from before generations were kept);
	// it is then trusted while it exists, as revocation at deregistration
	// removes it.
	Generation string
	// Admin is the operator (the admin token).
	Admin bool
	// Dev is every caller of a hub with auth off (--dev on loopback): it
	// may do everything the operator may.
	Dev bool
	// Internal names one of the hub's own actors (a push deliverer, the
	// MAMP callback forwarder, the remote-agent registrar): the only
	// principals that may register internal ids.
	Internal string
}

// Anonymous is the principal of a caller that proved no identity.
func Anonymous() Principal { return Principal{} }

// AgentPrincipal is the principal of a caller holding a credential of
// agentID's identity generation ("" if not known).
func AgentPrincipal(agentID, generation string) Principal {
	return Principal{AgentID: agentID, Generation: generation}
}

// AdminPrincipal is the operator's principal.
func AdminPrincipal() Principal { return Principal{Admin: true} }

// DevPrincipal is the principal of every caller when auth is off.
func DevPrincipal() Principal { return Principal{Dev: true} }

// InternalPrincipal is the principal of the hub's own actor name.
func InternalPrincipal(name string) Principal { return Principal{Internal: name} }

// Authenticated reports whether the principal proved an identity: an
// agent's credential or the admin token (or is the hub itself).
func (p Principal) Authenticated() bool { return p.Admin || p.AgentID != "" || p.Internal != "" }

// Privileged reports whether the principal may act as any agent: the
// operator, dev mode and the hub's own actors.
func (p Principal) Privileged() bool { return p.Admin || p.Dev || p.Internal != "" }

// Key names the identity for per-caller bounds and sessions: "admin" for
// the operator, "agent:<id>" for an agent's credential, "internal:<name>"
// for the hub's own actors, "" when the principal proved none.
func (p Principal) Key() string {
	switch {
	case p.Admin:
		return "admin"
	case p.AgentID != "":
		return "agent:" + p.AgentID
	case p.Internal != "":
		return "internal:" + p.Internal
	}
	return ""
}

// String describes the principal for errors and logs.
func (p Principal) String() string {
	switch {
	case p.Dev:
		return "dev"
	case p.Admin:
		return "operator"
	case p.Internal != "":
		return "hub (" + p.Internal + ")"
	case p.AgentID != "":
		return "agent " + p.AgentID
	}
	return "anonymous"
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, for the code between an adapter's
// authentication and its call of the relay.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries (anonymous if none).
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}
