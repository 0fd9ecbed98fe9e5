package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// TestAMPSessionsPerCredential: with auth on, two agents naming the same
// AMP session get two sessions, on amp_tick and on POST /v4/tick alike;
// one credential's session is the same on both faces.
func TestAMPSessionsPerCredential(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{})
	ctx := context.Background()
	register := func(id string) string {
		var reg struct{ Token string }
		if code := postJSON(t, base+"/atp/register", map[string]any{"agent_id": id}, &reg); code != http.StatusOK || reg.Token == "" {
			t.Fatalf("register %s: %d", id, code)
		}
		return reg.Token
	}
	alice, bob := register("amp-alice"), register("amp-bob")
	connect := func(token string) *sdk.ClientSession {
		hc := &http.Client{Transport: bearer{token}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).
			Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	mcpTick := func(cs *sdk.ClientSession, args map[string]any) float64 {
		var out mcpadapter.AMPTickOutput
		if res := callTool(t, cs, "amp_tick", args, &out); res.IsError {
			t.Fatalf("amp_tick: %s", resultText(res))
		}
		return out.Envelope["state"].(map[string]any)["pressure"].(float64)
	}
	giveUp := map[string]any{"session_id": "shared", "event": "UserPromptSubmit", "message": "I give up", "force": true}
	csA, csB := connect(alice), connect(bob)
	mcpTick(csA, giveUp)
	mcpTick(csA, giveUp)
	if p := mcpTick(csA, map[string]any{"session_id": "shared"}); p != 2 {
		t.Fatalf("alice's pressure over MCP %v, want 2", p)
	}
	if p := mcpTick(csB, map[string]any{"session_id": "shared"}); p != 0 {
		t.Fatalf("bob reads alice's MCP session: pressure %v", p)
	}

	httpTick := func(token, body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v4/tick", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var out map[string]any
		json.Unmarshal(data, &out)
		return resp.StatusCode, out
	}
	for range 3 {
		httpTick(bob, `{"session_id":"shared","event":"UserPromptSubmit","message":"I give up","force":true}`)
	}
	_, out := httpTick(bob, `{"session_id":"shared"}`)
	if p := out["amp"].(map[string]any)["state"].(map[string]any)["pressure"].(float64); p != 3 {
		t.Fatalf("bob's pressure over /v4/tick %v, want 3", p)
	}
	// alice's session is one across faces (her MCP ticks), not bob's.
	_, out = httpTick(alice, `{"session_id":"shared"}`)
	if p := out["amp"].(map[string]any)["state"].(map[string]any)["pressure"].(float64); p != 2 {
		t.Fatalf("alice's /v4/tick session: pressure %v, want her own 2 (not bob's 3)", p)
	}

	// The CORS preflight the reference answers.
	for _, path := range []string{"/v4/amp", "/v4/tick"} {
		req, _ := http.NewRequest(http.MethodOptions, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("OPTIONS %s: %d", path, resp.StatusCode)
		}
	}
}
