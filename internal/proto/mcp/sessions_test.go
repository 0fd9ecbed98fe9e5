package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestDeleteEndsCallsInProgress: a session's DELETE is answered while a
// call of the session is still waiting (a check_inbox that would wait two
// minutes): the call is ended and its stream closes. Another caller's
// DELETE of the session is refused and ends nothing.
func TestDeleteEndsCallsInProgress(t *testing.T) {
	h, _ := hubtest.Start(t, hub.Options{Dev: true})
	srv := mcpadapter.New(h.Relay, mcpadapter.Options{ProgressEvery: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	mcpHandler := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := auth.Principal{AgentID: r.Header.Get("X-Test-Agent")}
		r.Header.Set("Authorization", "Bearer for-"+p.AgentID)
		mcpHandler.ServeHTTP(w, r.WithContext(auth.With(r.Context(), p)))
	}))
	defer ts.Close()
	url := ts.URL + "/mcp"
	resp := rawPost(t, url, initBody, map[string]string{"X-Test-Agent": "alice"})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", resp.StatusCode, sid)
	}
	hdr := map[string]string{"X-Test-Agent": "alice", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	rawPost(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr)

	// The call's answer is an event stream: its progress events show that
	// it is waiting on the hub; the stream ends when the call does.
	call := rawPost(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"check_inbox",
		"arguments":{"timeout_ms":120000},"_meta":{"progressToken":"p"}}}`, hdr)
	if call.StatusCode != http.StatusOK {
		t.Fatalf("check_inbox: %d", call.StatusCode)
	}
	progress, ended := make(chan string, 1000), make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(call.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/progress") {
				progress <- sc.Text()
			}
		}
	}()
	waitfor.Recv(t, "a progress event of the waiting check_inbox", progress)

	del := func(agent string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitfor.Timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
		req.Header.Set("X-Test-Agent", agent)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		dr, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s's DELETE of alice's session while a call of it waits: %v", agent, err)
		}
		dr.Body.Close()
		return dr.StatusCode
	}
	if code := del("mallory"); code != http.StatusForbidden {
		t.Fatalf("mallory's DELETE of alice's session: %d, want 403", code)
	}
	for range len(progress) {
		<-progress
	}
	waitfor.Recv(t, "a progress event after mallory's DELETE (the call still waits)", progress)
	if code := del("alice"); code != http.StatusNoContent {
		t.Fatalf("alice's DELETE: %d, want 204", code)
	}
	waitfor.Closed(t, "the check_inbox stream to end after the DELETE", ended)
}
