// Package dashboard serves the hub's operator web dashboard at /dashboard/:
// agents with their status, cards and last seen time; the live message flow
// with filters; conversations with multimodal parts rendered; receipts;
// dead letters with replay; charts of the message flow read from the
// store (FlowStore); and AMP sessions with their pressure over time.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (no
// CDN, no build step). Its data comes from /dashboard/api/*, which either
// forwards to the hub's own operator routes (the event stream, dead
// letters and their replay) or calls, with the operator's principal, the
// relay's operations (agents, queues, messages, receipts) and the
// conversation functions the hub gives it (the MAMP adapter's: parts
// rendered as MAMP content); AMP sessions come from the relay's record
// store.
//
// Authentication: with auth on, every API call needs the operator. A
// browser's EventSource cannot send an Authorization header, so the
// operator logs in once with the admin token (a form POST, or a
// ?token= link exchanged at once for the cookie) and receives a session:
// a random id in a short-lived cookie scoped to /dashboard/ (HttpOnly,
// SameSite=Strict, Secure under TLS), whose record — its expiry, its CSRF
// token, and a hash binding it to the admin token in force — is kept in
// the hub's store, so every instance on one store knows it and logging out
// ends it on the server at once. The admin token itself is never written
// into the page. API calls may also carry the admin token as a bearer
// token. State-changing calls made with the cookie (replay, logout) must
// come from the dashboard's own origin and carry the session's CSRF token
// (from GET /dashboard/api/session) in the X-CSRF-Token header.
package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/amp/ampstore"
	"github.com/switchboard-hub/switchboard/internal/audit"
	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

//go:embed assets
var assets embed.FS

// Prefix is where the dashboard is mounted.
const Prefix = "/dashboard/"

// CookieName is the dashboard session cookie.
const CookieName = "switchboard_dashboard"

// HeaderCSRF carries the session's CSRF token on state-changing calls
// authenticated by the cookie.
const HeaderCSRF = "X-CSRF-Token"

// sessionKind is the RecordStore kind of dashboard sessions, keyed by the
// SHA-256 of the cookie's value (the value itself is not stored).
const sessionKind = "dashboard_session"

// DefaultSessionTTL is how long a dashboard login lasts.
const DefaultSessionTTL = time.Hour

// ContentSecurityPolicy is sent with every dashboard response: only the
// dashboard's own scripts, styles and API; images from itself or inline
// data (base64 image parts), never from third parties.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Options configure the dashboard.
type Options struct {
	// Dev is the hub's dev mode: no authentication.
	Dev bool
	// AdminToken is the operator token (required unless Dev).
	AdminToken string
	// Routes serves the hub's own routes (the hub's mux, inside its
	// authentication middleware); the API forwards to GET /v1/events,
	// GET /v1/dlq and POST /v1/dlq/{id}/replay as the operator.
	Routes http.Handler
	// Conversations shows conversations; the hub passes the MAMP
	// adapter's, which render parts as MAMP content, the page's format.
	// The API calls them with the operator's principal.
	Conversations Conversations
	// AMPStateDir, when set, is a directory of AMP session files
	// (amp.FileStore) shown beside the sessions in the hub's store.
	AMPStateDir string
	// SessionTTL is how long a login lasts [DefaultSessionTTL].
	SessionTTL time.Duration
	// SamplePeriod is how often AMP sessions are sampled for the pressure
	// history [2s].
	SamplePeriod time.Duration
	// Flow is the store the charts read the message flow from (the hub
	// passes its store); without it GET /dashboard/api/stats answers 501.
	Flow FlowStore
}

// Dashboard serves the web dashboard.
type Dashboard struct {
	relay *core.Relay
	// sessions keeps the dashboard's login sessions, in the relay's
	// record store (so every instance on one store knows them).
	sessions sessionStore
	opt      Options
	// admin binds sessions to the admin token in force: a session made
	// under another token is not valid.
	admin string
	amp   *ampstore.Store
	files http.Handler
	// flow shares the charts' store reads between the pages open.
	flow flowCache

	mu      sync.Mutex
	history map[string]*sessionHistory
}

// sessionStore is what the dashboard keeps its sessions in: the part of
// the relay's record store (core.Relay.Records) it uses.
type sessionStore interface {
	PutRecord(ctx context.Context, r core.Record) (core.Record, error)
	GetRecord(ctx context.Context, kind, id string) (core.Record, error)
	ListRecords(ctx context.Context, kind, index string, limit int) ([]core.Record, error)
	DeleteRecord(ctx context.Context, kind, id string) error
}

// Conversations reads conversations for the dashboard as values to
// render in JSON, deciding with the caller's principal (through
// core.Relay.Conversation, ConversationMessages and Conversations). The
// dashboard imports no protocol adapter: the hub wires these to the MAMP
// adapter's Conversations and Conversation, whose views the page draws.
type Conversations struct {
	// List lists up to limit of the conversations agent takes part in
	// (every conversation when agent is empty), most recent first.
	List func(ctx context.Context, p core.Principal, agent string, limit int) (any, error)
	// Get returns conversation id with up to limit of its messages after
	// sequence number after.
	Get func(ctx context.Context, p core.Principal, id string, after int64, limit int) (any, error)
}

// Errors of New, matched with errors.Is.
var (
	// ErrNoToken means auth is on but no admin token was given.
	ErrNoToken = errors.New("dashboard: auth is on but no admin token is configured")
	// ErrNoRoutes means Options.Routes is missing.
	ErrNoRoutes = errors.New("dashboard: Options.Routes is required")
	// ErrNoConversations means Options.Conversations is missing.
	ErrNoConversations = errors.New("dashboard: Options.Conversations.List and Get are required")
)

// New returns the dashboard of relay.
func New(relay *core.Relay, opt Options) (*Dashboard, error) {
	if !opt.Dev && opt.AdminToken == "" {
		return nil, ErrNoToken
	}
	if opt.Routes == nil {
		return nil, ErrNoRoutes
	}
	if opt.Conversations.List == nil || opt.Conversations.Get == nil {
		return nil, ErrNoConversations
	}
	if opt.SessionTTL <= 0 {
		opt.SessionTTL = DefaultSessionTTL
	}
	if opt.SamplePeriod <= 0 {
		opt.SamplePeriod = 2 * time.Second
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("dashboard: assets: %w", err)
	}
	return &Dashboard{relay: relay, sessions: relay.Records(), opt: opt, admin: auth.Hash("switchboard dashboard v2\x00" + opt.AdminToken),
		amp:     &ampstore.Store{Records: relay.Records(), Clock: relay.Clock()},
		files:   http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(sub)),
		history: map[string]*sessionHistory{}}, nil
}

// Mount adds the dashboard's routes to mux.
func (d *Dashboard) Mount(mux *http.ServeMux) {
	mux.Handle("GET /dashboard", http.RedirectHandler(Prefix, http.StatusMovedPermanently))
	mux.HandleFunc("GET /dashboard/{$}", httperr.Handle(d.index))
	mux.HandleFunc("GET /dashboard/", d.static)
	mux.HandleFunc("POST /dashboard/login", httperr.Handle(d.login))
	mux.HandleFunc("POST /dashboard/logout", httperr.Handle(d.logout))
	mux.HandleFunc("GET /dashboard/api/session", d.sessionInfo)
	mux.HandleFunc("GET /dashboard/api/messages", d.api(d.messages))
	mux.HandleFunc("GET /dashboard/api/stats", d.api(d.statsAPI))
	mux.HandleFunc("GET /dashboard/api/agents/{id}", d.api(d.agentDetail))
	mux.HandleFunc("GET /dashboard/api/agents", d.api(d.agents))
	mux.HandleFunc("GET /dashboard/api/receipts/{id}", d.api(d.receipt))
	mux.HandleFunc("GET /dashboard/api/amp/sessions", d.api(d.ampSessions))
	mux.HandleFunc("GET /dashboard/api/events", d.api(d.forward("/v1/events")))
	mux.HandleFunc("GET /dashboard/api/dlq", d.api(d.forward("/v1/dlq")))
	mux.HandleFunc("POST /dashboard/api/dlq/{id}/replay", d.api(d.forwardID("/v1/dlq/", "/replay")))
	mux.HandleFunc("GET /dashboard/api/conversations", d.api(d.conversations))
	mux.HandleFunc("GET /dashboard/api/conversations/{id}", d.api(d.conversation))
}

// securityHeaders sets the headers every dashboard response carries.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
}

func (d *Dashboard) index(w http.ResponseWriter, r *http.Request) error {
	securityHeaders(w)
	if tok := r.URL.Query().Get("token"); tok != "" {
		// A ?token= link: exchange it for the cookie and drop it from the
		// address bar (and history) at once.
		if d.checkToken(tok) {
			if err := d.startSession(w, r); err != nil {
				return err
			}
			http.Redirect(w, r, Prefix, http.StatusSeeOther)
			return nil
		}
		http.Redirect(w, r, Prefix+"?login=failed", http.StatusSeeOther)
		return nil
	}
	w.Header().Set("Cache-Control", "no-store")
	d.files.ServeHTTP(w, r)
	return nil
}

func (d *Dashboard) static(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	d.files.ServeHTTP(w, r)
}

// checkToken compares a presented token with the admin token in constant
// time (over their hashes, so lengths do not leak).
func (d *Dashboard) checkToken(tok string) bool {
	if d.opt.Dev {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(auth.Hash(tok)), []byte(auth.Hash(d.opt.AdminToken))) == 1
}

// sameOrigin refuses a cross-site request. A browser's Sec-Fetch-Site is
// trusted when present (it cannot be set by a page). Otherwise an Origin
// header, when present, must be this host; "null" (sent under
// Referrer-Policy no-referrer and from sandboxed frames) is refused
// without Sec-Fetch-Site to vouch for it. Non-browser clients send
// neither and pass.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false // same-site or cross-site
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) error {
	securityHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		audit.Record(r.Context(), audit.Event{Action: audit.ActionDashboardLogin, Outcome: audit.Refused, Status: http.StatusForbidden, Reason: "cross-site"})
		return httperr.New(http.StatusForbidden, httperr.CodeForbidden, "login must come from the dashboard's own page")
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "login form: %v", err)
	}
	if !d.checkToken(strings.TrimSpace(r.PostForm.Get("token"))) {
		audit.Record(r.Context(), audit.Event{Action: audit.ActionDashboardLogin, Outcome: audit.Refused, Reason: "wrong token"})
		http.Redirect(w, r, Prefix+"?login=failed", http.StatusSeeOther)
		return nil
	}
	if err := d.startSession(w, r); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
	return nil
}

// logout ends the session on the server (its record is deleted: the
// cookie is worthless from then on, wherever it was copied) and clears the
// cookie. It needs the session's CSRF token, like every state-changing
// call; without a valid session it only clears the cookie.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) error {
	securityHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		return httperr.New(http.StatusForbidden, httperr.CodeForbidden, "logout must come from the dashboard's own page")
	}
	if id, sess := d.session(r); sess != nil {
		if !validCSRF(r, sess) {
			return httperr.New(http.StatusForbidden, httperr.CodeForbidden, "logout needs the session's %s header", HeaderCSRF)
		}
		if err := d.sessions.DeleteRecord(r.Context(), sessionKind, sessionKey(id)); err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
		audit.Record(r.Context(), audit.Event{Action: audit.ActionDashboardLogout, Outcome: audit.Allowed})
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	httperr.JSON(w, http.StatusOK, map[string]any{"logged_out": true})
	return nil
}

// sessionRecord is a dashboard session as the store keeps it.
type sessionRecord struct {
	ExpiresAt time.Time `json:"expires_at"`
	CSRF      string    `json:"csrf"`
	Admin     string    `json:"admin"`
}

// sessionKey is the store id of the session whose cookie value is id.
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte("switchboard dashboard session\x00" + id))
	return hex.EncodeToString(sum[:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startSession stores a new session and sets its cookie.
func (d *Dashboard) startSession(w http.ResponseWriter, r *http.Request) error {
	id := randomHex(32)
	now := d.relay.Clock().Now()
	rec := sessionRecord{ExpiresAt: now.Add(d.opt.SessionTTL), CSRF: randomHex(32), Admin: d.admin}
	data, _ := json.Marshal(rec)
	if _, err := d.sessions.PutRecord(r.Context(), core.Record{Kind: sessionKind, ID: sessionKey(id), Data: data, UpdatedAt: now}); err != nil {
		return fmt.Errorf("dashboard: store the session: %w", err)
	}
	d.purgeSessions(r.Context(), now)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: Prefix,
		MaxAge: int(d.opt.SessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	audit.Record(r.Context(), audit.Event{Action: audit.ActionDashboardLogin, Outcome: audit.Allowed})
	return nil
}

// purgeSessions deletes some expired sessions (each login cleans up after
// the ones before it).
func (d *Dashboard) purgeSessions(ctx context.Context, now time.Time) {
	st := d.sessions
	recs, err := st.ListRecords(ctx, sessionKind, "", 200)
	if err != nil {
		return
	}
	for _, rec := range recs {
		var s sessionRecord
		if json.Unmarshal(rec.Data, &s) != nil || !now.Before(s.ExpiresAt) || s.Admin != d.admin {
			_ = st.DeleteRecord(ctx, sessionKind, rec.ID)
		}
	}
}

// session returns the request's cookie value and its live session, or nil.
func (d *Dashboard) session(r *http.Request) (string, *sessionRecord) {
	c, err := r.Cookie(CookieName)
	if err != nil || len(c.Value) != 64 {
		return "", nil
	}
	rec, err := d.sessions.GetRecord(r.Context(), sessionKind, sessionKey(c.Value))
	if err != nil {
		return "", nil
	}
	var s sessionRecord
	if json.Unmarshal(rec.Data, &s) != nil || s.Admin != d.admin || !d.relay.Clock().Now().Before(s.ExpiresAt) {
		return "", nil
	}
	return c.Value, &s
}

// validCSRF checks a state-changing request's CSRF header against the
// session's token, in constant time.
func validCSRF(r *http.Request, s *sessionRecord) bool {
	got := r.Header.Get(HeaderCSRF)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) == 1
}

// authorize reports how r may use the API: the operator by dev mode or
// bearer token (no CSRF exposure: sess is nil), or by a session cookie.
func (d *Dashboard) authorize(r *http.Request) (ok bool, sess *sessionRecord) {
	if d.opt.Dev || auth.Admin(r.Context()) == nil {
		return true, nil
	}
	if _, s := d.session(r); s != nil {
		return true, s
	}
	return false, nil
}

func (d *Dashboard) sessionInfo(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	ok, sess := d.authorize(r)
	out := map[string]any{"authenticated": ok, "dev": d.opt.Dev, "host": d.relay.Config().Host}
	if sess != nil {
		out["csrf_token"] = sess.CSRF
		out["expires_at"] = sess.ExpiresAt
	}
	httperr.JSON(w, http.StatusOK, out)
}

// api wraps an API handler: security headers, no caching, the operator's
// credential (and, for cookie-authenticated writes, the same origin and the
// session's CSRF token), and the operator principal in the request's
// context. The handler's error is written here (httperr.Handle). A caller
// without a credential gets 401; an agent, whose credential is good but
// not the operator's, 403.
func (d *Dashboard) api(h httperr.HandlerFunc) http.HandlerFunc {
	return httperr.Handle(func(w http.ResponseWriter, r *http.Request) error {
		securityHeaders(w)
		w.Header().Set("Cache-Control", "no-store")
		ok, sess := d.authorize(r)
		if !ok {
			if core.KindOf(auth.Admin(r.Context())) == core.KindForbidden {
				return httperr.New(http.StatusForbidden, httperr.CodeForbidden,
					"the dashboard API needs the operator, not an agent: log in with the admin token or send it as a bearer token")
			}
			return httperr.New(http.StatusUnauthorized, httperr.CodeUnauthorized,
				"the dashboard API needs the operator: log in with the admin token or send it as a bearer token")
		}
		if sess != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) || !validCSRF(r, sess) {
				return httperr.New(http.StatusForbidden, httperr.CodeForbidden,
					"state-changing dashboard calls must come from the dashboard page with the session's %s header", HeaderCSRF)
			}
		}
		p := auth.From(r.Context())
		p.Admin = true
		return h(w, r.WithContext(auth.With(r.Context(), p)))
	})
}

// forward serves a request with the hub route at path (same query).
func (d *Dashboard) forward(path string) httperr.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		d.serveAt(w, r, path, path)
		return nil
	}
}

// forwardID serves a request with the hub route prefix+{id}+suffix.
func (d *Dashboard) forwardID(prefix, suffix string) httperr.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		d.serveAt(w, r, prefix+id+suffix, prefix+url.PathEscape(id)+suffix)
		return nil
	}
}

func (d *Dashboard) serveAt(w http.ResponseWriter, r *http.Request, path, rawPath string) {
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = path, rawPath
	if path == rawPath {
		r2.URL.RawPath = ""
	}
	r2.RequestURI = r2.URL.RequestURI()
	r2.Header.Del("Cookie")
	d.opt.Routes.ServeHTTP(w, r2)
}

// Bounds of the conversation API.
const (
	maxConversations = 1000
	maxConvMessages  = 1000
)

// queryInt reads a query value in 1..max, def when absent.
func queryInt(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > max {
		return 0, httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "%s must be 1..%d", name, max)
	}
	return n, nil
}

// conversations serves GET /dashboard/api/conversations (?agent=, ?limit=):
// the conversations, most recent first, as MAMP lists them.
func (d *Dashboard) conversations(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 100, maxConversations)
	if err != nil {
		return err
	}
	cs, err := d.opt.Conversations.List(r.Context(), auth.From(r.Context()), r.URL.Query().Get("agent"), limit)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"conversations": cs})
	return nil
}

// conversation serves GET /dashboard/api/conversations/{id} (?after=,
// ?limit=): the conversation and its messages, as MAMP shows them.
func (d *Dashboard) conversation(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 100, maxConvMessages)
	if err != nil {
		return err
	}
	var after int64
	if v := r.URL.Query().Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "after must be a message sequence number")
		}
	}
	c, err := d.opt.Conversations.Get(r.Context(), auth.From(r.Context()), r.PathValue("id"), after, limit)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, c)
	return nil
}

// AgentView is one agent in GET /dashboard/api/agents.
type AgentView struct {
	ID           string            `json:"agent_id"`
	URI          string            `json:"uri"`
	Status       string            `json:"status"` // alive or expired
	Protocol     string            `json:"protocol,omitempty"`
	Endpoint     core.EndpointKind `json:"endpoint"`
	Capabilities []string          `json:"capabilities"`
	Card         core.Card         `json:"card"`
	LastSeen     time.Time         `json:"last_seen"`
	ExpiresAt    time.Time         `json:"expires_at"`
	RegisteredAt time.Time         `json:"registered_at"`
	Queued       int               `json:"queued"`
}

// maxAgents bounds the agents listed.
const maxAgents = 1000

func (d *Dashboard) agents(w http.ResponseWriter, r *http.Request) error {
	p := auth.From(r.Context())
	list, err := d.relay.ListAgents(r.Context(), p, core.AgentFilter{Limit: maxAgents})
	if err != nil {
		return err
	}
	now := d.relay.Clock().Now()
	out := make([]AgentView, 0, len(list))
	for _, a := range list {
		v := AgentView{ID: a.ID, URI: d.relay.URI(a.ID), Status: "expired", Protocol: a.Protocol, Endpoint: a.Endpoint.Kind,
			Capabilities: a.Capabilities, Card: a.Card, LastSeen: a.LastSeen, ExpiresAt: a.ExpiresAt, RegisteredAt: a.RegisteredAt}
		if v.Capabilities == nil {
			v.Capabilities = []string{}
		}
		if a.Alive(now) {
			v.Status = "alive"
		}
		if v.Queued, err = d.relay.QueueDepth(r.Context(), p, a.ID); err != nil {
			return err
		}
		out = append(out, v)
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agents": out, "now": now, "truncated": len(list) == maxAgents})
	return nil
}

func (d *Dashboard) receipt(w http.ResponseWriter, r *http.Request) error {
	rc, err := d.relay.ReceiptFor(r.Context(), auth.From(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, rc)
	return nil
}

// Limits of the AMP pressure history kept in memory.
const (
	maxSessions      = 100
	maxPoints        = 240
	maxSessionsShown = 100
)

// PressurePoint is one sample of a session's pressure.
type PressurePoint struct {
	At       time.Time `json:"at"`
	Pressure int       `json:"pressure"`
}

// SessionView is one AMP session in GET /dashboard/api/amp/sessions.
type SessionView struct {
	amp.State
	// Source is "store" (the hub's store: /v4/tick) or "files" (the AMP
	// state directory: the MCP amp tool).
	Source  string          `json:"source"`
	History []PressurePoint `json:"history"`
}

type sessionHistory struct {
	last   time.Time
	points []PressurePoint
}

// Run samples AMP sessions until ctx ends, recording a point whenever a
// session's state changes, so the dashboard can draw pressure over time.
// The history lives in this process only (the message flow charts read
// the store instead: see FlowStore).
func (d *Dashboard) Run(ctx context.Context) {
	t := time.NewTicker(d.opt.SamplePeriod)
	defer t.Stop()
	for {
		d.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// loadSessions reads the sessions of both sources, most recent first.
func (d *Dashboard) loadSessions(ctx context.Context) ([]SessionView, error) {
	states, err := d.amp.Sessions(ctx, maxSessionsShown)
	if err != nil {
		return nil, err
	}
	out := make([]SessionView, 0, len(states))
	for _, s := range states {
		out = append(out, SessionView{State: s, Source: "store"})
	}
	if d.opt.AMPStateDir != "" {
		files, _ := filepath.Glob(filepath.Join(d.opt.AMPStateDir, "*.json"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			var s amp.State
			if json.Unmarshal(b, &s) == nil && s.SessionID != "" {
				out = append(out, SessionView{State: s, Source: "files"})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastActivity.After(out[j].LastActivity) })
	if len(out) > maxSessionsShown {
		out = out[:maxSessionsShown]
	}
	return out, nil
}

func (d *Dashboard) sample(ctx context.Context) []SessionView {
	ss, err := d.loadSessions(ctx)
	if err != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range ss {
		s := &ss[i]
		key := s.Source + ":" + s.SessionID
		h := d.history[key]
		if h == nil {
			if len(d.history) >= maxSessions {
				d.evictOldest()
			}
			h = &sessionHistory{}
			d.history[key] = h
		}
		at := s.LastActivity
		if at.IsZero() {
			at = s.StartedAt
		}
		if len(h.points) == 0 || at.After(h.last) {
			h.points = append(h.points, PressurePoint{At: at, Pressure: s.Pressure})
			if len(h.points) > maxPoints {
				h.points = h.points[len(h.points)-maxPoints:]
			}
			h.last = at
		}
		s.History = append([]PressurePoint(nil), h.points...)
	}
	return ss
}

func (d *Dashboard) evictOldest() {
	var oldest string
	var at time.Time
	for k, h := range d.history {
		if oldest == "" || h.last.Before(at) {
			oldest, at = k, h.last
		}
	}
	delete(d.history, oldest)
}

func (d *Dashboard) ampSessions(w http.ResponseWriter, r *http.Request) error {
	ss := d.sample(r.Context())
	if ss == nil {
		ss = []SessionView{}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"sessions": ss,
		"note": "pressure history is sampled by this hub process while it runs (a point each time a session's state changes); it is not persisted"})
	return nil
}
