package mamp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// messages is POST /mamp/v1/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) error {
	var env Envelope
	if err := s.decode(w, r, &env); err != nil {
		return err
	}
	ack, err := s.Receive(r.Context(), caller(r), &env, r.Header.Get("Traceparent"))
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, ack)
	return nil
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
	if env.Protocol != Protocol {
		if env.Protocol == "" {
			return nil, bad(httperr.CodeMissingField, "protocol is required (%q)", Protocol)
		}
		return nil, bad(CodeUnsupportedProtocol, "protocol %q is not supported; this hub speaks %q", trunc(env.Protocol), Protocol)
	}
	if env.MessageID == "" {
		return nil, bad(httperr.CodeMissingField, "message_id is required")
	}
	for _, f := range []struct{ name, v string }{{"message_id", env.MessageID},
		{"conversation_id", env.ConversationID}, {"correlation_id", env.CorrelationID}} {
		if err := checkID(f.name, f.v); err != nil {
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
			return nil, bad(httperr.CodeMissingField, "%s is required (agent://domain/id)", f.name)
		}
		if *f.u, err = ParseURI(f.raw); err != nil {
			return nil, bad(CodeInvalidURI, "%s: %v", f.name, err)
		}
	}
	if p.fromID, p.fromRemote, err = s.ad.LocalID(p.from); err != nil {
		return nil, bad(CodeInvalidURI, "from: %v", err)
	}
	if p.toID, p.toRemote, err = s.ad.LocalID(p.to); err != nil {
		return nil, bad(CodeInvalidURI, "to: %v", err)
	}
	if env.Metadata == nil {
		return nil, bad(httperr.CodeMissingField, "metadata is required, with metadata.timestamp")
	}
	ts, ok := env.Metadata[MetaTimestamp].(string)
	if !ok || ts == "" {
		return nil, bad(httperr.CodeMissingField, "metadata.timestamp is required (an RFC 3339 time)")
	}
	if p.sentAt, err = parseTime("metadata.timestamp", ts); err != nil {
		return nil, err
	}
	p.meta = map[string]any{}
	for k, v := range env.Metadata {
		switch k {
		case MetaTimestamp:
		case MetaTraceID:
			// Checked here, not only by the relay when it keeps it after
			// the message is accepted: a refusal stores nothing.
			if p.traceID, ok = v.(string); !ok || !printable(p.traceID) || len(p.traceID) > core.MaxTraceID {
				return nil, bad(httperr.CodeInvalidField, "metadata.trace_id must be a string of at most %d characters, without control characters", core.MaxTraceID)
			}
		case MetaType:
			if p.msgType, ok = v.(string); !ok || p.msgType == "" || len(p.msgType) > 64 || !printable(p.msgType) {
				return nil, bad(httperr.CodeInvalidField, "metadata.type must be a non-empty string of at most 64 characters, without control characters")
			}
		case metaCallbackConversation, metaCallbackCorrelation:
			return nil, bad(httperr.CodeInvalidField, "metadata.%s is reserved", k)
		default:
			p.meta[k] = v
		}
	}
	if len(p.meta) == 0 {
		p.meta = nil
	}
	if env.TTLMs < 0 || time.Duration(env.TTLMs)*time.Millisecond > s.relay.Config().MaxTTL {
		return nil, bad("invalid_ttl", "ttl_ms must be between 1 and %d", s.relay.Config().MaxTTL.Milliseconds())
	}
	p.ttl = time.Duration(env.TTLMs) * time.Millisecond
	if env.CallbackURL != "" {
		if err := ssrf.CheckForm("callback_url", env.CallbackURL); err != nil {
			return nil, bad("invalid_callback_url", "%v", err)
		}
		// The hub will call it: refuse what the SSRF policy refuses
		// before anything is stored.
		if s.opt.CheckURL != nil {
			if err := s.opt.CheckURL(env.CallbackURL); err != nil {
				return nil, bad("callback_url_forbidden", "callback_url: %v", err)
			}
		}
	}
	if p.parts, err = ParseContent(env.Content); err != nil {
		return nil, contentError(err)
	}
	return p, nil
}

// contentError maps a content parse error to its answer.
func contentError(err error) error {
	switch {
	case errors.Is(err, ErrPartType):
		return bad(CodeUnknownPartType, "%v", err)
	case errors.Is(err, ErrBase64):
		return bad(CodeInvalidBase64, "%v", err)
	case errors.Is(err, ErrMediaType):
		return bad(CodeMediaTypeMismatch, "%v", err)
	}
	return bad(CodeInvalidContent, "%v", err)
}

// parseTime parses the RFC 3339 time v of field name. It also refuses
// times whose UTC form falls outside years 1 to 9999 (say 0000-01-01 at
// +01:00): the hub renders times in UTC, and such a time would be stored
// but its rendering refused, here or by JSON encoding.
func parseTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, bad(httperr.CodeInvalidField, "%s %q is not an RFC 3339 time", name, trunc(v))
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return time.Time{}, bad(httperr.CodeInvalidField, "%s %q is out of range: in UTC it must fall in years 0001 to 9999", name, trunc(v))
	}
	return t, nil
}

// checkID checks an identifier of the envelope: at most 200 bytes of
// UTF-8, no spaces or control characters (a NUL among them: the stores
// cannot keep it in an id).
func checkID(name, v string) error {
	if len(v) > 200 {
		return bad(httperr.CodeInvalidField, "%s is longer than 200 characters", name)
	}
	if !utf8.ValidString(v) {
		return bad(httperr.CodeInvalidField, "%s must be valid UTF-8", name)
	}
	for _, r := range v {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return bad(httperr.CodeInvalidField, "%s must not contain spaces or control characters", name)
		}
	}
	return nil
}

// printable reports whether v is valid UTF-8 without control characters.
func printable(v string) bool {
	if !utf8.ValidString(v) {
		return false
	}
	return strings.IndexFunc(v, unicode.IsControl) < 0
}

// Receive validates a MAMP envelope that p sends and hands the message to
// the relay; it is what POST /mamp/v1/messages does. When it returns
// without error the message is durable. Nothing is stored when it fails.
//
// The relay decides who may send what (core.Relay.SendAs): p must hold
// the sender's credential (or be the operator); the receiver's card
// rules; an answer (correlation_id = M) only from M's receiver; in an
// existing conversation only a member. A repeated message id answers with
// the first outcome, or is refused when it is not a retry.
func (s *Server) Receive(ctx context.Context, p core.Principal, env *Envelope, traceparent string) (*Ack, error) {
	pe, err := s.parse(env)
	if err != nil {
		return nil, err
	}
	// Decided again by SendAs; asked first because resolving a remote
	// receiver may register it.
	if err := s.relay.ActAs(ctx, p, pe.fromID); err != nil {
		return nil, fmt.Errorf("from %s: %w", trunc(env.From), err)
	}
	if pe.toRemote {
		if err := s.resolveRemote(ctx, pe.to, pe.toID); err != nil {
			return nil, err
		}
	}
	convID := env.ConversationID
	switch {
	case convID == "":
		convID = "conv-" + core.NewID()
	case !pe.fromRemote:
		// A local sender continues a conversation it is a member of; an
		// unknown one is the spec's 404. (A remote sender may name one its
		// own system began: the message starts it here, with that id.)
		if _, err := s.relay.Conversation(ctx, p, convID); err != nil {
			return nil, noConversation(convID, err)
		}
	}
	m := &core.Message{ID: env.MessageID, Sender: pe.fromID, Receiver: pe.toID, Type: pe.msgType, ConversationID: convID,
		CorrelationID: env.CorrelationID, Parts: pe.parts, Metadata: pe.meta, Protocol: "mamp", TTL: pe.ttl,
		SentAt: pe.sentAt, TraceParent: traceparent}
	res, err := s.relay.SendAs(ctx, p, m)
	switch {
	case errors.Is(err, core.ErrUnknownReceiver):
		return nil, httperr.New(http.StatusNotFound, httperr.CodeUnknownReceiver, "%s is not a registered agent", trunc(env.To))
	case err != nil:
		return nil, noConversation(convID, err)
	}
	if res.Duplicate {
		convID = res.ConversationID
	}
	// What follows is done again when the sender retries (a duplicate),
	// so a failure here loses nothing the retry cannot mend.
	if pe.traceID != "" && convID != "" {
		if err := s.relay.SetTraceIDAs(ctx, p, convID, pe.fromID, pe.traceID); err != nil {
			return nil, noConversation(convID, err)
		}
	}
	if env.CallbackURL != "" {
		if err := s.openCallback(ctx, m, env.CallbackURL); err != nil {
			return nil, err
		}
	}
	return &Ack{ConversationID: convID, MessageID: m.ID, Status: "received", Delivery: res.Receipt.Status, Duplicate: res.Duplicate}, nil
}

// resolveRemote makes sure the remote agent u (local id id) can be sent
// to. A registered one is used as it is (its lease renewed when it is past
// half); otherwise, if u's domain is a configured remote, the hub's
// remote-agent registration binds it with a MAMP endpoint at the domain's
// base URL; otherwise there is no route (404 unreachable).
func (s *Server) resolveRemote(ctx context.Context, u URI, id string) error {
	a, err := s.relay.LookupAgent(ctx, remotesActor, id)
	switch {
	case err == nil:
		if a.Endpoint.Kind == core.EndpointMAMP {
			now := s.relay.Clock().Now()
			if a.ExpiresAt.Sub(now) < time.Duration(a.LeaseSeconds)*time.Second/2 {
				if _, _, err := s.relay.HeartbeatAs(ctx, remotesActor, a.ID, 0); err != nil {
					return fmt.Errorf("renew remote agent %s: %w", a.ID, err)
				}
			}
		}
		return nil
	case !errors.Is(err, core.ErrNotFound):
		return err
	}
	base, err := s.remoteBase(ctx, u.Domain)
	if err != nil {
		return err
	}
	if base == "" {
		return httperr.New(http.StatusNotFound, httperr.CodeUnknownReceiver,
			"no route to %s: domain %s is not a configured remote (Options.Remotes or PUT /mamp/v1/remotes/{domain}) and the agent is not registered", u, u.Domain)
	}
	a = &core.Agent{ID: id, Card: core.Card{Name: u.String()}, Capabilities: []string{},
		Endpoint: core.Endpoint{Kind: core.EndpointMAMP, URL: strings.TrimRight(base, "/") + "/mamp/v1/messages"}, Protocol: "mamp"}
	if _, _, err := s.relay.RegisterAs(ctx, remotesActor, a, s.relay.Config().MaxLease); err != nil {
		return fmt.Errorf("register remote agent %s: %w", id, err)
	}
	return nil
}
