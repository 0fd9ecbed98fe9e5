package opsapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/audit"
	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Credentials issues and revokes agents' bearer tokens (auth.Credentials).
type Credentials interface {
	Issue(ctx context.Context, agentID, generation string) (string, error)
	Revoke(ctx context.Context, agentID string) error
}

// Agents decides who may manage an agent's credentials (the relay's
// CredentialAccess, core.OpCredentials) and tells the agent's identity
// generation, which a new credential is bound to.
type Agents interface {
	CredentialAccess(ctx context.Context, p core.Principal, id string) (generation string, err error)
}

// Tokens serves the credential routes for operators and agents:
//
//	GET    /v1/whoami          who the request's credential is
//	POST   /v1/agents/{id}/token   rotate: revoke every token of the agent, issue one new
//	DELETE /v1/agents/{id}/token   revoke every token of the agent
//
// Rotation and revocation are the agent's own (its credential of its
// current identity) or the operator's: the core's authorization table
// decides (core.OpCredentials).
type Tokens struct {
	agents Agents
	creds  Credentials
}

// NewTokens returns the credential routes.
func NewTokens(agents Agents, creds Credentials) *Tokens {
	return &Tokens{agents: agents, creds: creds}
}

// Mount adds the routes to mux.
func (t *Tokens) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/whoami", httperr.Handle(t.whoami))
	mux.HandleFunc("POST /v1/agents/{id}/token", httperr.Handle(t.rotate))
	mux.HandleFunc("DELETE /v1/agents/{id}/token", httperr.Handle(t.revoke))
}

// Whoami is the answer of GET /v1/whoami.
type Whoami struct {
	// Principal is "admin", "agent:<id>" or "dev".
	Principal string `json:"principal"`
	Admin     bool   `json:"admin"`
	AgentID   string `json:"agent_id,omitempty"`
	Dev       bool   `json:"dev,omitempty"`
}

func (t *Tokens) whoami(w http.ResponseWriter, r *http.Request) error {
	if err := auth.Member(r.Context()); err != nil {
		return err
	}
	p := auth.From(r.Context())
	out := Whoami{Principal: p.Key(), Admin: p.Admin || p.Dev, AgentID: p.AgentID, Dev: p.Dev}
	if p.Dev {
		out.Principal = "dev"
	}
	httperr.JSON(w, http.StatusOK, out)
	return nil
}

// agentFor checks that the caller may manage the credentials of the agent
// named in the path, and that it exists.
func (t *Tokens) agentFor(r *http.Request, action string) (id, generation string, err error) {
	id = r.PathValue("id")
	generation, err = t.agents.CredentialAccess(r.Context(), auth.From(r.Context()), id)
	if err != nil {
		if !errors.Is(err, core.ErrNotFound) {
			audit.Record(r.Context(), audit.Event{Action: action, Outcome: audit.Refused, Agent: id, Reason: err.Error()})
		}
		return "", "", err
	}
	return id, generation, nil
}

// TokenAnswer is the answer of a rotation.
type TokenAnswer struct {
	AgentID string `json:"agent_id"`
	// Token is the agent's new bearer token; every earlier one is revoked.
	Token string `json:"token"`
}

func (t *Tokens) rotate(w http.ResponseWriter, r *http.Request) error {
	id, gen, err := t.agentFor(r, audit.ActionTokenRotated)
	if err != nil {
		return err
	}
	if err := t.creds.Revoke(r.Context(), id); err != nil {
		return err
	}
	tok, err := t.creds.Issue(r.Context(), id, gen)
	if err != nil {
		return err
	}
	audit.Record(r.Context(), audit.Event{Action: audit.ActionTokenRotated, Outcome: audit.Allowed, Agent: id})
	httperr.JSON(w, http.StatusOK, TokenAnswer{AgentID: id, Token: tok})
	return nil
}

func (t *Tokens) revoke(w http.ResponseWriter, r *http.Request) error {
	id, _, err := t.agentFor(r, audit.ActionTokenRevoked)
	if err != nil {
		return err
	}
	if err := t.creds.Revoke(r.Context(), id); err != nil {
		return err
	}
	audit.Record(r.Context(), audit.Event{Action: audit.ActionTokenRevoked, Outcome: audit.Allowed, Agent: id})
	httperr.JSON(w, http.StatusOK, map[string]any{"agent_id": id, "revoked": true})
	return nil
}

// Name names the routes in logs.
func (t *Tokens) Name() string { return "tokens" }

// Run has no background work; it returns when ctx ends.
func (t *Tokens) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
