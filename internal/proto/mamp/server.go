package mamp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Error codes of the MAMP routes, beside the shared ones in httperr.
// docs/errors.md lists them all.
const (
	CodeUnsupportedProtocol = "unsupported_protocol"
	CodeInvalidURI          = "invalid_uri"
	// CodeConversationNotFound answers every refused conversation
	// operation: an unknown conversation and one the caller is not a
	// member of look alike (the spec's error, "Conversation X not found").
	CodeConversationNotFound = httperr.CodeConversationNotFound
	CodeInvalidContent       = "invalid_content"
	CodeUnknownPartType      = "unknown_part_type"
	CodeInvalidBase64        = "invalid_base64"
	CodeMediaTypeMismatch    = "media_type_mismatch"
)

// HubAgentID is the id in the hub's own card URI (agent://<host>/_hub); it
// can never name a registered agent.
const HubAgentID = "_hub"

// CredentialIssuer issues an agent's credential at its first
// registration, bound to the identity generation the registration started
// (core.Agent.Generation).
type CredentialIssuer interface {
	Issue(ctx context.Context, agentID, generation string) (token string, err error)
}

// Options tune the MAMP routes.
type Options struct {
	// MaxBody bounds a request body in bytes [1 MiB].
	MaxBody int64
	// Records keeps the adapter's own state: open callbacks and the
	// remote domains added at run time. Without it neither is available
	// (callback_url and PUT /mamp/v1/remotes answer 503).
	Records core.RecordStore
	// Remotes maps a remote domain to the base URL of its MAMP service;
	// messages to agent://<domain>/<id> are POSTed to
	// <base>/mamp/v1/messages. Domains can also be added at run time with
	// PUT /mamp/v1/remotes/{domain}.
	Remotes map[string]string
	// Issuer, when set, issues a credential at an agent's first
	// registration (auth on).
	Issuer CredentialIssuer
	// CallbackTTL is how long after a message its callback_url is honoured
	// [24h].
	CallbackTTL time.Duration
	// CallbackSweep is how often pending callbacks are checked for answers
	// the live event stream missed [5s].
	CallbackSweep time.Duration
	// StreamPoll is how often a conversation stream checks the store
	// besides live events [1s].
	StreamPoll time.Duration
	// MaxStreams bounds the conversation streams one caller holds open on
	// this instance: at that number, opening one more ends the oldest
	// [the relay's MaxStreams; below 0 no bound].
	MaxStreams int
	// Logger for background work [slog.Default()].
	Logger *slog.Logger
	// CheckURL, when set, refuses endpoint URLs the hub may not call (the
	// SSRF policy), at registration.
	CheckURL func(raw string) error
	// Secrets, when set, gives each agent identity (id and generation,
	// core.Agent.Generation) the secret its webhooks are signed with; it
	// is returned at registration.
	Secrets interface {
		SecretFor(agentID, generation string) string
	}
}

// The hub's own actors the adapter acts as (core.InternalPrincipal): the
// remote-agent registration, the callback forwarder, and the undoing of a
// registration whose credential could not be issued.
var (
	remotesActor   = core.InternalPrincipal("mamp-remotes")
	callbacksActor = core.InternalPrincipal("mamp-callbacks")
	registerActor  = core.InternalPrincipal("mamp")
)

// Server serves the /mamp/v1/* routes over a relay. It is a hub adapter:
// Name, Mount and Run.
type Server struct {
	relay   *core.Relay
	opt     Options
	ad      Addressing
	log     *slog.Logger
	streams *streamBound
}

// New returns the MAMP adapter. Its background work (forwarding answers to
// callback URLs) runs in Run.
func New(relay *core.Relay, opt Options) *Server {
	if opt.MaxBody <= 0 {
		opt.MaxBody = 1 << 20
	}
	if opt.CallbackTTL <= 0 {
		opt.CallbackTTL = 24 * time.Hour
	}
	if opt.CallbackSweep <= 0 {
		opt.CallbackSweep = 5 * time.Second
	}
	if opt.StreamPoll <= 0 {
		opt.StreamPoll = time.Second
	}
	if opt.MaxStreams == 0 {
		opt.MaxStreams = relay.Config().MaxStreams
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Server{relay: relay, opt: opt, ad: Addressing{Host: relay.Config().Host}, log: opt.Logger,
		streams: &streamBound{max: opt.MaxStreams, open: map[string][]*streamSlot{}}}
}

// Name is the adapter's name (the hub's adapter contract).
func (s *Server) Name() string { return "mamp" }

// Addressing returns the adapter's URI mapping.
func (s *Server) Addressing() Addressing { return s.ad }

// Mount adds the routes to mux. Each handler returns its error, answered
// in one place (httperr.Handle, which maps the core's error kinds to HTTP).
func (s *Server) Mount(mux *http.ServeMux) {
	h := func(pattern string, fn httperr.HandlerFunc) { mux.HandleFunc(pattern, httperr.Handle(fn)) }
	h("POST /mamp/v1/messages", s.messages)
	h("GET /mamp/v1/card", s.hubCard)
	h("GET /mamp/v1/agents", s.listAgents)
	h("POST /mamp/v1/agents", s.register)
	h("GET /mamp/v1/agents/{id}/card", s.agentCard)
	h("DELETE /mamp/v1/agents/{id}", s.deregister)
	h("GET /mamp/v1/agents/{id}/messages", s.inbox)
	h("GET /mamp/v1/conversations", s.listConversations)
	h("GET /mamp/v1/conversations/{id}", s.conversation)
	h("GET /mamp/v1/conversations/{id}/events", s.stream)
	h("GET /mamp/v1/remotes", s.listRemotes)
	h("PUT /mamp/v1/remotes/{domain}", s.putRemote)
	h("DELETE /mamp/v1/remotes/{domain}", s.deleteRemote)
}

// Run forwards answers to callback URLs until ctx ends (the hub's adapter
// contract): from the relay's events as they happen, and by a sweep every
// CallbackSweep for any the events missed.
func (s *Server) Run(ctx context.Context) error {
	if s.opt.Records == nil {
		<-ctx.Done()
		return nil
	}
	events, cancel := s.relay.Events().Subscribe(1024)
	defer cancel()
	s.runCallbacks(ctx, events)
	return nil
}

// caller is the principal of r (authenticated by the hub's middleware).
func caller(r *http.Request) core.Principal { return core.PrincipalFrom(r.Context()) }

// decode reads r's JSON body into v (httperr.ReadJSON).
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	return httperr.ReadJSON(w, r, s.opt.MaxBody, v)
}

func bad(code, format string, args ...any) error {
	return httperr.New(http.StatusBadRequest, code, format, args...)
}

// errNoRecords answers what needs Options.Records when there is none.
var errNoRecords = core.NewError(core.KindUnavailable, "mamp: no record store configured")

// noConversation gives a refused conversation operation the spec's answer,
// 404 conversation_not_found "Conversation <id> not found", whether the
// conversation is unknown or the caller is not a member of it (the core
// answers both with core.ErrNoConversation). Other errors pass unchanged.
func noConversation(id string, err error) error {
	if errors.Is(err, core.ErrNoConversation) {
		return httperr.New(http.StatusNotFound, CodeConversationNotFound, "Conversation %s not found", trunc(id))
	}
	return err
}

// agentIDParam reads an agent id path or query value: a local id or an
// agent URI.
func (s *Server) agentIDParam(v string) (string, error) {
	if !strings.HasPrefix(v, "agent://") {
		return v, nil
	}
	u, err := ParseURI(v)
	if err != nil {
		return "", bad(CodeInvalidURI, "%v", err)
	}
	id, _, err := s.ad.LocalID(u)
	if err != nil {
		return "", bad(CodeInvalidURI, "%v", err)
	}
	return id, nil
}

// intParam reads query parameter name: def when absent, else 1..max.
func intParam(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > max {
		return 0, bad(httperr.CodeInvalidField, "%s must be 1..%d", name, max)
	}
	return n, nil
}

// seqParam reads a non-negative sequence number from the first of vs that
// is set (0 when none is); name names them in the error.
func seqParam(name string, vs ...string) (int64, error) {
	for _, v := range vs {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, bad(httperr.CodeInvalidField, "%s must be a non-negative sequence number", name)
		}
		return n, nil
	}
	return 0, nil
}

// streamBound bounds the conversation streams each caller holds open.
type streamBound struct {
	max  int
	mu   sync.Mutex
	open map[string][]*streamSlot // caller key → its streams, oldest first
}

// streamSlot is one open stream; ended is closed when a newer stream of
// the same caller takes its place.
type streamSlot struct {
	ended chan struct{}
}

// take opens a stream for the caller named key: at the bound, the
// caller's oldest stream is ended. Call release when the stream ends.
func (b *streamBound) take(key string) *streamSlot {
	sl := &streamSlot{ended: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	ss := b.open[key]
	if b.max > 0 && len(ss) >= b.max {
		close(ss[0].ended)
		ss = ss[1:]
	}
	b.open[key] = append(ss, sl)
	return sl
}

// release forgets sl.
func (b *streamBound) release(key string, sl *streamSlot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ss := b.open[key]
	for i, x := range ss {
		if x == sl {
			ss = append(ss[:i:i], ss[i+1:]...)
			break
		}
	}
	if len(ss) == 0 {
		delete(b.open, key)
	} else {
		b.open[key] = ss
	}
}
