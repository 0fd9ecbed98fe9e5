package hub_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// TestUnmatchedRoutesAnswerJSON checks that a request no route matches gets
// the hub's JSON error (not ServeMux's plain text), and that matched routes
// and the mux's redirects are unchanged.
func TestUnmatchedRoutesAnswerJSON(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		name, method, path string
		status             int
		code               string // JSON error code; "" when the answer is not an error
		allow              string // a method the Allow header must name
		location           string // for redirects
	}{
		{"GET on a POST route", "GET", "/atp/send", 405, "method_not_allowed", "POST", ""},
		{"DELETE on a POST route", "DELETE", "/atp/register", 405, "method_not_allowed", "POST", ""},
		{"GET on AMP tick", "GET", "/v4/tick", 405, "method_not_allowed", "POST", ""},
		{"POST under the dashboard", "POST", "/dashboard/x", 405, "method_not_allowed", "GET", ""},
		{"unknown ATP path", "GET", "/atp/nope", 404, "not_found", "", ""},
		{"unknown MAMP path", "GET", "/mamp/v1/nope", 404, "not_found", "", ""},
		{"unknown A2A path", "GET", "/a2a/w/x/y", 404, "not_found", "", ""},
		{"unknown v4 path", "GET", "/v4/nope", 404, "not_found", "", ""},
		{"under MCP", "POST", "/mcp/nope", 404, "not_found", "", ""},
		{"outside the APIs", "GET", "/nope", 404, "not_found", "", ""},
		{"matched route", "GET", "/atp/agents", 200, "", "", ""},
		{"unclean path to a route", "GET", "//atp/agents", 307, "", "", "/atp/agents"},
		{"unclean path to no route", "GET", "/atp/x/../nope", 307, "", "", "/atp/nope"},
		{"trailing slash route", "GET", "/dashboard", 301, "", "", "/dashboard/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, base+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("%s %s = %d %s, want %d", c.method, c.path, resp.StatusCode, body, c.status)
			}
			if c.location != "" && resp.Header.Get("Location") != c.location {
				t.Errorf("Location = %q, want %q", resp.Header.Get("Location"), c.location)
			}
			if c.allow != "" && !strings.Contains(resp.Header.Get("Allow"), c.allow) {
				t.Errorf("Allow = %q, want it to name %s", resp.Header.Get("Allow"), c.allow)
			}
			if c.code == "" {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			var e struct {
				Error      string `json:"error"`
				Message    string `json:"message"`
				StatusCode int    `json:"status_code"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %q is not JSON: %v", body, err)
			}
			if e.Error != c.code || e.StatusCode != c.status || !strings.Contains(e.Message, c.method+" ") || !strings.Contains(e.Message, c.path) {
				t.Errorf("body = %+v, want code %s, status %d and a message naming %s %s", e, c.code, c.status, c.method, c.path)
			}
		})
	}
}

// TestRedirectToUnmatchedRouteAnswersJSON follows the mux's redirect for an
// unclean path that names no route: the redirect is kept, and where it
// leads answers the JSON 404.
func TestRedirectToUnmatchedRouteAnswersJSON(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	resp, err := http.Get(base + "//atp/nope")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	if resp.StatusCode != 404 || resp.Request.URL.Path != "/atp/nope" ||
		json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error != "not_found" {
		t.Fatalf("GET //atp/nope ended at %s with %d %q", resp.Request.URL.Path, resp.StatusCode, e.Error)
	}
}
