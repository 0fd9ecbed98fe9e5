package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// noteTransport is the HTTP transport of the Go SDK's client, which also
// copies the notifications the SDK does not know (task status) off the
// event streams it reads into notes (the SDK's client drops them).
type noteTransport struct {
	agent string
	notes chan map[string]any
	// opened, if not nil, is closed when a standalone stream (a GET) is
	// answered with an event stream: the hub is listening for it.
	opened chan struct{}
	once   sync.Once
}

func (t *noteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.agent != "" {
		r = r.Clone(r.Context())
		r.Header.Set(mcpadapter.AgentHeader, t.agent)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	if r.Method == http.MethodGet && t.opened != nil {
		t.once.Do(func() { close(t.opened) })
	}
	pr, pw := io.Pipe()
	body := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(body, pw), closerFunc(func() error { pw.Close(); return body.Close() })}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m struct {
				Method string         `json:"method"`
				Params map[string]any `json:"params"`
			}
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(d), &m) == nil &&
				strings.HasPrefix(m.Method, "notifications/tasks") {
				m.Params["method"] = m.Method
				t.notes <- m.Params
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return resp, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// waitNote waits for a notification of task id with status.
func waitNote(t *testing.T, notes <-chan map[string]any, method, id, status string) map[string]any {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case n := <-notes:
			if n["method"] == method && n["taskId"] == id && n["status"] == status {
				return n
			}
		case <-timeout:
			t.Fatalf("no %s %s for task %s within 30 s", method, status, id)
		}
	}
}

// TestTaskStatusOverHTTP2025: the Go SDK's client, in a 2025-11-25
// session over Streamable HTTP, hears notifications/tasks/status on its
// standalone stream for the tasks of its caller, including one made by
// another session of the same caller, as each changes; a session of
// another agent does not hear of them.
func TestTaskStatusOverHTTP2025(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := startWorker(t, base, "w", nil, nil, make(chan struct{}), 0)
	ctx := context.Background()
	connect := func(agent string) (*sdk.ClientSession, chan map[string]any) {
		notes := make(chan map[string]any, 100)
		hc := &http.Client{Transport: &noteTransport{agent: agent, notes: notes}}
		c := sdk.NewClient(&sdk.Implementation{Name: "go-client", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc},
			&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs, notes
	}
	cs, notes := connect("")
	_, otherNotes := connect("someone-else")

	// Another session of the same caller makes a task of wait_for_reply
	// with params.task, which the SDK's client cannot send.
	resp := rawPost(t, base+"/mcp", initBody, nil)
	resp.Body.Close()
	hdr := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	rawPost(t, base+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr).Body.Close()
	rpc := func(body string) map[string]any {
		t.Helper()
		resp := rawPost(t, base+"/mcp", body, hdr)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := strings.TrimPrefix(sc.Text(), "data: ")
			var out map[string]any
			if json.Unmarshal([]byte(line), &out) == nil && out["id"] != nil {
				return out
			}
		}
		t.Fatalf("%s: no answer", body)
		return nil
	}
	var sent struct {
		MessageID string `json:"message_id"`
	}
	callTool(t, cs, "send_message", map[string]any{"to": "w", "text": "work"}, &sent)
	r := rpc(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait_for_reply","task":{"ttl":60000},"arguments":{"message_id":"` + sent.MessageID + `"}}}`)
	id := r["result"].(map[string]any)["task"].(map[string]any)["taskId"].(string)
	// A second task, cancelled: its change is notified too.
	r = rpc(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait_for_reply","task":{},"arguments":{}}}`)
	cancelled := r["result"].(map[string]any)["task"].(map[string]any)["taskId"].(string)
	rpc(`{"jsonrpc":"2.0","id":4,"method":"tasks/cancel","params":{"taskId":"` + cancelled + `"}}`)
	if n := waitNote(t, notes, "notifications/tasks/status", cancelled, mcpadapter.TaskCancelled); n["ttl"] == nil {
		t.Fatalf("2025 Task shape: %v", n)
	}
	close(w.release)
	n := waitNote(t, notes, "notifications/tasks/status", id, mcpadapter.TaskCompleted)
	if n["result"] != nil || n["pollInterval"] == nil {
		t.Fatalf("2025 Task shape: %v", n)
	}
	// The session stays usable after the injected events.
	callTool(t, cs, "list_agents", map[string]any{}, nil)
	select {
	case n := <-otherNotes:
		t.Fatalf("another agent's session heard %v", n)
	default:
	}
}

// TestTaskStatusListen2026: a 2026-07-28 host listens for its tasks with
// subscriptions/listen naming their ids: the acknowledgement agrees to
// its own task only, the current state comes first, and the completion
// is notified with the result inlined; without the extension the listen
// is refused -32021.
func TestTaskStatusListen2026(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{})
	alice, bob, carol := registerToken(t, base, "alice"), registerToken(t, base, "bob"), registerToken(t, base, "carol")
	r := modern(t, base, alice, "tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{"to": "carol", "text": "q"}}, false)
	msgID := r["result"].(map[string]any)["structuredContent"].(map[string]any)["message_id"].(string)
	r = modern(t, base, alice, "tools/call", map[string]any{"name": "wait_for_reply", "arguments": map[string]any{"message_id": msgID}}, true)
	id := r["result"].(map[string]any)["taskId"].(string)
	r = modern(t, base, bob, "tools/call", map[string]any{"name": "wait_for_reply", "arguments": map[string]any{}}, true)
	bobs := r["result"].(map[string]any)["taskId"].(string)

	listen := func(token string, withTasks bool) (*http.Response, *bufio.Scanner) {
		caps := map[string]any{}
		if withTasks {
			caps["extensions"] = map[string]any{mcpadapter.TasksExtension: map[string]any{}}
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": map[string]any{
			"notifications": map[string]any{"taskIds": []string{id, bobs, "nope"}},
			"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": mcpadapter.StatelessVersion,
				"io.modelcontextprotocol/clientInfo": map[string]any{"name": "raw", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": caps}}})
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", mcpadapter.StatelessVersion)
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, bufio.NewScanner(resp.Body)
	}
	next := func(sc *bufio.Scanner) map[string]any {
		t.Helper()
		for sc.Scan() {
			var m map[string]any
			// an event's data, or a JSON answer
			if d := strings.TrimPrefix(sc.Text(), "data: "); json.Unmarshal([]byte(d), &m) == nil {
				return m
			}
		}
		t.Fatalf("the listen stream ended: %v", sc.Err())
		return nil
	}
	_, sc := listen(alice, false)
	if e, _ := next(sc)["error"].(map[string]any); e == nil || e["code"] != float64(mcpadapter.CodeMissingCapability) {
		t.Fatalf("listen without the extension: %v", e)
	}
	_, sc = listen(alice, true)
	ack := next(sc)
	agreed := ack["params"].(map[string]any)["notifications"].(map[string]any)["taskIds"].([]any)
	if ack["method"] != "notifications/subscriptions/acknowledged" || len(agreed) != 1 || agreed[0] != id {
		t.Fatalf("acknowledgement = %v", ack)
	}
	if n := next(sc); n["method"] != "notifications/tasks" || n["params"].(map[string]any)["status"] != mcpadapter.TaskWorking {
		t.Fatalf("current state = %v", n)
	}
	if code := atpSend(t, base, carol, map[string]any{"message_id": "ans", "sender": "carol", "receiver": "alice",
		"type": "task.result", "correlation_id": msgID, "payload": map[string]any{"text": "the answer"}}); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	n := next(sc)
	p := n["params"].(map[string]any)
	sc2, _ := p["result"].(map[string]any)["structuredContent"].(map[string]any)
	if n["method"] != "notifications/tasks" || p["taskId"] != id || p["status"] != mcpadapter.TaskCompleted || sc2["outcome"] != "reply" {
		t.Fatalf("completion = %v", n)
	}
}

// TestTaskStatusListenStdio: a 2026-07-28 host of an embedded hub on
// stdio listens for its task with subscriptions/listen and hears the
// current state and then the completion; without the extension the
// listen is refused -32021.
func TestTaskStatusListenStdio(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Dev: true})
	release := make(chan struct{})
	startWorker(t, base, "slowpoke", nil, nil, release, 0)
	host := startHost(t, mcpadapter.Local(h.Relay, mcpadapter.Options{Caller: core.DevPrincipal(), Records: h.Store,
		Logger: slog.New(slog.DiscardHandler)}))
	meta := func(withTasks bool) map[string]any {
		caps := map[string]any{}
		if withTasks {
			caps["extensions"] = map[string]any{mcpadapter.TasksExtension: map[string]any{}}
		}
		return map[string]any{"io.modelcontextprotocol/protocolVersion": mcpadapter.StatelessVersion,
			"io.modelcontextprotocol/clientInfo": map[string]any{"name": "raw-host", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": caps}
	}
	sent := host.request("tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{"to": "slowpoke", "text": "work"},
		"_meta": meta(false)})["structuredContent"].(map[string]any)
	created := host.request("tools/call", map[string]any{"name": "wait_for_reply", "arguments": map[string]any{"message_id": sent["message_id"]},
		"_meta": meta(true)})
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("CreateTaskResult = %v", created)
	}
	listen := func(withTasks bool) map[string]any {
		return map[string]any{"notifications": map[string]any{"taskIds": []string{id, "nope"}}, "_meta": meta(withTasks)}
	}
	if e := host.errorOf("subscriptions/listen", listen(false)); e["code"] != float64(mcpadapter.CodeMissingCapability) {
		t.Fatalf("listen without the extension: %v", e)
	}
	host.send(map[string]any{"jsonrpc": "2.0", "id": 900, "method": "subscriptions/listen", "params": listen(true)})
	next := func(method string) map[string]any {
		t.Helper()
		for {
			select {
			case m := <-host.notes:
				if m["method"] == method {
					return m["params"].(map[string]any)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s within 30 s", method)
			}
		}
	}
	ack := next("notifications/subscriptions/acknowledged")
	if ids := ack["notifications"].(map[string]any)["taskIds"].([]any); len(ids) != 1 || ids[0] != id {
		t.Fatalf("acknowledgement = %v", ack)
	}
	if n := next("notifications/tasks"); n["taskId"] != id || n["status"] != mcpadapter.TaskWorking {
		t.Fatalf("current state = %v", n)
	}
	close(release)
	n := next("notifications/tasks")
	sc, _ := n["result"].(map[string]any)["structuredContent"].(map[string]any)
	if n["taskId"] != id || n["status"] != mcpadapter.TaskCompleted || sc["outcome"] != "reply" {
		t.Fatalf("completion = %v", n)
	}
	// The host ends the listen; the connection goes on.
	host.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 900, "_meta": meta(true)}})
	if got := host.request("tasks/get", map[string]any{"taskId": id, "_meta": meta(true)}); got["status"] != mcpadapter.TaskCompleted {
		t.Fatalf("tasks/get = %v", got)
	}
}
