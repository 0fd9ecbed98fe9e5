package mamp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// Error codes of the MAMP routes, beside the shared ones in httperr.
// docs/errors.md lists them all.
const (
	CodeUnsupportedProtocol  = "unsupported_protocol"
	CodeInvalidURI           = "invalid_uri"
	CodeConversationNotFound = "conversation_not_found"
	CodeInvalidContent       = "invalid_content"
	CodeUnknownPartType      = "unknown_part_type"
	CodeInvalidBase64        = "invalid_base64"
	CodeMediaTypeMismatch    = "media_type_mismatch"
	CodeNotParticipant       = "not_a_participant"
)

// HubAgentID is the id in the hub's own card URI (agent://<host>/_hub); it
// can never name a registered agent.
const HubAgentID = "_hub"

// CredentialIssuer issues an agent's credential at its first registration.
type CredentialIssuer interface {
	Issue(ctx context.Context, agentID string) (token string, err error)
}

// Options tune the MAMP routes.
type Options struct {
	// MaxBody bounds a request body in bytes [1 MiB].
	MaxBody int64
	// Remotes maps a remote domain to the base URL of its MAMP service;
	// messages to agent://<domain>/<id> are POSTed to
	// <base>/mamp/v1/messages. Domains can also be added at run time with
	// PUT /mamp/v1/remotes/{domain}.
	Remotes map[string]string
	// Issuer, when set, issues a credential at an agent's first
	// registration (auth on).
	Issuer CredentialIssuer
	// Context, when set, bounds the background work that honours
	// callback_url; without it callbacks are not forwarded.
	Context context.Context
	// CallbackTTL is how long after a message its callback_url is honoured
	// [24h].
	CallbackTTL time.Duration
	// CallbackSweep is how often pending callbacks are checked for answers
	// the live event stream missed [5s].
	CallbackSweep time.Duration
	// StreamPoll is how often a conversation stream checks the store
	// besides live events [1s].
	StreamPoll time.Duration
	// Logger for background work [slog.Default()].
	Logger *slog.Logger
	// CheckURL, when set, refuses endpoint URLs the hub may not call (the
	// SSRF policy), at registration.
	CheckURL func(raw string) error
	// Secrets, when set, gives each agent the secret its webhooks are
	// signed with; it is returned at registration.
	Secrets interface{ SecretFor(agentID string) string }
}

// Server serves the /mamp/v1/* routes over a relay.
type Server struct {
	relay *core.Relay
	opt   Options
	ad    Addressing
	log   *slog.Logger
	// streams bounds the conversation streams per caller (streams.go).
	streams streamBound
}

// New returns the MAMP adapter. When opt.Context is set it starts the
// background loop that forwards answers to callback URLs until the context
// ends.
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
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	s := &Server{relay: relay, opt: opt, ad: Addressing{Host: relay.Config().Host}, log: opt.Logger}
	if opt.Context != nil {
		ch, cancel := relay.Events().Subscribe(1024)
		go func() { defer cancel(); s.runCallbacks(opt.Context, ch) }()
	}
	return s
}

// Addressing returns the adapter's URI mapping.
func (s *Server) Addressing() Addressing { return s.ad }

// Mount adds the routes to mux.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.HandleFunc("POST /mamp/v1/messages", s.messages)
	mux.HandleFunc("GET /mamp/v1/card", s.hubCard)
	mux.HandleFunc("GET /mamp/v1/agents", s.listAgents)
	mux.HandleFunc("POST /mamp/v1/agents", s.register)
	mux.HandleFunc("GET /mamp/v1/agents/{id}/card", s.agentCard)
	mux.HandleFunc("DELETE /mamp/v1/agents/{id}", s.deregister)
	mux.HandleFunc("GET /mamp/v1/agents/{id}/messages", s.inbox)
	mux.HandleFunc("GET /mamp/v1/conversations", s.listConversations)
	mux.HandleFunc("GET /mamp/v1/conversations/{id}", s.conversation)
	mux.HandleFunc("GET /mamp/v1/conversations/{id}/events", s.stream)
	mux.HandleFunc("GET /mamp/v1/remotes", s.listRemotes)
	mux.HandleFunc("PUT /mamp/v1/remotes/{domain}", s.putRemote)
	mux.HandleFunc("DELETE /mamp/v1/remotes/{domain}", s.deleteRemote)
}

// apiError is an HTTP error answer decided by the adapter.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func fail(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func writeErr(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		httperr.Write(w, ae.status, ae.code, ae.msg)
		return
	}
	httperr.From(w, err)
}

// contentError maps a content parse error to its answer.
func contentError(err error) *apiError {
	switch {
	case errors.Is(err, ErrPartType):
		return fail(http.StatusBadRequest, CodeUnknownPartType, "%v", err)
	case errors.Is(err, ErrBase64):
		return fail(http.StatusBadRequest, CodeInvalidBase64, "%v", err)
	case errors.Is(err, ErrMediaType):
		return fail(http.StatusBadRequest, CodeMediaTypeMismatch, "%v", err)
	}
	return fail(http.StatusBadRequest, CodeInvalidContent, "%v", err)
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var env Envelope
	if !httperr.DecodeJSON(w, r, s.opt.MaxBody, &env) {
		return
	}
	ack, err := s.Receive(r.Context(), &env, r.Header.Get("traceparent"))
	if err != nil {
		writeErr(w, err)
		return
	}
	httperr.JSON(w, http.StatusOK, ack)
}

// parsed is a validated envelope.
type parsed struct {
	env        *Envelope
	from, to   URI
	fromID     string
	toID       string
	toRemote   bool
	fromRemote bool
	parts      []core.Part
	sentAt     time.Time
	traceID    string
	msgType    string
	meta       map[string]any
	ttl        time.Duration
}

// parse validates everything an envelope says on its own, before any
// lookup.
func (s *Server) parse(env *Envelope) (*parsed, error) {
	bad := func(code, format string, args ...any) (*parsed, error) {
		return nil, fail(http.StatusBadRequest, code, format, args...)
	}
	if env.Protocol != Protocol {
		if env.Protocol == "" {
			return bad(httperr.CodeMissingField, "protocol is required (%q)", Protocol)
		}
		return bad(CodeUnsupportedProtocol, "protocol %q is not supported; this hub speaks %q", trunc(env.Protocol), Protocol)
	}
	if env.MessageID == "" {
		return bad(httperr.CodeMissingField, "message_id is required")
	}
	if err := checkID("message_id", env.MessageID); err != nil {
		return nil, err
	}
	if env.ConversationID != "" {
		if err := checkID("conversation_id", env.ConversationID); err != nil {
			return nil, err
		}
	}
	if env.CorrelationID != "" {
		if err := checkID("correlation_id", env.CorrelationID); err != nil {
			return nil, err
		}
	}
	p := &parsed{env: env, msgType: "message"}
	var err error
	for _, f := range []struct {
		name string
		raw  string
		u    *URI
	}{{"from", env.From, &p.from}, {"to", env.To, &p.to}} {
		if f.raw == "" {
			return bad(httperr.CodeMissingField, "%s is required (agent://domain/id)", f.name)
		}
		if *f.u, err = ParseURI(f.raw); err != nil {
			return bad(CodeInvalidURI, "%s: %v", f.name, err)
		}
	}
	if p.fromID, p.fromRemote, err = s.ad.LocalID(p.from); err != nil {
		return bad(CodeInvalidURI, "from: %v", err)
	}
	if p.toID, p.toRemote, err = s.ad.LocalID(p.to); err != nil {
		return bad(CodeInvalidURI, "to: %v", err)
	}
	if env.Metadata == nil {
		return bad(httperr.CodeMissingField, "metadata is required, with metadata.timestamp")
	}
	ts, ok := env.Metadata[MetaTimestamp].(string)
	if !ok || ts == "" {
		return bad(httperr.CodeMissingField, "metadata.timestamp is required (an RFC 3339 time)")
	}
	if p.sentAt, err = parseTime("metadata.timestamp", ts); err != nil {
		return nil, err
	}
	p.meta = map[string]any{}
	for k, v := range env.Metadata {
		switch k {
		case MetaTimestamp:
		case MetaTraceID:
			if p.traceID, ok = v.(string); !ok || len(p.traceID) > 200 {
				return bad(httperr.CodeInvalidField, "metadata.trace_id must be a string of at most 200 characters")
			}
			// Checked here, not only by the store's SetTraceID, which runs
			// after the message is accepted: a refusal stores nothing.
			if err := core.CheckStorable("metadata.trace_id", p.traceID); err != nil {
				return bad(httperr.CodeInvalidField, "%s", httperr.Text(err))
			}
		case MetaType:
			if p.msgType, ok = v.(string); !ok || p.msgType == "" || len(p.msgType) > 64 {
				return bad(httperr.CodeInvalidField, "metadata.type must be a non-empty string of at most 64 characters")
			}
		case metaCallbackConversation, metaCallbackCorrelation:
			return bad(httperr.CodeInvalidField, "metadata.%s is reserved", k)
		default:
			p.meta[k] = v
		}
	}
	if len(p.meta) == 0 {
		p.meta = nil
	}
	if env.TTLMs < 0 || time.Duration(env.TTLMs)*time.Millisecond > s.relay.Config().MaxTTL {
		return bad("invalid_ttl", "ttl_ms must be between 1 and %d", s.relay.Config().MaxTTL.Milliseconds())
	}
	p.ttl = time.Duration(env.TTLMs) * time.Millisecond
	if env.CallbackURL != "" {
		if err := ssrf.CheckForm("callback_url", env.CallbackURL); err != nil {
			return bad("invalid_callback_url", "%v", err)
		}
		// The hub will call it: refuse what the SSRF policy refuses
		// before anything is stored.
		if s.opt.CheckURL != nil {
			if err := s.opt.CheckURL(env.CallbackURL); err != nil {
				return bad("callback_url_forbidden", "callback_url: %v", err)
			}
		}
	}
	if p.parts, err = ParseContent(env.Content); err != nil {
		return nil, contentError(err)
	}
	return p, nil
}

// parseTime parses the RFC 3339 time v of field name. It also refuses
// times whose UTC form falls outside years 1 to 9999 (say 0000-01-01 at
// +01:00): the hub renders times in UTC, and such a time would be stored
// but its rendering refused, here or by JSON encoding.
func parseTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fail(http.StatusBadRequest, httperr.CodeInvalidField, "%s %q is not an RFC 3339 time", name, trunc(v))
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return time.Time{}, fail(http.StatusBadRequest, httperr.CodeInvalidField, "%s %q is out of range: in UTC it must fall in years 0001 to 9999", name, trunc(v))
	}
	return t, nil
}

func checkID(name, v string) error {
	if len(v) > 200 {
		return fail(http.StatusBadRequest, httperr.CodeInvalidField, "%s is longer than 200 characters", name)
	}
	for _, r := range v {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fail(http.StatusBadRequest, httperr.CodeInvalidField, "%s must not contain spaces or control characters", name)
		}
	}
	return nil
}

// Receive validates a MAMP envelope, enforces the receiver's card and
// hands the message to the relay; it is what POST /mamp/v1/messages does.
// When it returns without error the message is durable. Nothing is stored
// when it fails.
func (s *Server) Receive(ctx context.Context, env *Envelope, traceparent string) (*Ack, error) {
	p, err := s.parse(env)
	if err != nil {
		return nil, err
	}
	if err := auth.ActAs(ctx, p.fromID); err != nil {
		return nil, fmt.Errorf("from %s: %w", env.From, err)
	}
	st := s.relay.Store()
	// A repeated message id answers with the first outcome (same sender,
	// same content) or is refused (another sender, other content), before
	// anything else is looked at.
	again := &core.Message{ID: env.MessageID, Sender: p.fromID, Type: p.msgType, CorrelationID: env.CorrelationID, Parts: p.parts}
	if ack, err := s.duplicate(ctx, again); ack != nil || err != nil {
		return ack, err
	}
	recv, pending, err := s.resolve(ctx, p.to, p.toID, p.toRemote)
	if err != nil {
		return nil, err
	}
	convID, newConv := env.ConversationID, env.ConversationID == ""
	if !newConv {
		c, err := st.GetConversation(ctx, convID)
		switch {
		case errors.Is(err, core.ErrNotFound) && p.fromRemote:
			// A conversation started on the sender's own system: its id
			// is the shared id, adopted here.
			newConv = true
		case errors.Is(err, core.ErrNotFound):
			return nil, fail(http.StatusNotFound, CodeConversationNotFound, "Conversation %s not found", convID)
		case err != nil:
			return nil, err
		case !isParticipant(c, p.fromID):
			return nil, fail(http.StatusForbidden, CodeNotParticipant, "%s is not a participant of conversation %s", env.From, convID)
		}
	} else {
		convID = "conv-" + core.NewID()
	}
	authed := auth.From(ctx).Authenticated()
	if acc := recv.Card.Access; acc != nil && acc.RequireAuth && !authed {
		return nil, fail(http.StatusUnauthorized, httperr.CodeUnauthorized, "receiver %s requires an authenticated sender (Authorization: Bearer <token>)", env.To)
	}
	if err := core.CheckAccess(recv, s.ad.URIOf(p.fromID), authed); err != nil {
		return nil, err
	}
	m := &core.Message{ID: env.MessageID, Sender: p.fromID, Receiver: recv.ID, Type: p.msgType, ConversationID: convID,
		CorrelationID: env.CorrelationID, Parts: p.parts, Metadata: p.meta, Protocol: "mamp", TTL: p.ttl,
		SentAt: p.sentAt, TraceParent: traceparent}
	if err := core.CheckCard(recv, m); err != nil {
		return nil, err
	}
	if pending != nil {
		if _, _, err := s.relay.Register(ctx, pending, s.relay.Config().MaxLease); err != nil {
			return nil, fmt.Errorf("register remote agent %s: %w", pending.ID, err)
		}
	}
	if env.CallbackURL != "" {
		if err := s.openCallback(ctx, m, env.CallbackURL); err != nil {
			return nil, err
		}
	}
	res, err := s.relay.Send(ctx, m)
	if err != nil {
		if env.CallbackURL != "" {
			s.closeCallback(context.WithoutCancel(ctx), m.ID)
		}
		if errors.Is(err, core.ErrUnknownReceiver) {
			return nil, fail(http.StatusNotFound, httperr.CodeUnknownReceiver, "%s is not a registered agent", env.To)
		}
		return nil, err
	}
	if res.Duplicate {
		return s.duplicate(ctx, m)
	}
	now := s.relay.Clock().Now()
	if newConv {
		if _, err := st.GetConversation(ctx, convID); errors.Is(err, core.ErrNotFound) {
			err = st.CreateConversation(ctx, &core.Conversation{ID: convID, CreatedAt: now, LastMessageAt: now,
				Participants: []core.Participant{{AgentID: p.fromID}, {AgentID: recv.ID}}})
			if err != nil && !errors.Is(err, core.ErrConflict) {
				return nil, err
			}
		}
	}
	if p.traceID != "" {
		if err := st.SetTraceID(ctx, convID, p.fromID, p.traceID, now); err != nil {
			return nil, err
		}
	}
	return &Ack{ConversationID: convID, MessageID: m.ID, Status: "received", Delivery: res.Receipt.Status}, nil
}

// duplicate answers m when its id is already stored, or returns nil: the
// first outcome for a retry, 409 for the id of another sender or of other
// content (see core.SameContent).
func (s *Server) duplicate(ctx context.Context, m *core.Message) (*Ack, error) {
	id := m.ID
	old, err := s.relay.Store().GetMessage(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if old.Sender != m.Sender {
		return nil, fail(http.StatusConflict, httperr.CodeIDConflict, "message_id %s is already used by another sender", id)
	}
	if !core.SameContent(old, m) {
		return nil, fail(http.StatusConflict, httperr.CodeIDConflict, "message_id %s was sent before with other content (a retry must repeat the message)", id)
	}
	ack := &Ack{ConversationID: old.ConversationID, MessageID: id, Status: "received", Duplicate: true}
	if rc, err := s.relay.Receipt(ctx, id); err == nil {
		ack.Delivery = rc.Status
	}
	return ack, nil
}

func isParticipant(c *core.Conversation, id string) bool {
	for _, p := range c.Participants {
		if p.AgentID == id {
			return true
		}
	}
	return false
}

// resolve finds the receiver a URI names. A remote URI whose agent is not
// registered yet resolves through the configured remotes to an agent to
// register (pending) before sending.
func (s *Server) resolve(ctx context.Context, u URI, id string, remote bool) (recv, pending *core.Agent, err error) {
	a, err := s.relay.Store().GetAgent(ctx, id)
	if err == nil {
		if remote && a.Endpoint.Kind == core.EndpointMAMP {
			now := s.relay.Clock().Now()
			if a.ExpiresAt.Sub(now) < time.Duration(a.LeaseSeconds)*time.Second/2 {
				if _, _, err := s.relay.Heartbeat(ctx, a.ID, 0); err != nil {
					return nil, nil, err
				}
			}
		}
		return a, nil, nil
	}
	if !errors.Is(err, core.ErrNotFound) {
		return nil, nil, err
	}
	if !remote {
		return nil, nil, fail(http.StatusNotFound, httperr.CodeUnknownReceiver, "%s is not a registered agent", u)
	}
	base, err := s.remoteBase(ctx, u.Domain)
	if err != nil {
		return nil, nil, err
	}
	if base == "" {
		return nil, nil, fail(http.StatusNotFound, httperr.CodeUnknownReceiver,
			"no route to %s: domain %s is not a configured remote (Options.Remotes or PUT /mamp/v1/remotes/{domain}) and the agent is not registered", u, u.Domain)
	}
	a = &core.Agent{ID: id, Card: core.Card{Name: u.String()}, Capabilities: []string{},
		Endpoint: core.Endpoint{Kind: core.EndpointMAMP, URL: strings.TrimRight(base, "/") + "/mamp/v1/messages"}, Protocol: "mamp"}
	return a, a, nil
}

func matchGlob(g, s string) (bool, error) { return path.Match(g, s) }

func (s *Server) hubCard(w http.ResponseWriter, r *http.Request) {
	base := "/mamp/v1"
	httperr.JSON(w, http.StatusOK, Card{Protocol: Protocol, AgentID: URI{Domain: s.ad.Host, ID: HubAgentID}.String(),
		Name: "Switchboard hub", Description: "Relays MAMP, ATP, A2A and MCP messages between registered agents, durably.",
		Capabilities: Capabilities{ContentTypes: AllContentTypes, MaxMessageSize: s.opt.MaxBody, Streaming: true, Async: true, Tools: []string{}},
		Access:       &core.Access{Public: true, RequireAuth: !auth.From(r.Context()).Dev},
		Endpoints:    &CardEndpoint{Messages: base + "/messages", Agents: base + "/agents", Conversations: base + "/conversations"}})
}

// agentIDParam reads an agent id path value: a local id or an agent URI.
func (s *Server) agentIDParam(v string) (string, error) {
	if strings.HasPrefix(v, "agent://") {
		u, err := ParseURI(v)
		if err != nil {
			return "", fail(http.StatusBadRequest, CodeInvalidURI, "%v", err)
		}
		id, _, err := s.ad.LocalID(u)
		if err != nil {
			return "", fail(http.StatusBadRequest, CodeInvalidURI, "%v", err)
		}
		return id, nil
	}
	return v, nil
}

func (s *Server) agentCard(w http.ResponseWriter, r *http.Request) {
	id, err := s.agentIDParam(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	a, err := s.relay.Store().GetAgent(r.Context(), id)
	if err != nil {
		writeErr(w, err)
		return
	}
	httperr.JSON(w, http.StatusOK, CardOf(s.ad, a))
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	if err := auth.Member(r.Context()); err != nil {
		writeErr(w, err)
		return
	}
	f := core.AgentFilter{Capability: r.URL.Query().Get("capability")}
	if r.URL.Query().Get("alive") == "true" {
		f.AliveAt = s.relay.Clock().Now()
	}
	list, err := s.relay.Store().ListAgents(r.Context(), f)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]Card, 0, len(list))
	for _, a := range list {
		out = append(out, CardOf(s.ad, a))
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agents": out})
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

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req RegisterRequest
	if !httperr.DecodeJSON(w, r, s.opt.MaxBody, &req) {
		return
	}
	if req.Protocol != "" && req.Protocol != Protocol {
		httperr.Errorf(w, http.StatusBadRequest, CodeUnsupportedProtocol, "protocol %q is not supported; this hub speaks %q", trunc(req.Protocol), Protocol)
		return
	}
	if req.AgentID == "" {
		httperr.Write(w, http.StatusBadRequest, httperr.CodeMissingField, "agent_id is required (agent://domain/id or a local id)")
		return
	}
	id, remote := req.AgentID, false
	if strings.HasPrefix(req.AgentID, "agent://") {
		u, err := ParseURI(req.AgentID)
		if err != nil {
			httperr.Errorf(w, http.StatusBadRequest, CodeInvalidURI, "agent_id: %v", err)
			return
		}
		if id, remote, err = s.ad.LocalID(u); err != nil {
			httperr.Errorf(w, http.StatusBadRequest, CodeInvalidURI, "agent_id: %v", err)
			return
		}
	} else if !core.ValidAgentID(id) {
		httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, "agent_id must be an agent:// URI or 1-128 letters, digits and ._:@- starting with a letter or digit")
		return
	}
	if req.LeaseSeconds < 0 {
		httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, "lease_seconds must be positive")
		return
	}
	card, err := req.Card.CoreCard()
	if err != nil {
		writeErr(w, err)
		return
	}
	ep := core.Endpoint{Kind: core.EndpointPull}
	if req.EndpointURL != "" {
		if err := ssrf.CheckForm("endpoint_url", req.EndpointURL); err != nil {
			httperr.Write(w, http.StatusBadRequest, "invalid_endpoint_url", err.Error())
			return
		}
		if s.opt.CheckURL != nil {
			if err := s.opt.CheckURL(req.EndpointURL); err != nil {
				httperr.Write(w, http.StatusBadRequest, "endpoint_url_forbidden", "endpoint_url: "+err.Error())
				return
			}
		}
		ep = core.Endpoint{Kind: core.EndpointMAMP, URL: req.EndpointURL}
	}
	if remote {
		// Remote agents are routing configuration: the operator's.
		if err := auth.Admin(r.Context()); err != nil {
			writeErr(w, fmt.Errorf("registering an agent of another domain: %w", err))
			return
		}
	}
	_, err = s.relay.Store().GetAgent(r.Context(), id)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		writeErr(w, err)
		return
	}
	if err := auth.MayRegister(r.Context(), err == nil, id); err != nil {
		writeErr(w, err)
		return
	}
	a := &core.Agent{ID: id, Card: card, Capabilities: append([]string{}, card.Tools...), Endpoint: ep, Protocol: "mamp"}
	queued, created, err := s.relay.Register(r.Context(), a, time.Duration(req.LeaseSeconds)*time.Second)
	if err != nil {
		writeErr(w, err)
		return
	}
	var token string
	if created && s.opt.Issuer != nil {
		// Issued only once the registration stands, and only to its creator.
		if token, err = s.opt.Issuer.Issue(r.Context(), id); err != nil {
			// Without its credential nobody could register the id again:
			// undo the registration (best effort; the answer is the error).
			_ = s.relay.Deregister(context.WithoutCancel(r.Context()), id)
			writeErr(w, err)
			return
		}
	}
	out := RegisterResponse{OK: true, AgentID: s.ad.URIOf(id), ID: id, LeaseSeconds: a.LeaseSeconds,
		Queued: queued, Created: created, Token: token, Card: CardOf(s.ad, a)}
	if s.opt.Secrets != nil {
		out.SigningSecret = s.opt.Secrets.SecretFor(id)
	}
	httperr.JSON(w, http.StatusOK, out)
}

func (s *Server) deregister(w http.ResponseWriter, r *http.Request) {
	id, err := s.agentIDParam(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := auth.ActAs(r.Context(), id); err != nil {
		writeErr(w, err)
		return
	}
	if err := s.relay.Deregister(r.Context(), id); err != nil {
		writeErr(w, err)
		return
	}
	if rv, ok := s.opt.Issuer.(interface {
		Revoke(ctx context.Context, agentID string) error
	}); ok {
		// The id is free again: its old credentials must not act for
		// whoever registers it next.
		if err := rv.Revoke(r.Context(), id); err != nil {
			writeErr(w, err)
			return
		}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"ok": true, "agent_id": s.ad.URIOf(id)})
}

// inbox hands a pull agent its queued messages as MAMP envelopes
// (delivered when handed out, unless ?ack=manual: then acknowledge with
// POST /atp/ack).
func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	id, err := s.agentIDParam(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := auth.ActAs(r.Context(), id); err != nil {
		writeErr(w, err)
		return
	}
	limit, ok := intParam(w, r, "limit", 100, 1000)
	if !ok {
		return
	}
	ms, err := s.relay.Pull(r.Context(), id, limit, 0, r.URL.Query().Get("ack") != "manual")
	if err != nil {
		writeErr(w, err)
		return
	}
	out, err := s.envelopes(ms)
	if err != nil {
		writeErr(w, err)
		return
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agent_id": s.ad.URIOf(id), "messages": out})
}

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

func intParam(w http.ResponseWriter, r *http.Request, name string, def, max int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > max {
		httperr.Errorf(w, http.StatusBadRequest, httperr.CodeInvalidField, "%s must be 1..%d", name, max)
		return 0, false
	}
	return n, true
}

// ParticipantView is a conversation participant.
type ParticipantView struct {
	Agent    string    `json:"agent"`
	AgentID  string    `json:"agent_id"`
	TraceID  string    `json:"trace_id,omitempty"`
	JoinedAt time.Time `json:"joined_at"`
}

// ConversationView is GET /mamp/v1/conversations/{id}.
type ConversationView struct {
	ConversationID string            `json:"conversation_id"`
	CreatedAt      time.Time         `json:"created_at"`
	LastMessageAt  time.Time         `json:"last_message_at"`
	MessageCount   int               `json:"message_count"`
	Participants   []ParticipantView `json:"participants"`
	Messages       []*Envelope       `json:"messages,omitempty"`
}

func (s *Server) view(c *core.Conversation) ConversationView {
	v := ConversationView{ConversationID: c.ID, CreatedAt: c.CreatedAt, LastMessageAt: c.LastMessageAt, MessageCount: c.Messages,
		Participants: make([]ParticipantView, 0, len(c.Participants))}
	for _, p := range c.Participants {
		v.Participants = append(v.Participants, ParticipantView{Agent: s.ad.URIOf(p.AgentID), AgentID: p.AgentID, TraceID: p.TraceID, JoinedAt: p.JoinedAt})
	}
	return v
}

// canRead lets a participant or the operator read a conversation.
func canRead(ctx context.Context, c *core.Conversation) error {
	p := auth.From(ctx)
	if p.Dev || p.Admin {
		return nil
	}
	if p.AgentID != "" && isParticipant(c, p.AgentID) {
		return nil
	}
	if !p.Authenticated() {
		return fmt.Errorf("reading conversation %s needs a participant's credential: %w", c.ID, auth.ErrUnauthenticated)
	}
	return fmt.Errorf("%s is not a participant of conversation %s: %w", p.AgentID, c.ID, auth.ErrNotPermitted)
}

func (s *Server) getConversation(ctx context.Context, id string) (*core.Conversation, error) {
	c, err := s.relay.Store().GetConversation(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, fail(http.StatusNotFound, CodeConversationNotFound, "Conversation %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := canRead(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Server) conversation(w http.ResponseWriter, r *http.Request) {
	c, err := s.getConversation(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	limit, ok := intParam(w, r, "limit", 100, 1000)
	if !ok {
		return
	}
	var after int64
	if v := r.URL.Query().Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, "after must be a non-negative sequence number")
			return
		}
	}
	ms, err := s.relay.Store().ConversationMessages(r.Context(), c.ID, after, limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	v := s.view(c)
	if v.Messages, err = s.envelopes(ms); err != nil {
		writeErr(w, err)
		return
	}
	httperr.JSON(w, http.StatusOK, v)
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) {
	agent := r.URL.Query().Get("agent")
	id := ""
	if agent != "" {
		var err error
		if id, err = s.agentIDParam(agent); err != nil {
			writeErr(w, err)
			return
		}
		if err := auth.ActAs(r.Context(), id); err != nil {
			writeErr(w, err)
			return
		}
	} else if err := auth.Admin(r.Context()); err != nil {
		writeErr(w, fmt.Errorf("listing every conversation (no ?agent=): %w", err))
		return
	}
	limit, ok := intParam(w, r, "limit", 100, 1000)
	if !ok {
		return
	}
	cs, err := s.relay.Store().ListConversations(r.Context(), id, limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]ConversationView, 0, len(cs))
	for _, c := range cs {
		out = append(out, s.view(c))
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"conversations": out})
}
