package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/core"
)

// DefaultHostAgentID is the agent an unauthenticated MCP host acts as.
const DefaultHostAgentID = "mcp-host"

// Protocol is the value of Message.Protocol and Agent.Protocol for MCP.
const Protocol = "mcp"

// Options configure the MCP server. Zero fields take the defaults in
// brackets.
type Options struct {
	// HostAgentID is the agent an MCP host acts as when it is not
	// authenticated as another agent [mcp-host].
	HostAgentID string
	// HostLease is the lease of the host agent's registration [1h].
	HostLease time.Duration
	// DefaultWait is wait_for_reply's timeout when the call gives none [30s].
	DefaultWait time.Duration
	// MaxWait bounds wait_for_reply's timeout [10m].
	MaxWait time.Duration
	// ProgressEvery is the interval of wait_for_reply's progress
	// notifications [1s].
	ProgressEvery time.Duration
	// SessionTimeout closes idle Streamable HTTP sessions [1h].
	SessionTimeout time.Duration
	// MaxSessions bounds the Streamable HTTP sessions held at once, for
	// all callers together; one more is refused with 503 (see
	// sessionBound). 0 means DefaultMaxSessions, negative no bound.
	MaxSessions int
	// MaxSessionsPerCaller bounds one caller's sessions; one more ends
	// the caller's oldest. 0 means DefaultMaxSessionsPerCaller, negative
	// no bound.
	MaxSessionsPerCaller int
	// MaxBody bounds a Streamable HTTP request body in bytes, like every
	// other ingress route of the hub; larger requests are answered 413
	// [1 MiB].
	MaxBody int64
	// Version is reported as the server's version.
	Version string
	// Logger logs server activity [slog.Default()].
	Logger *slog.Logger
	// AMP, when set, adds the amp_tick tool and the AMP spec resources.
	AMP AMPEngine
	// AMPStateDir, when AMP is nil, makes an AMP engine keeping its
	// session state in this directory (amp.FileStore, safe to share with
	// other processes such as the hook command).
	AMPStateDir string
}

// AMPEngine is what the MCP server needs of the AMP engine (amp.Engine
// implements it).
type AMPEngine interface {
	Step(ctx context.Context, in amp.TickInput) (amp.Result, error)
}

func (o *Options) defaults() {
	if o.HostAgentID == "" {
		o.HostAgentID = DefaultHostAgentID
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HostLease, time.Hour)
	def(&o.DefaultWait, 30*time.Second)
	def(&o.MaxWait, 10*time.Minute)
	def(&o.ProgressEvery, time.Second)
	def(&o.SessionTimeout, time.Hour)
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerCaller == 0 {
		o.MaxSessionsPerCaller = DefaultMaxSessionsPerCaller
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if e, ok := o.AMP.(*amp.Engine); ok && e == nil {
		o.AMP = nil // a nil *amp.Engine is no engine
	}
	if o.AMP == nil && o.AMPStateDir != "" {
		o.AMP = amp.New(amp.NewFileStore(o.AMPStateDir))
	}
}

// Server is the hub's MCP server over a relay.
type Server struct {
	relay *core.Relay
	opt   Options
	srv   *sdk.Server

	mu      sync.Mutex
	ensured map[string]time.Time // host agents checked recently
}

// New builds the MCP server over relay.
func New(relay *core.Relay, opt Options) *Server {
	opt.defaults()
	s := &Server{relay: relay, opt: opt, ensured: map[string]time.Time{}}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "switchboard", Title: "Switchboard hub", Version: opt.Version},
		&sdk.ServerOptions{
			Instructions: instructions,
			// The SDK logs every notification at info: keep its warnings only.
			Logger: slog.New(minLevel{opt.Logger.Handler(), slog.LevelWarn}),
			// Subscriptions are tracked by the SDK; these handlers only
			// check that the URI names one of the hub's resources.
			SubscribeHandler:   func(ctx context.Context, req *sdk.SubscribeRequest) error { return s.checkSubscribable(req.Params.URI) },
			UnsubscribeHandler: func(ctx context.Context, req *sdk.UnsubscribeRequest) error { return nil },
			CompletionHandler:  s.complete,
		})
	s.addTools()
	s.addResources()
	s.addPrompts()
	if opt.AMP != nil {
		s.addAMP()
	}
	return s
}

const instructions = `Switchboard is a hub where AI agents register, find each other and exchange messages durably.
Use list_agents (filter by capability) to find an agent, send_message to give it work, and wait_for_reply
with the returned message_id to get its answer. get_receipt tells whether a message was delivered.`

// SDK returns the underlying SDK server, for transports not covered here.
func (s *Server) SDK() *sdk.Server { return s.srv }

// HostAgentID returns the agent id an unauthenticated host acts as.
func (s *Server) HostAgentID() string { return s.opt.HostAgentID }

// caller is who a request acts for.
type caller struct {
	agentID string
	// admin may read every agent's receipts and conversations: the
	// operator, dev mode and local (stdio, in-memory) transports.
	admin bool
	// authenticated is what core.CheckAccess is told.
	authenticated bool
}

// Token info keys set by the HTTP handler (see http.go).
const (
	tokenAgentKey = "switchboard_agent_id"
	tokenAdminKey = "switchboard_admin"
)

// callerOf resolves the identity of a request. Requests that carry no
// token info come from a local transport or a dev-mode hub: they act as
// HostAgentID with full rights, like every dev-mode caller of the hub.
func (s *Server) callerOf(extra *sdk.RequestExtra) caller {
	var ti *sdkauth.TokenInfo
	if extra != nil {
		ti = extra.TokenInfo
	}
	if ti == nil {
		return caller{agentID: s.opt.HostAgentID, admin: true}
	}
	if admin, _ := ti.Extra[tokenAdminKey].(bool); admin {
		return caller{agentID: s.opt.HostAgentID, admin: true, authenticated: true}
	}
	id, _ := ti.Extra[tokenAgentKey].(string)
	return caller{agentID: id, authenticated: true}
}

// ensureHost makes sure the host agent exists so that replies to it are
// accepted and queued. A new host agent is registered as a pull agent; an
// existing pull agent registered over MCP has its lease renewed when half
// of it has passed; any other existing agent is left alone.
func (s *Server) ensureHost(ctx context.Context, c caller) error {
	now := s.relay.Clock().Now()
	s.mu.Lock()
	last, ok := s.ensured[c.agentID]
	s.mu.Unlock()
	if ok && now.Sub(last) < 30*time.Second {
		return nil
	}
	a, err := s.relay.Store().GetAgent(ctx, c.agentID)
	switch {
	case errors.Is(err, core.ErrNotFound):
		host := &core.Agent{ID: c.agentID, Protocol: Protocol, Capabilities: []string{},
			Endpoint: core.Endpoint{Kind: core.EndpointPull},
			Card:     core.Card{Name: "MCP host", Description: "An MCP host (an assistant or IDE) using the hub through its MCP server."}}
		if _, _, err := s.relay.Register(ctx, host, s.opt.HostLease); err != nil {
			return fmt.Errorf("register host agent %q: %w", c.agentID, err)
		}
	case err != nil:
		return err
	case a.Endpoint.Kind == core.EndpointPull && a.Protocol == Protocol && a.ExpiresAt.Sub(now) < s.opt.HostLease/2:
		if _, _, err := s.relay.Heartbeat(ctx, c.agentID, s.opt.HostLease); err != nil {
			return fmt.Errorf("renew host agent %q: %w", c.agentID, err)
		}
	}
	s.mu.Lock()
	s.ensured[c.agentID] = now
	s.mu.Unlock()
	return nil
}

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
