package atp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// Options tune the ATP routes.
type Options struct {
	// MaxBody bounds a request body in bytes [1 MiB].
	MaxBody int64
	// MaxWait bounds how long a send or result call may wait [60s].
	MaxWait time.Duration
	// AttemptWait bounds how long POST /atp/send waits, unless told
	// otherwise, for the first delivery attempt to a receiver that is
	// alive and takes pushes, so that it can answer delivered as the
	// tutorial's relay does [DefaultAttemptWait; below 0 no wait].
	AttemptWait time.Duration
	// Issuer, when set, is called on the first registration of an agent
	// and its token is returned to the agent (auth on).
	Issuer CredentialIssuer
	// Secrets, when set, gives each agent identity (id and generation,
	// core.Agent.Generation) the secret its webhooks are signed with; it
	// is returned at registration.
	Secrets interface {
		SecretFor(agentID, generation string) string
	}
	// CheckURL, when set, refuses callback URLs the hub may not call
	// (the SSRF policy), at registration.
	CheckURL func(raw string) error
}

// CredentialIssuer issues an agent's credential at its first
// registration, bound to the identity generation the registration started
// (core.Agent.Generation).
type CredentialIssuer interface {
	Issue(ctx context.Context, agentID, generation string) (token string, err error)
}

// Server serves the /atp/* routes over a relay.
type Server struct {
	relay *core.Relay
	opt   Options
}

// New returns the ATP adapter.
func New(relay *core.Relay, opt Options) *Server {
	if opt.MaxBody <= 0 {
		opt.MaxBody = 1 << 20
	}
	if opt.MaxWait <= 0 {
		opt.MaxWait = 60 * time.Second
	}
	if opt.AttemptWait == 0 {
		opt.AttemptWait = DefaultAttemptWait
	}
	return &Server{relay: relay, opt: opt}
}

// DefaultAttemptWait is Options.AttemptWait's default: long enough for a
// receiver that takes a moment over its answer (the tutorial's worker
// takes 0.3 s), short enough that a send never hangs on a slow one.
const DefaultAttemptWait = 2 * time.Second

// Name is the adapter's name (the hub's adapter contract).
func (s *Server) Name() string { return "atp" }

// Mount adds the routes to mux. Each handler returns its error, answered
// in one place (httperr.Handle, which maps core error kinds to HTTP).
func (s *Server) Mount(mux *http.ServeMux) {
	h := func(pattern string, fn httperr.HandlerFunc) { mux.HandleFunc(pattern, httperr.Handle(fn)) }
	h("POST /atp/register", s.register)
	h("POST /atp/heartbeat", s.heartbeat)
	h("POST /atp/deregister", s.deregister)
	h("DELETE /atp/agents/{id}", s.deregister)
	h("GET /atp/agents", s.agents)
	h("GET /atp/agents/{id}", s.agent)
	h("POST /atp/send", s.send)
	h("GET /atp/receipts/{id}", s.receipt)
	h("GET /atp/results/{id}", s.results)
	h("GET /atp/pending/{id}", s.pending)
	h("POST /atp/ack", s.ack)
	h("GET /atp/stream/{id}", s.stream)
}

// Run has no background work: ATP's streams end with their requests. It
// returns when ctx ends (the hub's adapter contract).
func (s *Server) Run(ctx context.Context) error {
	<-ctx.Done()
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

// RegisterRequest is the body of POST /atp/register.
type RegisterRequest struct {
	AgentID      string     `json:"agent_id"`
	CallbackURL  string     `json:"callback_url"`
	Capabilities []string   `json:"capabilities"`
	LeaseSeconds int        `json:"lease_seconds"`
	Card         *core.Card `json:"card,omitempty"`
	// Delivery is "push" (default with a callback_url), "pull" (default
	// without) or "stream" (the agent holds GET /atp/stream/{id} open).
	Delivery string `json:"delivery,omitempty"`
}

// RegisterResponse is the answer to POST /atp/register.
type RegisterResponse struct {
	OK           bool   `json:"ok"`
	AgentID      string `json:"agent_id"`
	URI          string `json:"uri"`
	LeaseSeconds int    `json:"lease_seconds"`
	Queued       int    `json:"queued"`
	Created      bool   `json:"created"`
	// Token is the agent's credential, returned once at first registration
	// when auth is on.
	Token string `json:"token,omitempty"`
	// SigningSecret verifies the hub's webhooks (package webhooksig).
	SigningSecret string `json:"signing_secret,omitempty"`
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) error {
	var req RegisterRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.AgentID == "" {
		return bad(httperr.CodeMissingField, "agent_id is required")
	}
	if !core.ValidAgentID(req.AgentID) {
		return bad(httperr.CodeInvalidField, "agent_id must be 1-128 characters of letters, digits and ._:@-, starting with a letter or digit")
	}
	lease, err := s.lease(req.LeaseSeconds)
	if err != nil {
		return err
	}
	ep := core.Endpoint{Kind: core.EndpointPull}
	if req.CallbackURL != "" {
		if err := ssrf.CheckForm("callback_url", req.CallbackURL); err != nil {
			return bad("invalid_callback_url", "%s", err.Error())
		}
		if s.opt.CheckURL != nil {
			if err := s.opt.CheckURL(req.CallbackURL); err != nil {
				return bad("callback_url_forbidden", "callback_url: %s", err.Error())
			}
		}
		ep = core.Endpoint{Kind: core.EndpointATP, URL: req.CallbackURL}
	}
	switch req.Delivery {
	case "", "push", "pull":
		if req.Delivery == "pull" {
			ep = core.Endpoint{Kind: core.EndpointPull}
		}
		if req.Delivery == "push" && req.CallbackURL == "" {
			return bad(httperr.CodeMissingField, `callback_url is required with delivery "push"`)
		}
	case "stream":
		ep = core.Endpoint{Kind: core.EndpointStream}
	default:
		return bad(httperr.CodeInvalidField, `delivery must be "push", "pull" or "stream"`)
	}
	a := &core.Agent{ID: req.AgentID, Capabilities: nonNil(req.Capabilities), Endpoint: ep, Protocol: "atp"}
	if req.Card != nil {
		a.Card = *req.Card
	}
	p := caller(r)
	queued, created, err := s.relay.RegisterAs(r.Context(), p, a, lease)
	if err != nil {
		return err
	}
	var token string
	if created && s.opt.Issuer != nil {
		if token, err = s.opt.Issuer.Issue(r.Context(), a.ID, a.Generation); err != nil {
			// Without its credential nobody could register the id again:
			// undo the registration (best effort; the answer is the error).
			_ = s.relay.DeregisterAs(context.WithoutCancel(r.Context()), core.InternalPrincipal("atp"), a.ID)
			return err
		}
	}
	out := RegisterResponse{OK: true, AgentID: a.ID, URI: s.relay.URI(a.ID),
		LeaseSeconds: a.LeaseSeconds, Queued: queued, Created: created, Token: token}
	if s.opt.Secrets != nil {
		out.SigningSecret = s.opt.Secrets.SecretFor(a.ID, a.Generation)
	}
	httperr.JSON(w, http.StatusOK, out)
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type heartbeatRequest struct {
	AgentID      string `json:"agent_id"`
	LeaseSeconds int    `json:"lease_seconds"`
}

// lease reads lease_seconds: 0 (or absent) for the relay's default, else 1
// up to the relay's longest lease.
func (s *Server) lease(n int) (time.Duration, error) {
	longest := int(s.relay.Config().MaxLease / time.Second)
	if n < 0 || n > longest {
		return 0, bad(httperr.CodeInvalidField, "lease_seconds must be between 1 and %d (0 or absent: the default)", longest)
	}
	return time.Duration(n) * time.Second, nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	var req heartbeatRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.AgentID == "" {
		return bad(httperr.CodeMissingField, "agent_id is required")
	}
	lease, err := s.lease(req.LeaseSeconds)
	if err != nil {
		return err
	}
	a, queued, err := s.relay.HeartbeatAs(r.Context(), caller(r), req.AgentID, lease)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"ok": true, "agent_id": a.ID, "lease_seconds": a.LeaseSeconds,
		"expires_at": unixSeconds(a.ExpiresAt), "queued": queued})
	return nil
}

// deregister ends the agent's identity (core.Relay.DeregisterAs): its
// credentials are revoked, its queued mail ends as dead letters.
func (s *Server) deregister(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if id == "" {
		var req heartbeatRequest
		if err := s.decode(w, r, &req); err != nil {
			return err
		}
		id = req.AgentID
	}
	if id == "" {
		return bad(httperr.CodeMissingField, "agent_id is required")
	}
	if err := s.relay.DeregisterAs(r.Context(), caller(r), id); err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"ok": true, "agent_id": id})
	return nil
}

// AgentView is an agent as GET /atp/agents shows it.
type AgentView struct {
	AgentID      string    `json:"agent_id"`
	URI          string    `json:"uri"`
	CallbackURL  string    `json:"callback_url"`
	Endpoint     string    `json:"endpoint"`
	Capabilities []string  `json:"capabilities"`
	ExpiresAt    float64   `json:"expires_at"`
	LastSeen     float64   `json:"last_seen"`
	Alive        bool      `json:"alive"`
	Protocol     string    `json:"protocol,omitempty"`
	Card         core.Card `json:"card"`
}

func (s *Server) view(a *core.Agent, now time.Time) AgentView {
	return AgentView{AgentID: a.ID, URI: s.relay.URI(a.ID), CallbackURL: a.Endpoint.URL, Endpoint: string(a.Endpoint.Kind),
		Capabilities: nonNil(a.Capabilities), ExpiresAt: unixSeconds(a.ExpiresAt), LastSeen: unixSeconds(a.LastSeen),
		Alive: a.Alive(now), Protocol: a.Protocol, Card: a.Card}
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMicro()) / 1e6
}

// agents answers the tutorial's shape: an object keyed by agent id.
func (s *Server) agents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := core.AgentFilter{Capability: q.Get("capability")}
	now := s.relay.Clock().Now()
	alive, err := httperr.QueryBool(r, "alive")
	if err != nil {
		return err
	}
	if alive {
		f.AliveAt = now
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return bad(httperr.CodeInvalidField, "limit must be a non-negative integer")
		}
		f.Limit = n
	}
	list, err := s.relay.ListAgents(r.Context(), caller(r), f)
	if err != nil {
		return err
	}
	out := make(map[string]AgentView, len(list))
	for _, a := range list {
		out[a.ID] = s.view(a, now)
	}
	httperr.JSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) agent(w http.ResponseWriter, r *http.Request) error {
	a, err := s.relay.LookupAgent(r.Context(), caller(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, s.view(a, s.relay.Clock().Now()))
	return nil
}

// SendResponse is the answer to POST /atp/send.
type SendResponse struct {
	Status    core.Status     `json:"status"`
	MessageID string          `json:"message_id"`
	Receipt   json.RawMessage `json:"receipt"`
	Duplicate bool            `json:"duplicate,omitempty"`
}

// send is POST /atp/send. The message is durable before anything else
// happens to it. Then the answer waits, as the tutorial's relay does, for
// the first delivery attempt to a receiver that is alive and takes pushes
// (at most AttemptWait; core.Relay.SendAsAwaitAttempt): delivered, with
// the receiver's reply, when it succeeded in that time; rejected when the
// receiver refused it; queued otherwise. ?wait_ms=N instead waits up to N
// ms for the message's final status (0: no wait at all), and a
// "Prefer: respond-async" header (RFC 7240) answers at once.
func (s *Server) send(w http.ResponseWriter, r *http.Request) error {
	var env Envelope
	if err := s.decode(w, r, &env); err != nil {
		return err
	}
	// Every check before the message is stored: a refused send stores
	// nothing.
	wait, err := s.waitParam(r)
	if err != nil {
		return err
	}
	attemptWait := s.opt.AttemptWait
	if wait >= 0 || preferAsync(r) {
		attemptWait = 0
	}
	m, status, code, msg := s.toMessage(&env)
	if m == nil {
		return httperr.New(status, code, "%s", msg)
	}
	m.TraceParent = r.Header.Get("Traceparent") // canonical key: Get need not allocate one
	p := caller(r)
	res, err := s.relay.SendAsAwaitAttempt(r.Context(), p, m, attemptWait)
	if err != nil {
		if errors.Is(err, core.ErrUnknownReceiver) {
			httperr.JSON(w, http.StatusNotFound, map[string]any{"error": httperr.CodeUnknownReceiver, "message": err.Error(),
				"status_code": http.StatusNotFound, "status": core.StatusUnreachable, "message_id": m.ID, "receipt": nil})
			return nil
		}
		return err
	}
	rc := res.Receipt
	if wait > 0 && !rc.Status.Terminal() {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		if got, err := s.relay.WaitReceiptFor(ctx, p, m.ID); err == nil {
			rc = *got
		}
		cancel()
	}
	httperr.JSON(w, http.StatusOK, SendResponse{Status: rc.Status, MessageID: m.ID, Receipt: replyOrNull(rc), Duplicate: res.Duplicate})
	return nil
}

// preferAsync reports whether r asks to be answered at once (RFC 7240's
// "Prefer: respond-async").
func preferAsync(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for _, pref := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(pref, "=")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// waitParam reads ?wait_ms=, bounded by MaxWait; -1 when it is absent.
func (s *Server) waitParam(r *http.Request) (time.Duration, error) {
	if r.URL.RawQuery == "" {
		return -1, nil // the usual send: no query to parse
	}
	v := r.URL.Query().Get("wait_ms")
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, bad(httperr.CodeInvalidField, "wait_ms must be a non-negative integer")
	}
	if n > s.opt.MaxWait.Milliseconds() {
		return s.opt.MaxWait, nil // before multiplying: a huge n must not wrap
	}
	return time.Duration(n) * time.Millisecond, nil
}

func replyOrNull(rc core.Receipt) json.RawMessage {
	if rc.Status == core.StatusDelivered && len(rc.Reply) > 0 {
		return rc.Reply
	}
	return json.RawMessage("null")
}

// toMessage validates an envelope and maps it to a core message. On failure
// it returns nil and the HTTP error.
func (s *Server) toMessage(env *Envelope) (*core.Message, int, string, string) {
	bad := func(code, msg string) (*core.Message, int, string, string) {
		return nil, http.StatusBadRequest, code, msg
	}
	switch env.ATPVersion {
	case "", Version, "1":
	default:
		return bad(httperr.CodeUnsupported, "atp_version "+strconv.Quote(env.ATPVersion)+" is not supported; this hub speaks "+Version)
	}
	for _, f := range []struct{ name, v string }{{"sender", env.Sender}, {"receiver", env.Receiver}, {"type", env.Type}} {
		if strings.TrimSpace(f.v) == "" {
			return bad(httperr.CodeMissingField, f.name+" is required")
		}
	}
	if !core.ValidAgentID(env.Sender) {
		return bad(httperr.CodeInvalidField, "sender must be an agent id: 1-128 characters of letters, digits and ._:@-, starting with a letter or digit")
	}
	if env.MessageID == "" {
		env.MessageID = core.NewID()
	}
	corr := ""
	if env.CorrelationID != nil {
		corr = *env.CorrelationID
	}
	for _, f := range []struct{ name, v string }{{"message_id", env.MessageID}, {"type", env.Type},
		{"correlation_id", corr}, {"conversation_id", env.ConversationID}} {
		if msg := checkID(f.name, f.v); msg != "" {
			return bad(httperr.CodeInvalidField, msg)
		}
	}
	if env.Timestamp < 0 || env.Timestamp > maxTimestamp {
		return bad(httperr.CodeInvalidField, "timestamp must be Unix seconds between 0 and "+strconv.FormatInt(maxTimestamp, 10))
	}
	var ttl time.Duration
	if env.TTLMs != nil {
		max := s.relay.Config().MaxTTL.Milliseconds()
		if *env.TTLMs <= 0 || *env.TTLMs > max {
			return bad("invalid_ttl", "ttl_ms must be between 1 and "+strconv.FormatInt(max, 10))
		}
		ttl = time.Duration(*env.TTLMs) * time.Millisecond
	}
	parts, err := PayloadToParts(env.Payload)
	if err != nil {
		return bad(httperr.CodeInvalidField, httperr.Text(err))
	}
	m := &core.Message{ID: env.MessageID, Sender: env.Sender, Receiver: env.Receiver, Type: env.Type,
		ConversationID: env.ConversationID, Parts: parts, Metadata: env.Metadata, Protocol: "atp", TTL: ttl,
		SentAt: secondsToTime(env.Timestamp)}
	if env.CorrelationID != nil {
		m.CorrelationID = *env.CorrelationID
	}
	return m, 0, "", ""
}

// maxTimestamp is the last second of year 9999, the last a receipt's
// times can be written with.
const maxTimestamp = 253402300799

// checkID checks an identifier field of the envelope: at most 200 bytes,
// no control characters. It returns the error message, or "".
func checkID(name, v string) string {
	if len(v) > 200 {
		return name + " is longer than 200 characters"
	}
	for _, c := range v {
		if unicode.IsControl(c) || c == utf8.RuneError {
			return name + " must be valid UTF-8 without control characters"
		}
	}
	return ""
}

// ReceiptView is GET /atp/receipts/{id}.
type ReceiptView struct {
	MessageID   string              `json:"message_id"`
	Status      core.Status         `json:"status"`
	Receipt     json.RawMessage     `json:"receipt"`
	Sender      string              `json:"sender"`
	Receiver    string              `json:"receiver"`
	Attempts    int                 `json:"attempts"`
	Code        int                 `json:"code,omitempty"`
	LastError   string              `json:"last_error,omitempty"`
	NextAttempt float64             `json:"next_attempt,omitempty"`
	ExpiresAt   float64             `json:"expires_at"`
	History     []core.ReceiptEvent `json:"history"`
}

// receipt answers a message's receipt to its sender or receiver (or the
// operator); to anyone else it is not found, as an unknown id is.
func (s *Server) receipt(w http.ResponseWriter, r *http.Request) error {
	rc, err := s.relay.ReceiptFor(r.Context(), caller(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, ReceiptView{MessageID: rc.MessageID, Status: rc.Status, Receipt: replyOrNull(*rc),
		Sender: rc.Sender, Receiver: rc.Receiver, Attempts: rc.Attempts, Code: rc.Code, LastError: rc.LastError,
		NextAttempt: unixSeconds(rc.NextAttempt), ExpiresAt: unixSeconds(rc.ExpiresAt), History: rc.History})
	return nil
}

func (s *Server) results(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	wait, err := s.waitParam(r)
	if err != nil {
		return err
	}
	ms, err := s.relay.ResultsFor(r.Context(), caller(r), id, max(wait, 0), 100)
	if err != nil {
		return err
	}
	out, err := envelopes(ms)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"message_id": id, "results": out})
	return nil
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1000 {
			return bad(httperr.CodeInvalidField, "limit must be 1..1000")
		}
		limit = n
	}
	autoAck, err := core.ParseAckMode(q.Get("ack"))
	if err != nil {
		return err
	}
	vis, err := visibility(r, 0)
	if err != nil {
		return err
	}
	ms, err := s.relay.PullAs(r.Context(), caller(r), id, limit, vis, autoAck)
	if err != nil {
		return err
	}
	out, err := envelopes(ms)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agent_id": id, "messages": out})
	return nil
}

// envelopes renders core messages as ATP envelopes.
func envelopes(ms []*core.Message) ([]*Envelope, error) {
	out := make([]*Envelope, 0, len(ms))
	for _, m := range ms {
		env, err := ToEnvelope(m)
		if err != nil {
			return nil, err
		}
		out = append(out, env)
	}
	return out, nil
}

// visibility reads ?visibility_ms= (def when absent); it must be a
// positive integer.
func visibility(r *http.Request, def time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get("visibility_ms")
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > maxVisibility.Milliseconds() {
		return 0, bad(httperr.CodeInvalidField, "visibility_ms must be an integer from 1 to %d", maxVisibility.Milliseconds())
	}
	return time.Duration(n) * time.Millisecond, nil
}

// maxVisibility is the longest a pulled message may stay leased before it
// is handed out again.
const maxVisibility = 24 * time.Hour

type ackRequest struct {
	AgentID    string   `json:"agent_id"`
	MessageIDs []string `json:"message_ids"`
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request) error {
	var req ackRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.AgentID == "" {
		return bad(httperr.CodeMissingField, "agent_id is required")
	}
	if req.MessageIDs == nil {
		return bad(httperr.CodeMissingField, "message_ids is required")
	}
	n, err := s.relay.AckAs(r.Context(), caller(r), req.AgentID, req.MessageIDs)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"ok": true, "acked": n})
	return nil
}

// pullBatch is how many messages a stream takes from the queue at a time.
const pullBatch = 100

// stream holds a server-sent event stream open and feeds it the agent's
// queue: each message is an event "message" whose data is the ATP envelope.
// Messages stay queued (leased for visibility_ms) until acknowledged with
// POST /atp/ack, so a dropped stream loses nothing. Messages sent while the
// stream is open come through the relay's feed, handed out as they are
// accepted; the rest (those queued before, while the stream fell behind,
// whose lease ran out, or accepted on another hub instance, which wakes it
// through the store's notifications) come from pulls.
// streamPollMax is how far apart an idle stream's pulls get.
const streamPollMax = 5 * time.Second

func (s *Server) stream(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p := caller(r)
	if err := s.relay.QueueAccess(r.Context(), p, id); err != nil {
		return err // a stranger learns nothing of the request's other fields
	}
	vis, err := visibility(r, 30*time.Second)
	if err != nil {
		return err
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("streaming unsupported by the response writer")
	}
	feed, err := s.relay.AttachAs(r.Context(), p, id, vis)
	if err != nil {
		return err
	}
	defer s.relay.Detach(feed)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": switchboard stream\n\n")
	fl.Flush()
	ctx := r.Context()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	// Pulls now and then find leases that ran out and work another
	// instance made due without a notification: a second after the last
	// pull that found something, then twice as long each time up to
	// streamPollMax while the stream is idle. (Every pull is a turn of the
	// store's one writer: a thousand idle streams pulling each second took
	// a tenth of a core and a thousand writer turns a second from sends.)
	poll := core.NewPoll(time.Second, streamPollMax)
	defer poll.Stop()
	// replaced ends the stream when a newer one of the agent took its
	// place (core.Relay.Attach), saying so in a comment line.
	replaced := func() {
		fmt.Fprint(w, ": closed: a newer stream of this agent took its place\n\n")
		fl.Flush()
	}
	for {
		select {
		case <-feed.Ended():
			replaced()
			return nil
		default:
		}
		due := s.relay.Due(id) // before pulling, so no wake-up is missed
		ms, err := s.relay.PullAs(ctx, p, id, pullBatch, vis, false)
		if err != nil {
			// The answer has begun: the stream just ends (its identity
			// ended, say, or the hub is stopping).
			return nil
		}
		full := len(ms) == pullBatch
		if len(ms) > 0 {
			poll.Again()
		}
		// Hand-offs made before the pull returned go out with what it
		// read, in queue order: a message it read may have been sent
		// after a handed-off one of the same sender.
		writeEvents(w, fl, inOrder(ms, feed.Take()))
		if full {
			continue // there may be more at once
		}
		// Fewer than a full batch: what was claimable has been sent, and
		// anything accepted since the pull is handed to the feed or has
		// closed due.
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-feed.Ended():
				replaced()
				return nil
			case <-feed.Ready():
				writeEvents(w, fl, feed.Take())
			case <-due:
				break wait
			case <-poll.C():
				poll.Fired()
				break wait
			case <-keep.C:
				fmt.Fprint(w, ": keep-alive\n\n")
				fl.Flush()
			}
		}
	}
}

// inOrder merges pulled messages with handed-off ones in queue order,
// leaving out repeats (a hand-off whose lease ran out before the stream
// took it may be pulled too).
func inOrder(pulled, handed []*core.Message) []*core.Message {
	if len(handed) == 0 {
		return pulled
	}
	if len(pulled) == 0 {
		return handed
	}
	all := append(slices.Clip(pulled), handed...)
	slices.SortStableFunc(all, func(a, b *core.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	return slices.CompactFunc(all, func(a, b *core.Message) bool { return a.ID == b.ID })
}

// writeEvents writes ms to an event stream as "message" events.
func writeEvents(w http.ResponseWriter, fl http.Flusher, ms []*core.Message) {
	for _, m := range ms {
		env, err := ToEnvelope(m)
		if err != nil {
			continue
		}
		b, _ := json.Marshal(env)
		fmt.Fprintf(w, "event: message\nid: %s\ndata: %s\n\n", m.ID, b)
	}
	if len(ms) > 0 {
		fl.Flush()
	}
}
