package mamp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// hubCard is GET /mamp/v1/card: the hub's own card.
func (s *Server) hubCard(w http.ResponseWriter, r *http.Request) error {
	base := "/mamp/v1"
	httperr.JSON(w, http.StatusOK, Card{Protocol: Protocol, AgentID: URI{Domain: s.ad.Host, ID: HubAgentID}.String(),
		Name: "Switchboard hub", Description: "Relays MAMP, ATP, A2A and MCP messages between registered agents, durably.",
		Capabilities: Capabilities{ContentTypes: AllContentTypes, MaxMessageSize: s.opt.MaxBody, Streaming: true, Async: true, Tools: []string{}},
		Access:       &core.Access{Public: true, RequireAuth: !caller(r).Dev},
		Endpoints:    &CardEndpoint{Messages: base + "/messages", Agents: base + "/agents", Conversations: base + "/conversations"}})
	return nil
}

// agentCard is GET /mamp/v1/agents/{id}/card: any agent's card, public
// (core.Relay.PublicAgent; hidden agents are not found).
func (s *Server) agentCard(w http.ResponseWriter, r *http.Request) error {
	id, err := s.agentIDParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	a, err := s.relay.PublicAgent(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, CardOf(s.ad, a))
	return nil
}

// listAgents is GET /mamp/v1/agents: the cards of the agents the caller
// may list (core.Relay.ListAgents).
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	f := core.AgentFilter{Capability: r.URL.Query().Get("capability")}
	alive, err := httperr.QueryBool(r, "alive")
	if err != nil {
		return err
	}
	if alive {
		f.AliveAt = s.relay.Clock().Now()
	}
	list, err := s.relay.ListAgents(r.Context(), caller(r), f)
	if err != nil {
		return err
	}
	out := make([]Card, 0, len(list))
	for _, a := range list {
		out = append(out, CardOf(s.ad, a))
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// RegisterRequest is the body of POST /mamp/v1/agents: the agent's MAMP
// card, plus where the hub delivers its messages.
type RegisterRequest struct {
	Card
	// EndpointURL is the agent's MAMP messages URL: the hub POSTs MAMP
	// envelopes there. Without it the agent pulls
	// (GET /mamp/v1/agents/{id}/messages) or streams its conversations.
	EndpointURL  string `json:"endpoint_url,omitempty"`
	LeaseSeconds int    `json:"lease_seconds,omitempty"`
}

// RegisterResponse is the answer to POST /mamp/v1/agents.
type RegisterResponse struct {
	OK           bool   `json:"ok"`
	AgentID      string `json:"agent_id"`
	ID           string `json:"id"`
	LeaseSeconds int    `json:"lease_seconds"`
	Queued       int    `json:"queued"`
	Created      bool   `json:"created"`
	// Token is the agent's credential, returned once at its first
	// registration when auth is on.
	Token string `json:"token,omitempty"`
	// SigningSecret verifies the hub's webhooks (package webhooksig).
	SigningSecret string `json:"signing_secret,omitempty"`
	Card          Card   `json:"card"`
}

// register is POST /mamp/v1/agents. Who may bind the id is the relay's
// decision (core.Relay.RegisterAs): a free local id anyone, a registered
// one its owner, a remote one (agent://other.example/x, x@other.example)
// only the operator.
func (s *Server) register(w http.ResponseWriter, r *http.Request) error {
	var req RegisterRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Protocol != "" && req.Protocol != Protocol {
		return bad(CodeUnsupportedProtocol, "protocol %q is not supported; this hub speaks %q", trunc(req.Protocol), Protocol)
	}
	if req.AgentID == "" {
		return bad(httperr.CodeMissingField, "agent_id is required (agent://domain/id or a local id)")
	}
	id := req.AgentID
	if strings.HasPrefix(req.AgentID, "agent://") {
		u, err := ParseURI(req.AgentID)
		if err != nil {
			return bad(CodeInvalidURI, "agent_id: %v", err)
		}
		if id, _, err = s.ad.LocalID(u); err != nil {
			return bad(CodeInvalidURI, "agent_id: %v", err)
		}
	} else if !core.ValidAgentID(id) {
		return bad(httperr.CodeInvalidField, "agent_id must be an agent:// URI or 1-128 letters, digits and ._:@- starting with a letter or digit")
	}
	if req.LeaseSeconds < 0 {
		return bad(httperr.CodeInvalidField, "lease_seconds must be positive")
	}
	card, err := req.Card.CoreCard()
	if err != nil {
		return err
	}
	ep := core.Endpoint{Kind: core.EndpointPull}
	if req.EndpointURL != "" {
		if err := ssrf.CheckForm("endpoint_url", req.EndpointURL); err != nil {
			return bad("invalid_endpoint_url", "%s", err.Error())
		}
		if s.opt.CheckURL != nil {
			if err := s.opt.CheckURL(req.EndpointURL); err != nil {
				return bad("endpoint_url_forbidden", "endpoint_url: %s", err.Error())
			}
		}
		ep = core.Endpoint{Kind: core.EndpointMAMP, URL: req.EndpointURL}
	}
	a := &core.Agent{ID: id, Card: card, Capabilities: append([]string{}, card.Tools...), Endpoint: ep, Protocol: "mamp"}
	queued, created, err := s.relay.RegisterAs(r.Context(), caller(r), a, time.Duration(req.LeaseSeconds)*time.Second)
	if err != nil {
		return err
	}
	var token string
	if created && s.opt.Issuer != nil {
		// Issued only once the registration stands, and only to its creator.
		if token, err = s.opt.Issuer.Issue(r.Context(), id, a.Generation); err != nil {
			// Without its credential nobody could register the id again:
			// undo the registration (best effort; the answer is the error).
			_ = s.relay.DeregisterAs(context.WithoutCancel(r.Context()), registerActor, id)
			return err
		}
	}
	out := RegisterResponse{OK: true, AgentID: s.ad.URIOf(id), ID: id, LeaseSeconds: a.LeaseSeconds,
		Queued: queued, Created: created, Token: token, Card: CardOf(s.ad, a)}
	if s.opt.Secrets != nil {
		out.SigningSecret = s.opt.Secrets.SecretFor(id, a.Generation)
	}
	httperr.JSON(w, http.StatusOK, out)
	return nil
}

// deregister is DELETE /mamp/v1/agents/{id}: it ends the agent's identity
// (core.Relay.DeregisterAs: its credentials are revoked, its queued mail
// ends as dead letters).
func (s *Server) deregister(w http.ResponseWriter, r *http.Request) error {
	id, err := s.agentIDParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.relay.DeregisterAs(r.Context(), caller(r), id); err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"ok": true, "agent_id": s.ad.URIOf(id)})
	return nil
}

// inbox hands a pull agent its queued messages as MAMP envelopes
// (delivered when handed out, unless ?ack=manual: then acknowledge with
// POST /atp/ack).
func (s *Server) inbox(w http.ResponseWriter, r *http.Request) error {
	id, err := s.agentIDParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 100, 1000)
	if err != nil {
		return err
	}
	autoAck, err := core.ParseAckMode(r.URL.Query().Get("ack"))
	if err != nil {
		return err
	}
	ms, err := s.relay.PullAs(r.Context(), caller(r), id, limit, 0, autoAck)
	if err != nil {
		return err
	}
	out, err := s.envelopes(ms)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agent_id": s.ad.URIOf(id), "messages": out})
	return nil
}

// envelopes renders core messages as MAMP envelopes.
func (s *Server) envelopes(ms []*core.Message) ([]*Envelope, error) {
	out := make([]*Envelope, 0, len(ms))
	for _, m := range ms {
		env, err := ToEnvelope(s.ad, m)
		if err != nil {
			return nil, fmt.Errorf("message %s: %w", m.ID, err)
		}
		out = append(out, env)
	}
	return out, nil
}
