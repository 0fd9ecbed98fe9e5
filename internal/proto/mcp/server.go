package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/core"
)

// DefaultHostAgentID is the agent a host acts as on a hub with auth off.
const DefaultHostAgentID = "mcp-host"

// Protocol is the value of Message.Protocol and Agent.Protocol for MCP.
const Protocol = "mcp"

// operatorKind names the operator's internal id (core.Relay.InternalID).
const operatorKind = "mcp-operator"

// Options configure the MCP server. Zero fields take the defaults in
// brackets.
type Options struct {
	// HostAgentID is the agent a host acts as on a hub with auth off
	// (dev mode) [mcp-host].
	HostAgentID string
	// Caller is the principal of requests that carry no credential: the
	// stdio and in-memory transports, where whoever runs the command owns
	// the hub's data (core.DevPrincipal with auth off, the operator's
	// core.AdminPrincipal with auth on) [anonymous: the core refuses what
	// it asks]. Requests over HTTP carry the principal the hub's
	// authentication found.
	Caller core.Principal
	// Agent binds the server to one agent: requests of privileged callers
	// (the operator, dev mode) act as this agent, and a stdio session
	// pushes the messages addressed to it into the host as channel
	// notifications (see channel.go). Empty: no binding.
	Agent string
	// Records keeps the MCP tasks (tasks.go): the hub's store. Nil: no
	// tasks are offered.
	Records core.RecordStore
	// AllowedSenders, when Agent is registered by this server, is its
	// card's access list (sender ids or agent:// globs); empty means any
	// authenticated sender of the hub.
	AllowedSenders []string
	// HostLease is the lease of the host agent's registration [1h].
	HostLease time.Duration
	// DefaultWait is wait_for_reply's timeout when the call gives none [30s].
	DefaultWait time.Duration
	// MaxWait bounds wait_for_reply's timeout [10m].
	MaxWait time.Duration
	// ProgressEvery is the interval of wait_for_reply's progress
	// notifications [1s].
	ProgressEvery time.Duration
	// WaitPoll bounds the gap between the fallback polls of a wait
	// (wait_for_reply, check_inbox, the tasks), which see what other hub
	// instances changed: the first comes WaitPoll/8 after the start, each
	// next one twice as far apart up to WaitPoll. Changes on this
	// instance wake a wait at once [2s].
	WaitPoll time.Duration
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
	def(&o.WaitPoll, 2*time.Second)
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

// Server is the hub's MCP server over a relay. It is the MCP adapter of
// the hub's adapter contract (Name, Mount, Run).
type Server struct {
	relay *core.Relay
	opt   Options
	srv   *sdk.Server
	// operatorID is the agent the operator acts as: an internal id, so
	// that no caller can register it first.
	operatorID string
	tasks      *taskManager // nil without Options.Records
	calls      sessionCalls // of the Streamable HTTP sessions, for their DELETE

	mu      sync.Mutex
	ensured map[string]time.Time // host agents checked recently
}

// New builds the MCP server over relay.
func New(relay *core.Relay, opt Options) *Server {
	opt.defaults()
	s := &Server{relay: relay, opt: opt, ensured: map[string]time.Time{},
		operatorID: relay.InternalID(operatorKind)}
	// Logging stays declared (logging/setLevel) for the revisions before
	// 2026-07-28, which deprecated it.
	//lint:ignore SA1019 served for the older revisions
	caps := &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}}
	instr := instructions
	if opt.Agent != "" {
		caps.Experimental = map[string]any{ChannelCapability: map[string]any{}}
		instr += "\n\n" + channelInstructions(opt.Agent)
	}
	if opt.Records != nil {
		s.tasks = newTaskManager(s, opt.Records)
		caps.AddExtension(TasksExtension, nil)
	}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "switchboard", Title: "Switchboard hub", Version: opt.Version},
		&sdk.ServerOptions{
			Instructions: instr,
			Capabilities: caps,
			// The SDK logs every notification at info: keep its warnings only.
			Logger: slog.New(minLevel{opt.Logger.Handler(), slog.LevelWarn}),
			// Subscriptions are tracked by the SDK; who may subscribe to
			// what is decided in authorizeSubscriptions, before these.
			SubscribeHandler:   func(ctx context.Context, req *sdk.SubscribeRequest) error { return nil },
			UnsubscribeHandler: func(ctx context.Context, req *sdk.UnsubscribeRequest) error { return nil },
			CompletionHandler:  s.complete,
		})
	s.srv.AddReceivingMiddleware(s.authorizeSubscriptions, s.calls.middleware)
	s.addTools()
	s.addResources()
	s.addPrompts()
	if opt.AMP != nil {
		s.addAMP()
	}
	if s.tasks != nil {
		s.tasks.install(s.srv)
	}
	return s
}

const instructions = `Switchboard is a hub where AI agents register, find each other and exchange messages durably.
Use list_agents (filter by capability) to find an agent, send_message to give it work, and wait_for_reply
with the returned message_id to get its answer. get_receipt tells whether a message was delivered;
check_inbox returns the messages addressed to you.`

// SDK returns the underlying SDK server, for transports not covered here.
func (s *Server) SDK() *sdk.Server { return s.srv }

// HostAgentID returns the agent id a host acts as on a hub with auth off.
func (s *Server) HostAgentID() string { return s.opt.HostAgentID }

// OperatorID returns the agent id the operator acts as.
func (s *Server) OperatorID() string { return s.operatorID }

// Name is the adapter's name (the hub's adapter contract).
func (s *Server) Name() string { return "mcp" }

// Run does the adapter's background work until ctx ends: resource-updated
// notifications driven by the relay's events, and the MCP tasks (those
// left working when the hub last stopped are done again; the changes
// other hub instances make to them are heard of). When it
// returns the tasks running here have stopped; they stay working in the
// store for the next start.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if s.tasks != nil {
		stop := s.tasks.listenRemote()
		defer stop()
		wg.Add(2)
		go func() { defer wg.Done(); s.tasks.resume(ctx) }()
		go func() { defer wg.Done(); s.tasks.followRemote(ctx) }()
	}
	s.Watch(ctx)
	wg.Wait()
	if s.tasks != nil {
		s.tasks.shutdown()
	}
	return nil
}

// caller is who a request acts for: the principal the core judges each
// operation by, and the agent the host acts as (the sender of its
// messages, the receiver of their answers).
type caller struct {
	p       core.Principal
	agentID string
}

// Token info key set by the HTTP handler (see http.go): the hub's
// principal, and the agent a privileged caller asked to act as.
const (
	tokenPrincipalKey = "switchboard_principal"
	tokenAgentKey     = "switchboard_agent"
)

// callerOf resolves who a request acts for. Requests over HTTP carry the
// principal of the hub's authentication in their token info; requests
// without (stdio, in memory) act for Options.Caller.
func (s *Server) callerOf(extra *sdk.RequestExtra) caller {
	p, agent := s.opt.Caller, s.opt.Agent
	if extra != nil && extra.TokenInfo != nil {
		p, _ = extra.TokenInfo.Extra[tokenPrincipalKey].(core.Principal)
		agent, _ = extra.TokenInfo.Extra[tokenAgentKey].(string)
	}
	return caller{p: p, agentID: s.agentFor(p, agent)}
}

// agentFor is the agent principal p acts as: its own; for the operator
// and dev mode the agent asked for (the server's binding, or the
// Switchboard-Agent header), else the operator's id or, with auth off,
// HostAgentID. A principal with no agent of its own and no privilege (an
// anonymous caller, which the HTTP handler does not let through) acts as
// nobody: the core refuses what it asks.
func (s *Server) agentFor(p core.Principal, asked string) string {
	switch {
	case p.AgentID != "":
		return p.AgentID
	case asked != "" && p.Privileged():
		return asked
	case p.Dev:
		return s.opt.HostAgentID
	case p.Admin:
		return s.operatorID
	}
	return ""
}

// hubPrincipal acts for the MCP server itself: it binds the operator's
// internal id.
var hubPrincipal = core.InternalPrincipal("mcp")

// ensureHost makes sure the agent c acts as exists, so that answers to it
// are accepted and queued for it. A missing one is registered as a pull
// agent of protocol mcp (the operator's internal id by the hub itself,
// any other by the caller, as the core allows); one registered so has its
// lease renewed when half of it has passed; any other agent (an ATP
// agent using its own token, say) is left as it is.
func (s *Server) ensureHost(ctx context.Context, c caller) error {
	if c.agentID == "" {
		return fmt.Errorf("a host without a credential acts as no agent: %w", core.ErrUnauthenticated)
	}
	now := s.relay.Clock().Now()
	s.mu.Lock()
	last, ok := s.ensured[c.agentID]
	s.mu.Unlock()
	if ok && now.Sub(last) < 30*time.Second {
		return nil
	}
	p := c.p
	if c.agentID == s.operatorID {
		p = hubPrincipal
	}
	a, err := s.relay.LookupAgent(ctx, hubPrincipal, c.agentID)
	switch {
	case errIs(err, core.ErrNotFound):
		host := &core.Agent{ID: c.agentID, Protocol: Protocol, Capabilities: []string{},
			Endpoint: core.Endpoint{Kind: core.EndpointPull}, Card: s.hostCard(c)}
		if _, _, err := s.relay.RegisterAs(ctx, p, host, s.opt.HostLease); err != nil {
			return fmt.Errorf("register host agent %q: %w", c.agentID, err)
		}
	case err != nil:
		return err
	case a.Endpoint.Kind == core.EndpointPull && a.Protocol == Protocol && a.ExpiresAt.Sub(now) < s.opt.HostLease/2:
		if _, _, err := s.relay.HeartbeatAs(ctx, p, c.agentID, s.opt.HostLease); err != nil {
			return fmt.Errorf("renew host agent %q: %w", c.agentID, err)
		}
	}
	s.mu.Lock()
	s.ensured[c.agentID] = now
	s.mu.Unlock()
	return nil
}

// hostCard is the card of a host agent this server registers for c: the
// bound agent takes its access rules from AllowedSenders, and with auth
// on it takes messages from authenticated senders only.
func (s *Server) hostCard(c caller) core.Card {
	card := core.Card{Name: "MCP host", Description: "An MCP host (an assistant or IDE) using the hub through its MCP server."}
	if c.agentID == s.opt.Agent && c.agentID != "" {
		card.Name = c.agentID
		card.Description = "A coding-agent session reached through Switchboard's MCP server: messages to it are pushed into the session."
		card.Access = &core.Access{RequireAuth: !c.p.Dev, Public: len(s.opt.AllowedSenders) == 0}
		for _, a := range s.opt.AllowedSenders {
			if !hasScheme(a) {
				a = s.relay.URI(a)
			}
			card.Access.AllowedAgents = append(card.Access.AllowedAgents, a)
		}
	}
	return card
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
