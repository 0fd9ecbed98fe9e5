// Package dashboard serves the hub's operator web dashboard at /dashboard/:
// agents with their status, cards and last seen time; the live message flow
// with filters; conversations with multimodal parts rendered; receipts;
// dead letters with replay; and AMP sessions with their pressure over time.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (no
// CDN, no build step). Its data comes from /dashboard/api/*, which either
// forwards to the hub's own operator and MAMP routes (the event stream,
// dead letters, conversations) or answers read-only from the relay's store
// (agents, receipts, AMP sessions).
//
// Authentication: with auth on, every API call needs the operator. A
// browser's EventSource cannot send an Authorization header, so the
// operator logs in once with the admin token (a form POST, or a
// ?token= link exchanged at once for the cookie) and receives a short-lived
// HttpOnly, SameSite=Strict cookie scoped to /dashboard/, signed with a key
// derived from the admin token. The token itself is never written into the
// page. API calls may also carry the admin token as a bearer token. State
// changing calls (replay, logout) made with the cookie must carry the
// X-Switchboard-Dashboard header, which a cross-site form cannot send.
package dashboard

import (
	"context"
	"crypto/hmac"
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

// HeaderCSRF must be present on state-changing API calls authenticated by
// the cookie.
const HeaderCSRF = "X-Switchboard-Dashboard"

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
	// GET /v1/dlq, POST /v1/dlq/{id}/replay and the MAMP conversation
	// routes as the operator.
	Routes http.Handler
	// AMPStateDir, when set, is a directory of AMP session files
	// (amp.FileStore) shown beside the sessions in the hub's store.
	AMPStateDir string
	// SessionTTL is how long a login lasts [DefaultSessionTTL].
	SessionTTL time.Duration
	// SamplePeriod is how often AMP sessions are sampled for the pressure
	// history [2s].
	SamplePeriod time.Duration
}

// Dashboard serves the web dashboard.
type Dashboard struct {
	relay *core.Relay
	opt   Options
	key   []byte
	amp   *ampstore.Store
	files http.Handler

	mu      sync.Mutex
	history map[string]*sessionHistory
}

// Errors of New, matched with errors.Is.
var (
	// ErrNoToken means auth is on but no admin token was given.
	ErrNoToken = errors.New("dashboard: auth is on but no admin token is configured")
	// ErrNoRoutes means Options.Routes is missing.
	ErrNoRoutes = errors.New("dashboard: Options.Routes is required")
)

// New returns the dashboard of relay.
func New(relay *core.Relay, opt Options) (*Dashboard, error) {
	if !opt.Dev && opt.AdminToken == "" {
		return nil, ErrNoToken
	}
	if opt.Routes == nil {
		return nil, ErrNoRoutes
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
	return &Dashboard{relay: relay, opt: opt, key: deriveKey(opt.AdminToken),
		amp:     &ampstore.Store{Records: relay.Store(), Clock: relay.Clock()},
		files:   http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(sub)),
		history: map[string]*sessionHistory{}}, nil
}

// Mount adds the dashboard's routes to mux.
func (d *Dashboard) Mount(mux *http.ServeMux) {
	mux.Handle("GET /dashboard", http.RedirectHandler(Prefix, http.StatusMovedPermanently))
	mux.HandleFunc("GET /dashboard/{$}", d.index)
	mux.HandleFunc("GET /dashboard/", d.static)
	mux.HandleFunc("POST /dashboard/login", d.login)
	mux.HandleFunc("POST /dashboard/logout", d.logout)
	mux.HandleFunc("GET /dashboard/api/session", d.session)
	mux.HandleFunc("GET /dashboard/api/agents", d.api(d.agents))
	mux.HandleFunc("GET /dashboard/api/receipts/{id}", d.api(d.receipt))
	mux.HandleFunc("GET /dashboard/api/amp/sessions", d.api(d.ampSessions))
	mux.HandleFunc("GET /dashboard/api/events", d.api(d.forward("/v1/events")))
	mux.HandleFunc("GET /dashboard/api/dlq", d.api(d.forward("/v1/dlq")))
	mux.HandleFunc("POST /dashboard/api/dlq/{id}/replay", d.api(d.forwardID("/v1/dlq/", "/replay")))
	mux.HandleFunc("GET /dashboard/api/conversations", d.api(d.forward("/mamp/v1/conversations")))
	mux.HandleFunc("GET /dashboard/api/conversations/{id}", d.api(d.forwardID("/mamp/v1/conversations/", "")))
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

func (d *Dashboard) index(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	if tok := r.URL.Query().Get("token"); tok != "" {
		// A ?token= link: exchange it for the cookie and drop it from the
		// address bar (and history) at once.
		if d.checkToken(tok) {
			d.setCookie(w, r)
			http.Redirect(w, r, Prefix, http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, Prefix+"?login=failed", http.StatusSeeOther)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	d.files.ServeHTTP(w, r)
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

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		httperr.Write(w, http.StatusForbidden, httperr.CodeForbidden, "login must come from the dashboard's own page")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, "login form: "+err.Error())
		return
	}
	if !d.checkToken(strings.TrimSpace(r.PostForm.Get("token"))) {
		http.Redirect(w, r, Prefix+"?login=failed", http.StatusSeeOther)
		return
	}
	d.setCookie(w, r)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	if !sameOrigin(r) {
		httperr.Write(w, http.StatusForbidden, httperr.CodeForbidden, "logout must come from the dashboard's own page")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// deriveKey derives the cookie signing key from the admin token, so a
// rotated token ends every dashboard session and every hub instance
// sharing the token accepts the same cookies.
func deriveKey(adminToken string) []byte {
	mac := hmac.New(sha256.New, []byte(adminToken))
	mac.Write([]byte("switchboard dashboard cookie v1"))
	return mac.Sum(nil)
}

// cookieValue is "<expiry unix>.<nonce>.<hmac>".
func (d *Dashboard) cookieValue(exp time.Time) string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	body := strconv.FormatInt(exp.Unix(), 10) + "." + hex.EncodeToString(nonce[:])
	return body + "." + d.sign(body)
}

func (d *Dashboard) sign(body string) string {
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request) {
	exp := time.Now().Add(d.opt.SessionTTL)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: d.cookieValue(exp), Path: Prefix,
		MaxAge: int(d.opt.SessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// validCookie checks the session cookie's signature and expiry.
func (d *Dashboard) validCookie(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 {
		return false
	}
	body, sig := c.Value[:i], c.Value[i+1:]
	if !hmac.Equal([]byte(sig), []byte(d.sign(body))) {
		return false
	}
	j := strings.IndexByte(body, '.')
	if j < 0 {
		return false
	}
	exp, err := strconv.ParseInt(body[:j], 10, 64)
	if err != nil {
		return false
	}
	left := time.Until(time.Unix(exp, 0))
	return left > 0 && left <= d.opt.SessionTTL+time.Minute
}

// authorize reports how r may use the API: the operator by dev mode or
// bearer token (no CSRF exposure), or by the cookie.
func (d *Dashboard) authorize(r *http.Request) (ok, byCookie bool) {
	if d.opt.Dev || auth.Admin(r.Context()) == nil {
		return true, false
	}
	if d.validCookie(r) {
		return true, true
	}
	return false, false
}

func (d *Dashboard) session(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	ok, _ := d.authorize(r)
	httperr.JSON(w, http.StatusOK, map[string]any{"authenticated": ok, "dev": d.opt.Dev, "host": d.relay.Config().Host})
}

// api wraps an API handler: security headers, no caching, the operator's
// credential (and the CSRF header for cookie-authenticated writes), and
// the operator principal in the request's context.
func (d *Dashboard) api(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		w.Header().Set("Cache-Control", "no-store")
		ok, byCookie := d.authorize(r)
		if !ok {
			httperr.Write(w, http.StatusUnauthorized, httperr.CodeUnauthorized,
				"the dashboard API needs the operator: log in with the admin token or send it as a bearer token")
			return
		}
		if byCookie && r.Method != http.MethodGet && r.Method != http.MethodHead {
			if r.Header.Get(HeaderCSRF) == "" || !sameOrigin(r) {
				httperr.Write(w, http.StatusForbidden, httperr.CodeForbidden, "state-changing dashboard calls must come from the dashboard page (missing "+HeaderCSRF+" header)")
				return
			}
		}
		p := auth.From(r.Context())
		p.Admin = true
		h(w, r.WithContext(auth.With(r.Context(), p)))
	}
}

// forward serves a request with the hub route at path (same query).
func (d *Dashboard) forward(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { d.serveAt(w, r, path, path) }
}

// forwardID serves a request with the hub route prefix+{id}+suffix.
func (d *Dashboard) forwardID(prefix, suffix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		d.serveAt(w, r, prefix+id+suffix, prefix+url.PathEscape(id)+suffix)
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

func (d *Dashboard) agents(w http.ResponseWriter, r *http.Request) {
	st := d.relay.Store()
	list, err := st.ListAgents(r.Context(), core.AgentFilter{Limit: maxAgents})
	if err != nil {
		httperr.From(w, err)
		return
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
		if v.Queued, err = st.QueueDepth(r.Context(), a.ID); err != nil {
			httperr.From(w, err)
			return
		}
		out = append(out, v)
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agents": out, "now": now, "truncated": len(list) == maxAgents})
}

func (d *Dashboard) receipt(w http.ResponseWriter, r *http.Request) {
	rc, err := d.relay.Receipt(r.Context(), r.PathValue("id"))
	if err != nil {
		httperr.From(w, err)
		return
	}
	httperr.JSON(w, http.StatusOK, rc)
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
// The history lives in this process only.
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

func (d *Dashboard) ampSessions(w http.ResponseWriter, r *http.Request) {
	ss := d.sample(r.Context())
	if ss == nil {
		ss = []SessionView{}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"sessions": ss,
		"note": "pressure history is sampled by this hub process while it runs (a point each time a session's state changes); it is not persisted"})
}
