package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Options tune the registrar.
type Options struct {
	// Client fetches cards [10s timeout].
	Client *http.Client
	// MaxCardBytes bounds a card's size [256 KiB].
	MaxCardBytes int64
	// Refresh is how often registered cards are fetched again [5m].
	Refresh time.Duration
	// Lease is the registration lease of remote agents, renewed at each
	// successful refresh [the relay's maximum lease].
	Lease  time.Duration
	Logger *slog.Logger
}

// Registrar registers remote A2A agents by card URL.
type Registrar struct {
	relay *core.Relay
	opt   Options
	// self is the registrar's own principal, for refreshing the agents
	// it registered.
	self core.Principal
}

// NewRegistrar returns a registrar over relay.
func NewRegistrar(relay *core.Relay, opt Options) *Registrar {
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opt.MaxCardBytes <= 0 {
		opt.MaxCardBytes = 256 << 10
	}
	if opt.Refresh <= 0 {
		opt.Refresh = 5 * time.Minute
	}
	if opt.Lease <= 0 {
		opt.Lease = relay.Config().MaxLease
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Registrar{relay: relay, opt: opt, self: core.InternalPrincipal("a2a-remote")}
}

// Name is the registrar's name (the hub's adapter contract).
func (g *Registrar) Name() string { return "a2a remote agents" }

// Mount adds POST /a2a/agents (the hub's adapter contract).
func (g *Registrar) Mount(mux *http.ServeMux) {
	mux.HandleFunc("POST /a2a/agents", httperr.Handle(g.handle))
}

// RegisterRequest is the body of POST /a2a/agents.
type RegisterRequest struct {
	CardURL string `json:"card_url"`
	// AgentID is the local id [derived from the card's name].
	AgentID string `json:"agent_id,omitempty"`
}

// RegisterResponse is its answer.
type RegisterResponse struct {
	OK              bool     `json:"ok"`
	AgentID         string   `json:"agent_id"`
	URI             string   `json:"uri"`
	Name            string   `json:"name"`
	CardURL         string   `json:"card_url"`
	RPCURL          string   `json:"rpc_url"`
	ProtocolVersion string   `json:"protocol_version"`
	Skills          []string `json:"skills"`
	Created         bool     `json:"created"`
}

func (g *Registrar) handle(w http.ResponseWriter, r *http.Request) error {
	var req RegisterRequest
	if err := httperr.ReadJSON(w, r, 64<<10, &req); err != nil {
		return err
	}
	if req.CardURL == "" {
		return httperr.New(http.StatusBadRequest, httperr.CodeMissingField, "card_url is required")
	}
	if req.AgentID != "" && !core.ValidAgentID(req.AgentID) {
		return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "agent_id must be 1-128 characters of letters, digits and ._:@-, starting with a letter or digit")
	}
	p := core.PrincipalFrom(r.Context())
	// Registering a remote agent makes the hub fetch a URL and send to
	// it: an operator's action, as the table says.
	if err := core.Authorize(p, core.OpOperator, core.RelNone); err != nil {
		return err
	}
	a, info, created, err := g.Register(r.Context(), p, req.CardURL, req.AgentID)
	switch {
	case errors.Is(err, ErrCardUnreachable):
		return httperr.New(http.StatusBadGateway, "card_unreachable", "%s", err.Error())
	case errors.Is(err, ErrInvalidCard):
		return httperr.New(http.StatusUnprocessableEntity, "invalid_card", "%s", err.Error())
	case err != nil:
		return err
	}
	httperr.JSON(w, http.StatusOK, RegisterResponse{OK: true, AgentID: a.ID, URI: g.relay.URI(a.ID), Name: info.Name,
		CardURL: info.CardURL, RPCURL: info.RPCURL, ProtocolVersion: string(info.Version), Skills: nonNil(info.Skills), Created: created})
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Register fetches the card at cardURL and registers (or refreshes) the
// remote agent under agentID (derived from the card's name when empty),
// for p: the relay decides whether p may bind the id.
func (g *Registrar) Register(ctx context.Context, p core.Principal, cardURL, agentID string) (*core.Agent, *CardInfo, bool, error) {
	info, err := FetchCard(ctx, g.opt.Client, cardURL, g.opt.MaxCardBytes)
	if err != nil {
		return nil, nil, false, err
	}
	if agentID == "" {
		agentID = Slug(info.Name)
		if !core.ValidAgentID(agentID) {
			return nil, nil, false, fmt.Errorf("cannot derive an agent id from name %q; give agent_id: %w", info.Name, core.ErrInvalid)
		}
	}
	info.FetchedAt = g.relay.Clock().Now()
	a, created, err := g.register(ctx, p, agentID, info)
	return a, info, created, err
}

func (g *Registrar) register(ctx context.Context, p core.Principal, agentID string, info *CardInfo) (*core.Agent, bool, error) {
	extra, err := json.Marshal(map[string]any{extraKey: info})
	if err != nil {
		return nil, false, err
	}
	a := &core.Agent{ID: agentID, Protocol: "a2a", Capabilities: nonNil(info.Skills),
		Endpoint: core.Endpoint{Kind: core.EndpointA2A, URL: info.RPCURL},
		Card: core.Card{Name: info.Name, Description: info.Description, Version: info.CardVersion, Streaming: info.Streaming,
			Async: true, Tools: info.Skills, Extra: extra}}
	if old, err := g.relay.LookupAgent(ctx, g.self, agentID); err == nil {
		if _, ok := Info(old); !ok && old.Endpoint.Kind != core.EndpointA2A {
			return nil, false, fmt.Errorf("agent %q is already registered with a %s endpoint: %w", agentID, old.Endpoint.Kind, core.ErrConflict)
		}
		a.Card.Owner, a.Card.Device, a.Card.Access = old.Card.Owner, old.Card.Device, old.Card.Access
	}
	_, created, err := g.relay.RegisterAs(ctx, p, a, g.opt.Lease)
	return a, created, err
}

// Slug derives an agent id from a card name: lower case, runs of other
// characters as "-".
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_':
			b.WriteRune(r)
			dash = false
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

// Run refreshes the cards of registered remote agents every
// Options.Refresh until ctx ends (the hub's adapter contract). A card that
// cannot be fetched keeps the last good one (and the lease runs on).
func (g *Registrar) Run(ctx context.Context) error {
	t := time.NewTicker(g.opt.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			g.RefreshAll(ctx)
		}
	}
}

// RefreshAll fetches every remote agent's card again and re-registers it.
func (g *Registrar) RefreshAll(ctx context.Context) {
	list, err := g.relay.ListAgents(ctx, g.self, core.AgentFilter{})
	if err != nil {
		g.opt.Logger.Warn("a2aremote: list agents", "err", err)
		return
	}
	for _, a := range list {
		old, ok := Info(a)
		if !ok || a.Endpoint.Kind != core.EndpointA2A {
			continue
		}
		info, err := FetchCard(ctx, g.opt.Client, old.CardURL, g.opt.MaxCardBytes)
		if err != nil {
			g.opt.Logger.Warn("a2aremote: refresh card", "agent", a.ID, "err", err)
			continue
		}
		info.FetchedAt = g.relay.Clock().Now()
		if _, _, err := g.register(ctx, g.self, a.ID, info); err != nil {
			g.opt.Logger.Warn("a2aremote: re-register", "agent", a.ID, "err", err)
		}
	}
}
