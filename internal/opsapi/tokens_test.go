package opsapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

func call(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

func register(t *testing.T, base, id string) string {
	t.Helper()
	code, out := call(t, "POST", base+"/atp/register", "", `{"agent_id":"`+id+`"}`)
	tok, _ := out["token"].(string)
	if code != http.StatusOK || tok == "" {
		t.Fatalf("register %s: %d %v", id, code, out)
	}
	return tok
}

func TestWhoami(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	worker := register(t, base, "worker")
	tests := []struct {
		name, token string
		code        int
		principal   string
	}{
		{"admin", h.AdminToken, 200, "admin"},
		{"agent", worker, 200, "agent:worker"},
		{"anonymous", "", 401, ""},
		{"unknown token", "sbk_nope", 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := call(t, "GET", base+"/v1/whoami", tt.token, "")
			if code != tt.code || (tt.principal != "" && out["principal"] != tt.principal) {
				t.Fatalf("%d %v; want %d %s", code, out, tt.code, tt.principal)
			}
		})
	}
}

// TestRotateAndRevoke checks the credential routes against the core's
// table (core.OpCredentials): the owner and the operator may, another
// agent and an anonymous caller may not, on both routes.
func TestRotateAndRevoke(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	tests := []struct {
		name   string
		method string
		caller func(own, other string) string
		agent  string
		code   int
	}{
		{"the operator rotates", "POST", func(string, string) string { return h.AdminToken }, "", 200},
		{"the agent rotates its own", "POST", func(own, _ string) string { return own }, "", 200},
		{"another agent may not rotate", "POST", func(_, other string) string { return other }, "", 403},
		{"anonymous may not rotate", "POST", func(string, string) string { return "" }, "", 401},
		{"unknown agent", "POST", func(string, string) string { return h.AdminToken }, "ghost", 404},
		{"the operator revokes", "DELETE", func(string, string) string { return h.AdminToken }, "", 200},
		{"the agent revokes its own", "DELETE", func(own, _ string) string { return own }, "", 200},
		{"another agent may not revoke", "DELETE", func(_, other string) string { return other }, "", 403},
		{"anonymous may not revoke", "DELETE", func(string, string) string { return "" }, "", 401},
		{"another agent learns nothing of an unknown agent", "DELETE", func(_, other string) string { return other }, "ghost", 403},
		{"the operator revokes an unknown agent", "DELETE", func(string, string) string { return h.AdminToken }, "ghost", 404},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "agent-" + string(rune('a'+i))
			own := register(t, base, id)
			other := register(t, base, id+"-other")
			target := id
			if tt.agent != "" {
				target = tt.agent
			}
			code, out := call(t, tt.method, base+"/v1/agents/"+target+"/token", tt.caller(own, other), "")
			if code != tt.code {
				t.Fatalf("%s: %d %v, want %d", tt.method, code, out, tt.code)
			}
			if msg, _ := out["message"].(string); code == 404 && strings.Count(msg, target) != 1 {
				t.Errorf("message %q should name %s once", msg, target)
			}
			oldCode, _ := call(t, "GET", base+"/v1/whoami", own, "")
			switch {
			case code != 200:
				if oldCode != 200 {
					t.Fatalf("a refused %s still took the agent's token away (%d)", tt.method, oldCode)
				}
			case tt.method == "POST":
				newTok, _ := out["token"].(string)
				if oldCode != 401 {
					t.Fatalf("the old token still works after a rotation (%d)", oldCode)
				}
				if c, who := call(t, "GET", base+"/v1/whoami", newTok, ""); c != 200 || who["principal"] != "agent:"+id {
					t.Fatalf("the new token: %d %v", c, who)
				}
			default:
				if oldCode != 401 {
					t.Fatalf("the token still works after revocation (%d)", oldCode)
				}
			}
		})
	}
}
