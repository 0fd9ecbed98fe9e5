// Package audit records the hub's security decisions — refusals,
// registrations, credential use, issue, rotation and revocation — as one
// stream of structured log records, so that an operator can answer "who
// did what, and what was refused" from one place.
//
// Every record comes through Record (or a Recorder's Record), whoever
// decides: the HTTP middleware for refusals it sees (401, 403, 429), the
// operator routes for token rotation and revocation, and the core or the
// authenticator for what they decide (they call audit.Record with the
// request's context). The context carries the request's facts (who is
// calling, from where, on which route, under which request id), which are
// added to each record; a context without them (a background task) gets
// the recorder installed with Into, or the default one.
//
// Records are logged at level INFO with msg "audit" and the attribute
// audit=true, so `jq 'select(.audit)'` picks them out of the hub's log.
// docs/logging.md lists every action.
package audit

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Outcome says whether the action was allowed.
type Outcome string

// Outcomes.
const (
	Allowed Outcome = "allowed"
	Refused Outcome = "refused"
)

// Actions recorded. Callers may add others; keep them dotted nouns and
// verbs in the past tense, and list them in docs/logging.md.
const (
	// ActionRefused is a request refused for want of a credential (401),
	// for a credential not allowed to do it (403), or for its rate (429).
	ActionRefused = "request.refused"
	// ActionTokenInvalid is a bearer token the hub does not know.
	ActionTokenInvalid = "token.invalid"
	// ActionAdminUsed is the admin token used for a state-changing request.
	ActionAdminUsed = "admin.used"
	// ActionAgentRegistered is a new agent registration.
	ActionAgentRegistered = "agent.registered"
	// ActionAgentDeregistered is an agent deregistered.
	ActionAgentDeregistered = "agent.deregistered"
	// ActionTokenIssued is a credential issued to an agent.
	ActionTokenIssued = "token.issued"
	// ActionTokenRotated is an agent's credentials replaced by a new one.
	ActionTokenRotated = "token.rotated"
	// ActionTokenRevoked is every credential of an agent revoked.
	ActionTokenRevoked = "token.revoked"
	// ActionDashboardLogin is a dashboard login, allowed or refused.
	ActionDashboardLogin = "dashboard.login"
	// ActionDashboardLogout is a dashboard session ended.
	ActionDashboardLogout = "dashboard.logout"
)

// Event is one security decision.
type Event struct {
	// Action is what was decided on (one of the Action constants).
	Action string
	// Outcome is Allowed or Refused.
	Outcome Outcome
	// Agent is the agent the action concerns, if any.
	Agent string
	// Status is the HTTP status answered, if any.
	Status int
	// Reason says why, for refusals (an error code or text).
	Reason string
}

// Request is what the middleware knows about the request being served;
// Record adds it to every event recorded with the request's context.
type Request struct {
	ID        string // the request id (also in the request log)
	Method    string
	Route     string // the route pattern, e.g. "POST /atp/send"
	Remote    string // the client's address
	Principal string // "admin", "agent:<id>", "dev" or "" (anonymous)
}

// Recorder writes audit records to a logger.
type Recorder struct{ log *slog.Logger }

// New returns a recorder writing to log.
func New(log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{log: log}
}

// Record writes one audit record.
func (r *Recorder) Record(ctx context.Context, e Event) {
	if r == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.Bool("audit", true), slog.String("action", e.Action), slog.String("outcome", string(e.Outcome)))
	if e.Agent != "" {
		attrs = append(attrs, slog.String("agent", e.Agent))
	}
	if e.Status != 0 {
		attrs = append(attrs, slog.Int("status", e.Status))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	if q, ok := ctx.Value(requestKey{}).(*Request); ok && q != nil {
		attrs = append(attrs, slog.String("principal", principalOr(q.Principal)), slog.String("method", q.Method),
			slog.String("route", q.Route), slog.String("remote", q.Remote))
		if q.ID != "" {
			attrs = append(attrs, slog.String("request_id", q.ID))
		}
	}
	r.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "audit", attrs...)
}

func principalOr(p string) string {
	if p == "" {
		return "anonymous"
	}
	return p
}

type (
	requestKey  struct{}
	recorderKey struct{}
)

// WithRequest returns ctx carrying the request's facts; the middleware
// fills q in as it learns them (the principal after authentication, the
// route after routing), so keep the pointer.
func WithRequest(ctx context.Context, q *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, q)
}

// RequestFrom returns the request facts in ctx, or nil.
func RequestFrom(ctx context.Context) *Request {
	q, _ := ctx.Value(requestKey{}).(*Request)
	return q
}

// Into returns ctx carrying rec, the recorder Record uses.
func Into(ctx context.Context, rec *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, rec)
}

var fallback atomic.Pointer[Recorder]

// SetDefault sets the recorder used for contexts that carry none (the
// hub sets its own at start).
func SetDefault(rec *Recorder) { fallback.Store(rec) }

// Record records e with the recorder in ctx (see Into), or the default
// one; without either it does nothing. This is the one function the core,
// the authenticator and the adapters call to record a decision.
func Record(ctx context.Context, e Event) {
	rec, _ := ctx.Value(recorderKey{}).(*Recorder)
	if rec == nil {
		rec = fallback.Load()
	}
	rec.Record(ctx, e)
}
