package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestSessionBounds: a caller's session over its bound ends its oldest;
// sessions over the bound for all callers are refused with 503 until one
// ends; sessionless (2026-07-28) requests are not bounded by either.
func TestSessionBounds(t *testing.T) {
	h, _ := hubtest.Start(t, hub.Options{Dev: true})
	srv := mcpadapter.New(h.Relay, mcpadapter.Options{MaxSessions: 3, MaxSessionsPerCaller: 2,
		Logger: slog.New(slog.DiscardHandler)})
	mcpHandler := srv.Handler()
	// The hub's auth middleware checks the caller's token and puts its
	// principal in the request's context; here a header names the agent.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := auth.Principal{AgentID: r.Header.Get("X-Test-Agent")}
		r.Header.Set("Authorization", "Bearer for-"+p.AgentID) // what the SDK's bearer check looks for
		mcpHandler.ServeHTTP(w, r.WithContext(auth.With(r.Context(), p)))
	}))
	defer ts.Close()
	url := ts.URL + "/mcp"

	open := func(agent string) (string, *http.Response) {
		t.Helper()
		resp := rawPost(t, url, initBody, map[string]string{"X-Test-Agent": agent})
		return resp.Header.Get("Mcp-Session-Id"), resp
	}
	mustOpen := func(agent string) string {
		t.Helper()
		id, resp := open(agent)
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("%s opens a session: %d %q", agent, resp.StatusCode, id)
		}
		return id
	}
	ping := func(agent, id string) int {
		t.Helper()
		return rawPost(t, url, `{"jsonrpc":"2.0","id":2,"method":"ping"}`,
			map[string]string{"X-Test-Agent": agent, "Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-11-25"}).StatusCode
	}

	a1, a2 := mustOpen("alice"), mustOpen("alice")
	a3 := mustOpen("alice") // one over alice's 2: her oldest ends
	waitfor.OK(t, "alice's oldest session to end after her third opened", func() error {
		code := ping("alice", a1)
		if code == http.StatusNotFound {
			return nil
		}
		if code != http.StatusOK {
			t.Fatalf("alice's oldest session after her third: ping %d, want 404 (ended)", code)
		}
		return fmt.Errorf("ping %d", code)
	})
	for _, id := range []string{a2, a3} {
		if code := ping("alice", id); code != http.StatusOK {
			t.Fatalf("alice's session %s: ping %d", id, code)
		}
	}
	b1 := mustOpen("bob") // 3 of 3 held
	_, resp := open("carol")
	var e struct{ Error, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error != "unavailable" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a session over the hub's bound: %d %+v Retry-After %q", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
	// Nobody's session was ended to make room.
	for _, s := range [][2]string{{"alice", a2}, {"alice", a3}, {"bob", b1}} {
		if code := ping(s[0], s[1]); code != http.StatusOK {
			t.Fatalf("%s's session after a refusal: ping %d", s[0], code)
		}
	}
	// A sessionless client is served while the sessions are full.
	hc := &http.Client{Transport: headerTransport{"X-Test-Agent", "dave"}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("sessionless client while sessions are full: %v", err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != mcpadapter.StatelessVersion {
		t.Fatalf("negotiated %q, want %q", v, mcpadapter.StatelessVersion)
	}
	if res := callTool(t, cs, "list_agents", map[string]any{}, nil); res.IsError {
		t.Fatal(resultText(res))
	}
	// bob deletes his session: its place is free again.
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("X-Test-Agent", "bob")
	req.Header.Set("Mcp-Session-Id", b1)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	dr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, dr.Body)
	dr.Body.Close()
	if dr.StatusCode/100 != 2 {
		t.Fatalf("DELETE bob's session: %d", dr.StatusCode)
	}
	c1 := mustOpen("carol")
	if code := ping("carol", c1); code != http.StatusOK {
		t.Fatalf("carol's session: ping %d", code)
	}
}

type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}
