package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/dashboard"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type req struct {
	method, path string
	token        string
	cookie       *http.Cookie
	header       map[string]string
	form         url.Values
	body         any
}

func (r req) do(t *testing.T, base string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch {
	case r.form != nil:
		rd = strings.NewReader(r.form.Encode())
	case r.body != nil:
		b, _ := json.Marshal(r.body)
		rd = bytes.NewReader(b)
	}
	hr, _ := http.NewRequest(r.method, base+r.path, rd)
	hr.Header.Set("Content-Type", "application/json")
	if r.form != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.cookie != nil {
		hr.AddCookie(r.cookie)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	res, err := noRedirect.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

func sessionCookie(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == dashboard.CookieName && c.Value != "" {
			return c
		}
	}
	return nil
}

func login(t *testing.T, base, token string) *http.Cookie {
	t.Helper()
	res, body := req{method: "POST", path: "/dashboard/login", form: url.Values{"token": {token}}}.do(t, base)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/dashboard/" {
		t.Fatalf("login: %d %s %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	c := sessionCookie(res)
	if c == nil {
		t.Fatal("login set no session cookie")
	}
	return c
}

func TestPageAndSecurityHeaders(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	for _, path := range []string{"/dashboard/", "/dashboard/app.js", "/dashboard/app.css", "/dashboard/api/agents"} {
		res, body := req{method: "GET", path: path}.do(t, base)
		if path != "/dashboard/api/agents" && res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, res.StatusCode)
		}
		if got := res.Header.Get("Content-Security-Policy"); got != dashboard.ContentSecurityPolicy {
			t.Errorf("GET %s: CSP %q", path, got)
		}
		if !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: CSP lacks default-src 'self'", path)
		}
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if got := res.Header.Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
		if bytes.Contains(body, []byte(h.AdminToken)) {
			t.Errorf("GET %s: the admin token is in the response", path)
		}
	}
	res, body := req{method: "GET", path: "/dashboard/"}.do(t, base)
	if !bytes.Contains(body, []byte(`<script src="/dashboard/app.js"`)) || bytes.Contains(body, []byte("<script>")) {
		t.Errorf("index must load its script from /dashboard/app.js and have no inline script:\n%s", body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("index content type %q", ct)
	}
	if res, _ := (req{method: "GET", path: "/dashboard"}).do(t, base); res.StatusCode != http.StatusMovedPermanently {
		t.Errorf("GET /dashboard: %d, want a redirect to /dashboard/", res.StatusCode)
	}
}

func TestAPIAuth(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	// An agent and its credential: not the operator.
	_, b := req{method: "POST", path: "/atp/register", body: map[string]any{"agent_id": "a1", "lease_seconds": 60}}.do(t, base)
	var reg struct{ Token string }
	_ = json.Unmarshal(b, &reg)
	if reg.Token == "" {
		t.Fatalf("register: %s", b)
	}
	cookie := login(t, base, h.AdminToken)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/dashboard/" || cookie.MaxAge <= 0 {
		t.Errorf("cookie attributes: %+v", cookie)
	}
	if strings.Contains(cookie.Value, h.AdminToken) || strings.Contains(cookie.Value, strings.TrimPrefix(h.AdminToken, "sba_")) {
		t.Error("the cookie carries the admin token")
	}
	tampered := *cookie
	tampered.Value = cookie.Value[:len(cookie.Value)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", cookie.Value[len(cookie.Value)-1])+1)%16])
	made := *cookie
	made.Value = strings.Repeat("ab", 32) // a session id of the right shape that was never issued

	paths := []string{"/dashboard/api/agents", "/dashboard/api/dlq", "/dashboard/api/conversations",
		"/dashboard/api/amp/sessions", "/dashboard/api/receipts/nope", "/dashboard/api/conversations/nope",
		"/dashboard/api/messages", "/dashboard/api/stats", "/dashboard/api/agents/nope"}
	tests := []struct {
		name   string
		r      req
		status int
	}{
		{"no credential", req{}, http.StatusUnauthorized},
		{"wrong bearer token", req{token: "sba_wrong"}, http.StatusUnauthorized},
		{"agent token", req{token: reg.Token}, http.StatusForbidden}, // a credential, but not the operator's
		{"tampered cookie", req{cookie: &tampered}, http.StatusUnauthorized},
		{"made-up session id", req{cookie: &made}, http.StatusUnauthorized},
		{"admin bearer token", req{token: h.AdminToken}, http.StatusOK},
		{"session cookie", req{cookie: cookie}, http.StatusOK},
	}
	for _, tc := range tests {
		for _, p := range paths {
			r := tc.r
			r.method, r.path = "GET", p
			res, body := r.do(t, base)
			want := tc.status
			if want == http.StatusOK && strings.HasSuffix(p, "/nope") {
				want = http.StatusNotFound // authorised, but nothing there
			}
			if res.StatusCode != want {
				t.Errorf("%s: GET %s = %d, want %d (%s)", tc.name, p, res.StatusCode, want, body)
			}
		}
	}
	// The cookie is good for the dashboard only, not the hub's own routes.
	if res, _ := (req{method: "GET", path: "/v1/dlq", cookie: cookie}).do(t, base); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/dlq with the dashboard cookie: %d, want 401", res.StatusCode)
	}
	// Session endpoint says who we are without leaking anything.
	_, b = req{method: "GET", path: "/dashboard/api/session"}.do(t, base)
	if !strings.Contains(string(b), `"authenticated":false`) {
		t.Errorf("anonymous session: %s", b)
	}
	_, b = req{method: "GET", path: "/dashboard/api/session", cookie: cookie}.do(t, base)
	if !strings.Contains(string(b), `"authenticated":true`) {
		t.Errorf("logged-in session: %s", b)
	}
}

func TestLoginRefusals(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	tests := []struct {
		name     string
		r        req
		status   int
		location string
	}{
		{"wrong token", req{form: url.Values{"token": {"sba_wrong"}}}, http.StatusSeeOther, "/dashboard/?login=failed"},
		{"empty token", req{form: url.Values{"token": {""}}}, http.StatusSeeOther, "/dashboard/?login=failed"},
		{"cross-site origin", req{form: url.Values{"token": {h.AdminToken}}, header: map[string]string{"Origin": "http://evil.example"}}, http.StatusForbidden, ""},
		{"cross-site fetch", req{form: url.Values{"token": {h.AdminToken}}, header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden, ""},
		{"same-site fetch", req{form: url.Values{"token": {h.AdminToken}}, header: map[string]string{"Sec-Fetch-Site": "same-site"}}, http.StatusForbidden, ""},
		{"cross-site with matching-looking origin", req{form: url.Values{"token": {h.AdminToken}}, header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "null"}}, http.StatusForbidden, ""},
		{"null origin, no fetch metadata", req{form: url.Values{"token": {h.AdminToken}}, header: map[string]string{"Origin": "null"}}, http.StatusForbidden, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.method, r.path = "POST", "/dashboard/login"
			res, body := r.do(t, base)
			if res.StatusCode != tc.status || res.Header.Get("Location") != tc.location {
				t.Errorf("%d %q (%s), want %d %q", res.StatusCode, res.Header.Get("Location"), body, tc.status, tc.location)
			}
			if sessionCookie(res) != nil {
				t.Error("a refused login set a session cookie")
			}
		})
	}
	// A browser form post under Referrer-Policy no-referrer: Origin null,
	// but the fetch metadata says same-origin.
	res0, _ := req{method: "POST", path: "/dashboard/login", form: url.Values{"token": {h.AdminToken}},
		header: map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}}.do(t, base)
	if res0.StatusCode != http.StatusSeeOther || sessionCookie(res0) == nil {
		t.Errorf("same-origin form login with Origin null: %d", res0.StatusCode)
	}
	// Same-origin login works with an Origin header too.
	u, _ := url.Parse(base)
	res, _ := req{method: "POST", path: "/dashboard/login", form: url.Values{"token": {h.AdminToken}},
		header: map[string]string{"Origin": "http://" + u.Host}}.do(t, base)
	if res.StatusCode != http.StatusSeeOther || sessionCookie(res) == nil {
		t.Errorf("same-origin login: %d", res.StatusCode)
	}
}

func TestTokenLinkExchange(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	res, _ := req{method: "GET", path: "/dashboard/?token=" + url.QueryEscape(h.AdminToken)}.do(t, base)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/dashboard/" {
		t.Fatalf("token link: %d %q, want a redirect to /dashboard/ without the token", res.StatusCode, res.Header.Get("Location"))
	}
	c := sessionCookie(res)
	if c == nil {
		t.Fatal("token link set no cookie")
	}
	if r, _ := (req{method: "GET", path: "/dashboard/api/agents", cookie: c}).do(t, base); r.StatusCode != http.StatusOK {
		t.Errorf("API with the exchanged cookie: %d", r.StatusCode)
	}
	res, _ = req{method: "GET", path: "/dashboard/?token=sba_wrong"}.do(t, base)
	if res.Header.Get("Location") != "/dashboard/?login=failed" || sessionCookie(res) != nil {
		t.Errorf("bad token link: %q, cookie %v", res.Header.Get("Location"), sessionCookie(res))
	}
}

func TestReplayNeedsCSRFTokenWithCookie(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	c := login(t, base, h.AdminToken)
	token := csrf(t, base, c)
	other := csrf(t, base, login(t, base, h.AdminToken))
	path := "/dashboard/api/dlq/unknown-id/replay"
	u, _ := url.Parse(base)
	tests := []struct {
		name string
		r    req
		want int
	}{
		{"cookie, no CSRF token", req{cookie: c}, http.StatusForbidden},
		{"cookie, the old static header", req{cookie: c, header: map[string]string{"X-Switchboard-Dashboard": "1"}}, http.StatusForbidden},
		{"cookie, a wrong token", req{cookie: c, header: map[string]string{dashboard.HeaderCSRF: strings.Repeat("0", 64)}}, http.StatusForbidden},
		{"cookie, another session's token", req{cookie: c, header: map[string]string{dashboard.HeaderCSRF: other}}, http.StatusForbidden},
		{"cookie and token, but cross-site", req{cookie: c, header: map[string]string{dashboard.HeaderCSRF: token, "Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden},
		{"no credential", req{}, http.StatusUnauthorized},
		// Past the checks, the hub's replay route answers: unknown id.
		{"cookie and its token", req{cookie: c, header: map[string]string{dashboard.HeaderCSRF: token}}, http.StatusNotFound},
		{"cookie and its token, same origin", req{cookie: c, header: map[string]string{dashboard.HeaderCSRF: token, "Origin": "http://" + u.Host, "Sec-Fetch-Site": "same-origin"}}, http.StatusNotFound},
		{"bearer token needs none", req{token: h.AdminToken}, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			r.method, r.path = "POST", path
			if res, b := r.do(t, base); res.StatusCode != tt.want {
				t.Errorf("%d %s, want %d", res.StatusCode, b, tt.want)
			}
		})
	}
}

func TestDevModeNeedsNoLogin(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	if res, b := (req{method: "GET", path: "/dashboard/api/agents"}).do(t, base); res.StatusCode != http.StatusOK {
		t.Errorf("dev mode API: %d %s", res.StatusCode, b)
	}
}

// TestEventStreamWithCookie reads the forwarded SSE stream with the cookie
// alone (what EventSource does) and sees a registration arrive.
func TestEventStreamWithCookie(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	c := login(t, base, h.AdminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "GET", base+"/dashboard/api/events?type=registered", nil)
	hr.AddCookie(c)
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(res.Body)
	if _, err := rd.ReadString('\n'); err != nil { // the stream's opening comment
		t.Fatal(err)
	}
	req{method: "POST", path: "/atp/register", token: h.AdminToken, body: map[string]any{"agent_id": "streamed", "lease_seconds": 60}}.do(t, base)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before the registration: %v", err)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"agent":"streamed"`) {
			return
		}
	}
}

// TestAMPSessionsShowPressure ticks an AMP session through the hub and
// reads it, with its pressure history, from the dashboard API.
func TestAMPSessionsShowPressure(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	_, b := req{method: "GET", path: "/dashboard/api/amp/sessions", token: h.AdminToken}.do(t, base)
	var out struct {
		Sessions []dashboard.SessionView `json:"sessions"`
		Note     string                  `json:"note"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Sessions) != 0 || out.Note == "" {
		t.Fatalf("empty hub: %s", b)
	}
	for i := 0; i < 3; i++ {
		res, b := req{method: "POST", path: "/v4/tick", token: h.AdminToken, body: map[string]any{"session_id": "s-dash", "event": "PostToolUseFailure",
			"tool_name": "Bash", "tool_result": map[string]any{"exit_code": 1, "stderr": "boom"}, "success": false}}.do(t, base)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("tick: %d %s", res.StatusCode, b)
		}
	}
	_, b = req{method: "GET", path: "/dashboard/api/amp/sessions", token: h.AdminToken}.do(t, base)
	if err := json.Unmarshal(b, &out); err != nil || len(out.Sessions) != 1 {
		t.Fatalf("sessions after ticks: %s", b)
	}
	s := out.Sessions[0]
	if s.SessionID != "s-dash" || s.Source != "store" || len(s.History) == 0 {
		t.Fatalf("session: %+v", s)
	}
	if last := s.History[len(s.History)-1]; last.Pressure != s.Pressure {
		t.Errorf("history ends at pressure %d, session is at %d", last.Pressure, s.Pressure)
	}
	if s.Failures == 0 {
		t.Errorf("three failing ticks recorded no failure: %+v", s.State)
	}
}

// TestHistoryAPI searches the stored messages, filtered and a page at a
// time, and reads an agent's page.
func TestHistoryAPI(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	tok := h.AdminToken
	for _, id := range []string{"alpha", "beta", "gamma"} {
		req{method: "POST", path: "/atp/register", token: tok, body: map[string]any{"agent_id": id}}.do(t, base)
	}
	send := func(id, from, to, text string) {
		res, b := req{method: "POST", path: "/atp/send", token: tok, body: map[string]any{"atp_version": "1.0", "message_id": id,
			"sender": from, "receiver": to, "type": "note", "payload": map[string]any{"text": text}}}.do(t, base)
		if res.StatusCode != 200 {
			t.Fatalf("send %s: %d %s", id, res.StatusCode, b)
		}
	}
	send("h-1", "alpha", "beta", "first words")
	send("h-2", "beta", "gamma", "a needle here")
	send("h-3", "alpha", "gamma", "third")
	send("h-4", "gamma", "alpha", "fourth")
	type page struct {
		Messages []dashboard.MessageView `json:"messages"`
		More     bool                    `json:"more"`
		Next     int64                   `json:"next_before"`
	}
	get := func(q string) page {
		t.Helper()
		res, b := req{method: "GET", path: "/dashboard/api/messages?" + q, token: tok}.do(t, base)
		var p page
		if res.StatusCode != 200 || json.Unmarshal(b, &p) != nil {
			t.Fatalf("messages?%s: %d %s", q, res.StatusCode, b)
		}
		return p
	}
	ids := func(p page) string {
		var out []string
		for _, m := range p.Messages {
			out = append(out, m.MessageID)
		}
		return strings.Join(out, ",")
	}
	tests := []struct{ q, want string }{
		{"", "h-4,h-3,h-2,h-1"},
		{"agent=alpha", "h-4,h-3,h-1"},
		{"sender=alpha&receiver=gamma", "h-3"},
		{"q=needle", "h-2"},
		{"status=queued&protocol=atp", "h-4,h-3,h-2,h-1"},
		{"status=delivered", ""},
	}
	for _, tt := range tests {
		if got := ids(get(tt.q)); got != tt.want {
			t.Errorf("?%s: %s, want %s", tt.q, got, tt.want)
		}
	}
	first := get("limit=3")
	if ids(first) != "h-4,h-3,h-2" || !first.More || first.Next == 0 {
		t.Fatalf("first page: %s more %v next %d", ids(first), first.More, first.Next)
	}
	second := get("limit=3&before=" + strconv.FormatInt(first.Next, 10))
	if ids(second) != "h-1" || second.More {
		t.Fatalf("second page: %s more %v", ids(second), second.More)
	}
	if p := get("q=needle"); p.Messages[0].Preview != "a needle here" || p.Messages[0].Status != "queued" {
		t.Errorf("view: %+v", p.Messages[0])
	}
	if res, _ := (req{method: "GET", path: "/dashboard/api/messages?limit=9999", token: tok}).do(t, base); res.StatusCode != 400 {
		t.Errorf("limit 9999: %d, want 400", res.StatusCode)
	}
	res, b := req{method: "GET", path: "/dashboard/api/agents/gamma", token: tok}.do(t, base)
	var detail struct {
		Agent    dashboard.AgentView     `json:"agent"`
		Messages []dashboard.MessageView `json:"messages"`
	}
	if res.StatusCode != 200 || json.Unmarshal(b, &detail) != nil || detail.Agent.ID != "gamma" || detail.Agent.Queued != 2 || len(detail.Messages) != 3 {
		t.Fatalf("agent page: %d %s", res.StatusCode, b)
	}
	res, b = req{method: "GET", path: "/dashboard/api/stats", token: tok}.do(t, base)
	if res.StatusCode != 200 || !strings.Contains(string(b), `"buckets":[{`) {
		t.Fatalf("stats: %d %s", res.StatusCode, b)
	}
}

// TestConversationsAPI reads conversations through the dashboard, which
// calls the MAMP adapter's conversation functions (no forwarded route):
// the list, one conversation with its parts as MAMP content, an unknown
// one, and bad query values.
func TestConversationsAPI(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	tok := h.AdminToken
	for _, id := range []string{"alpha", "beta"} {
		req{method: "POST", path: "/atp/register", token: tok, body: map[string]any{"agent_id": id}}.do(t, base)
	}
	for i, text := range []string{"hello beta", "hello again"} {
		res, b := req{method: "POST", path: "/atp/send", token: tok, body: map[string]any{"atp_version": "1.0",
			"message_id": "c-" + strconv.Itoa(i), "conversation_id": "conv-1", "sender": "alpha", "receiver": "beta",
			"type": "note", "payload": map[string]any{"text": text}}}.do(t, base)
		if res.StatusCode != 200 {
			t.Fatalf("send: %d %s", res.StatusCode, b)
		}
	}
	var list struct {
		Conversations []struct {
			ID           string `json:"conversation_id"`
			MessageCount int    `json:"message_count"`
			Participants []struct {
				AgentID string `json:"agent_id"`
			} `json:"participants"`
		} `json:"conversations"`
	}
	res, b := req{method: "GET", path: "/dashboard/api/conversations", token: tok}.do(t, base)
	if res.StatusCode != 200 || json.Unmarshal(b, &list) != nil || len(list.Conversations) != 1 ||
		list.Conversations[0].ID != "conv-1" || list.Conversations[0].MessageCount != 2 || len(list.Conversations[0].Participants) != 2 {
		t.Fatalf("list: %d %s", res.StatusCode, b)
	}
	var conv struct {
		ID       string `json:"conversation_id"`
		Messages []struct {
			ID      string `json:"message_id"`
			From    string `json:"from"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	res, b = req{method: "GET", path: "/dashboard/api/conversations/conv-1?limit=1&after=0", token: tok}.do(t, base)
	if res.StatusCode != 200 || json.Unmarshal(b, &conv) != nil || conv.ID != "conv-1" || len(conv.Messages) != 1 ||
		conv.Messages[0].ID != "c-0" || !strings.HasPrefix(conv.Messages[0].From, "agent://") || !strings.Contains(string(b), "hello beta") {
		t.Fatalf("conversation: %d %s", res.StatusCode, b)
	}
	tests := []struct {
		path string
		want int
	}{
		{"/dashboard/api/conversations/unknown", http.StatusNotFound},
		{"/dashboard/api/conversations?limit=0", http.StatusBadRequest},
		{"/dashboard/api/conversations/conv-1?limit=5000", http.StatusBadRequest},
		{"/dashboard/api/conversations/conv-1?after=-1", http.StatusBadRequest},
		{"/dashboard/api/conversations?agent=alpha", http.StatusOK},
	}
	for _, tt := range tests {
		if res, b := (req{method: "GET", path: tt.path, token: tok}).do(t, base); res.StatusCode != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.path, res.StatusCode, b, tt.want)
		}
	}
}
