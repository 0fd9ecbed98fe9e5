package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/dashboard"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// csrf reads the session's CSRF token as the page does.
func csrf(t *testing.T, base string, c *http.Cookie) string {
	t.Helper()
	res, b := req{method: "GET", path: "/dashboard/api/session", cookie: c}.do(t, base)
	var s struct {
		Authenticated bool   `json:"authenticated"`
		CSRF          string `json:"csrf_token"`
	}
	if res.StatusCode != 200 || json.Unmarshal(b, &s) != nil || !s.Authenticated || len(s.CSRF) < 32 {
		t.Fatalf("session: %d %s", res.StatusCode, b)
	}
	return s.CSRF
}

func TestCookieAttributes(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	res, _ := req{method: "POST", path: "/dashboard/login", form: url.Values{"token": {h.AdminToken}}}.do(t, base)
	c := sessionCookie(res)
	if c == nil {
		t.Fatal("no cookie")
	}
	raw := res.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/dashboard/", "Max-Age="} {
		if !strings.Contains(raw, want) {
			t.Errorf("Set-Cookie %q lacks %s", raw, want)
		}
	}
	if strings.Contains(raw, "Secure") {
		t.Errorf("Secure on a plain-HTTP hub would lose the cookie: %q", raw)
	}
	if strings.Contains(c.Value, h.AdminToken) || len(c.Value) != 64 {
		t.Errorf("the cookie is not an opaque session id: %q", c.Value)
	}
}

// TestLogoutEndsTheSessionOnTheServer: after logout the same cookie, sent
// again (a copy kept by an attacker, say), opens nothing.
func TestLogoutEndsTheSessionOnTheServer(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	c := login(t, base, h.AdminToken)
	token := csrf(t, base, c)
	apis := []string{"/dashboard/api/agents", "/dashboard/api/dlq", "/dashboard/api/messages", "/dashboard/api/stats"}
	for _, p := range apis {
		if res, b := (req{method: "GET", path: p, cookie: c}).do(t, base); res.StatusCode != 200 {
			t.Fatalf("%s before logout: %d %s", p, res.StatusCode, b)
		}
	}
	// Logout without the CSRF token is refused (a cross-site logout).
	if res, _ := (req{method: "POST", path: "/dashboard/logout", cookie: c}).do(t, base); res.StatusCode != http.StatusForbidden {
		t.Fatalf("logout without the CSRF token: %d, want 403", res.StatusCode)
	}
	res, b := req{method: "POST", path: "/dashboard/logout", cookie: c, header: map[string]string{dashboard.HeaderCSRF: token}}.do(t, base)
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %s, Set-Cookie %q", res.StatusCode, b, res.Header.Get("Set-Cookie"))
	}
	for _, p := range apis {
		if res, _ := (req{method: "GET", path: p, cookie: c}).do(t, base); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with the logged-out cookie: %d, want 401", p, res.StatusCode)
		}
	}
	if res, _ := (req{method: "POST", path: "/dashboard/api/dlq/x/replay", cookie: c, header: map[string]string{dashboard.HeaderCSRF: token}}).do(t, base); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("replay with the logged-out cookie: %d, want 401", res.StatusCode)
	}
	// Another session is untouched by this logout.
	if other := login(t, base, h.AdminToken); other.Value == c.Value {
		t.Fatal("a new login reused the old session id")
	}
}

// TestSessionsBoundToTheAdminToken: a hub restarted with another admin
// token on the same store accepts none of the old sessions.
func TestSessionsBoundToTheAdminToken(t *testing.T) {
	dir := t.TempDir()
	_, base, stop := hubtest.StartStop(t, hub.Options{DataDir: dir, AdminToken: "sba_first"})
	c := login(t, base, "sba_first")
	stop()
	_, base2 := hubtest.Start(t, hub.Options{DataDir: dir, AdminToken: "sba_second"})
	if res, _ := (req{method: "GET", path: "/dashboard/api/agents", cookie: c}).do(t, base2); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("an old session after the admin token changed: %d, want 401", res.StatusCode)
	}
}
