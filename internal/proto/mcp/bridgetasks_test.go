package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// switchProxy is a reverse proxy whose hub can be replaced (a restarted
// hub listens on another port; the bridge keeps its URL).
//
// It reads each request's body before passing the request on. Passed as
// it comes, the body is the server's request body, which net/http's
// HTTP/1 server discards and closes as soon as the handler writes the
// response header, while the proxy's transport may still read it once
// more to check that nothing follows its Content-Length: that read fails
// with ErrBodyReadAfterClose, the transport closes its connection to the
// hub, and a long-lived answer (a listen's event stream) is cut a moment
// later. It happened only when the hub answered before the transport's
// last read, that is on a loaded machine.
type switchProxy struct {
	mu     sync.Mutex
	target *url.URL
}

func (p *switchProxy) set(base string) {
	u, _ := url.Parse(base)
	p.mu.Lock()
	p.target = u
	p.mu.Unlock()
}

func (p *switchProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	u := p.target
	p.mu.Unlock()
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1                    // event streams pass at once
	rp.ErrorLog = log.New(io.Discard, "", 0) // the stopped hub is expected
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rp.ServeHTTP(w, r)
}

// TestTasksThroughBridge: a host on stdio, bridged to a hub with auth on
// by the agent's token, runs tasks of both eras; the hub restarts (its
// store kept); tasks/get, tasks/list, tasks/result and tasks/cancel still
// work through the same bridge, the completion is notified to the host,
// and another agent's bridge sees none of these tasks.
func TestTasksThroughBridge(t *testing.T) {
	dir := t.TempDir()
	_, base, stop := hubtest.StartStop(t, hub.Options{DataDir: dir})
	alice, carol, bob := registerToken(t, base, "alice"), registerToken(t, base, "carol"), registerToken(t, base, "bob")
	proxy := &switchProxy{}
	proxy.set(base)
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	bridge := func(token string) *rawHost {
		return startHost(t, mcpadapter.Remote(mcpadapter.RemoteOptions{URL: ps.URL + "/mcp", Token: token,
			Logger: slog.New(slog.DiscardHandler)}))
	}
	host := bridge(alice)
	caps := host.initialize()
	if tc, _ := caps["tasks"].(map[string]any); tc == nil || tc["list"] == nil {
		t.Fatalf("capabilities.tasks through the bridge = %v", caps)
	}
	support := map[string]any{}
	for _, x := range host.request("tools/list", map[string]any{})["tools"].([]any) {
		if ex, ok := x.(map[string]any)["execution"].(map[string]any); ok {
			support[x.(map[string]any)["name"].(string)] = ex["taskSupport"]
		}
	}
	if support["send_message"] != "optional" || support["wait_for_reply"] != "optional" {
		t.Fatalf("taskSupport through the bridge = %v", support)
	}
	sent := host.tool("send_message", map[string]any{"to": "carol", "text": "review this"})
	msgID := sent["message_id"].(string)
	// 2025: wait_for_reply as a task, and one to cancel later.
	task := host.request("tools/call", map[string]any{"name": "wait_for_reply", "task": map[string]any{"ttl": 600000},
		"arguments": map[string]any{"message_id": msgID}})["task"].(map[string]any)
	id := task["taskId"].(string)
	other := host.request("tools/call", map[string]any{"name": "wait_for_reply", "task": map[string]any{},
		"arguments": map[string]any{}})["task"].(map[string]any)["taskId"].(string)
	// 2026: send_message declaring the extension answers a task handle.
	modernMeta := map[string]any{"io.modelcontextprotocol/protocolVersion": mcpadapter.StatelessVersion,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-host", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{mcpadapter.TasksExtension: map[string]any{}}}}
	created := host.request("tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{"to": "carol", "text": "second"},
		"_meta": modernMeta})
	if created["resultType"] != "task" || created["taskId"] == nil {
		t.Fatalf("2026 CreateTaskResult through the bridge = %v", created)
	}
	modernID := created["taskId"].(string)

	// The hub restarts on its store, behind the same address.
	stop()
	_, base2 := hubtest.Start(t, hub.Options{DataDir: dir})
	proxy.set(base2)

	if got := host.request("tasks/get", map[string]any{"taskId": id}); got["status"] != mcpadapter.TaskWorking || got["ttl"] != float64(600000) {
		t.Fatalf("tasks/get after the restart = %v", got)
	}
	list := host.request("tasks/list", map[string]any{})["tasks"].([]any)
	if len(list) != 2 {
		t.Fatalf("tasks/list after the restart = %v", list)
	}
	if c := host.request("tasks/cancel", map[string]any{"taskId": other}); c["status"] != mcpadapter.TaskCancelled {
		t.Fatalf("tasks/cancel = %v", c)
	}
	host.taskNote(other, mcpadapter.TaskCancelled) // heard on the session opened after the restart
	// carol answers; tasks/result gives the reply, and the host is told.
	if code := atpSend(t, base2, carol, map[string]any{"message_id": "ans", "sender": "carol", "receiver": "alice",
		"type": "task.result", "correlation_id": msgID, "payload": map[string]any{"text": "looks good"}}); code != http.StatusOK {
		t.Fatalf("carol's answer: %d", code)
	}
	res := host.request("tasks/result", map[string]any{"taskId": id})
	if sc, _ := res["structuredContent"].(map[string]any); sc["outcome"] != "reply" || sc["reply"].(map[string]any)["text"] != "looks good" {
		t.Fatalf("tasks/result = %v", res)
	}
	host.taskNote(id, mcpadapter.TaskCompleted)
	// 2026 tasks/get through the bridge, after the restart.
	if got := host.request("tasks/get", map[string]any{"taskId": modernID, "_meta": modernMeta}); got["resultType"] != "complete" || got["taskId"] != modernID {
		t.Fatalf("2026 tasks/get = %v", got)
	}

	// 2026 listen through the bridge: the send task completes when carol
	// takes the message.
	host.send(map[string]any{"jsonrpc": "2.0", "id": 900, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"taskIds": []string{modernID}}, "_meta": modernMeta}})
	next := func(method string) map[string]any {
		t.Helper()
		for {
			select {
			case m := <-host.notes:
				if m["method"] == method {
					return m["params"].(map[string]any)
				}
			case <-time.After(30 * time.Second):
				g := host.request("tasks/get", map[string]any{"taskId": modernID, "_meta": modernMeta})
				t.Fatalf("no %s within 30 s (task %v)", method, g)
			}
		}
	}
	if ack := next("notifications/subscriptions/acknowledged"); len(ack["notifications"].(map[string]any)["taskIds"].([]any)) != 1 {
		t.Fatalf("acknowledgement through the bridge = %v", ack)
	}
	if n := next("notifications/tasks"); n["taskId"] != modernID || n["status"] != mcpadapter.TaskWorking {
		t.Fatalf("current state through the bridge = %v", n)
	}
	// The task sends in the background (again, after the restart): pull
	// until its message is there.
	waitFor(t, "carol to pull the 2026 task's message", func() bool {
		var pulled struct {
			Messages []struct {
				Payload struct{ Text string }
			}
		}
		req, _ := http.NewRequest(http.MethodGet, base2+"/atp/pending/carol", nil)
		req.Header.Set("Authorization", "Bearer "+carol)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&pulled)
		for _, m := range pulled.Messages {
			if m.Payload.Text == "second" {
				return true
			}
		}
		return false
	})
	if n := next("notifications/tasks"); n["taskId"] != modernID || n["status"] != mcpadapter.TaskCompleted || n["result"] == nil {
		t.Fatalf("completion through the bridge = %v", n)
	}
	host.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 900, "_meta": modernMeta}})

	// Scoped to the caller: bob's bridge finds none of alice's tasks.
	bobs := bridge(bob)
	bobs.initialize()
	if e := bobs.errorOf("tasks/get", map[string]any{"taskId": id}); e["code"] != float64(-32602) {
		t.Fatalf("bob's tasks/get of alice's task: %v", e)
	}
	if list := bobs.request("tasks/list", map[string]any{})["tasks"].([]any); len(list) != 0 {
		t.Fatalf("bob's tasks/list = %v", list)
	}
	if e := bobs.errorOf("tasks/cancel", map[string]any{"taskId": modernID, "_meta": modernMeta}); e["code"] != float64(-32602) {
		t.Fatalf("bob's tasks/cancel of alice's task: %v", e)
	}
}

// TestBridgeDeletesTaskSession: the session of the 2025 era that the
// bridge opens with the hub for the host's tasks is deleted when the
// host leaves, not kept by the hub for its idle hour.
func TestBridgeDeletesTaskSession(t *testing.T) {
	h, _ := hubtest.Start(t, hub.Options{Dev: true})
	srv := mcpadapter.New(h.Relay, mcpadapter.Options{Records: h.Store, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	mcpHandler := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer for-alice") // what the SDK's bearer check looks for
		mcpHandler.ServeHTTP(w, r.WithContext(auth.With(r.Context(), auth.Principal{AgentID: "alice"})))
	}))
	t.Cleanup(ts.Close)
	sessions := func() int {
		n := 0
		for range srv.SDK().Sessions() {
			n++
		}
		return n
	}
	host := startHost(t, mcpadapter.Remote(mcpadapter.RemoteOptions{URL: ts.URL + "/mcp", Logger: slog.New(slog.DiscardHandler)}))
	host.initialize()
	task := host.request("tools/call", map[string]any{"name": "wait_for_reply", "task": map[string]any{},
		"arguments": map[string]any{"timeout_ms": 600000}})["task"].(map[string]any)
	if task["status"] != mcpadapter.TaskWorking {
		t.Fatalf("task = %v", task)
	}
	if n := sessions(); n == 0 {
		t.Fatal("the hub holds no session while the bridge runs a 2025 task")
	}
	host.stop()
	waitFor(t, "the bridge's sessions to be deleted when the host left", func() bool { return sessions() == 0 })
}
