package mcp_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// modern sends one 2026-07-28 request (sessionless: version, client info
// and capabilities in _meta) over HTTP and returns the JSON-RPC response.
// withTasks declares the tasks extension.
func modern(t *testing.T, base, token, method string, params map[string]any, withTasks bool) map[string]any {
	t.Helper()
	caps := map[string]any{}
	if withTasks {
		caps["extensions"] = map[string]any{mcpadapter.TasksExtension: map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": mcpadapter.StatelessVersion,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "raw", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpadapter.StatelessVersion)
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	if strings.Contains(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				text = d
			}
		}
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s: %d %q", method, resp.StatusCode, raw)
	}
	return out
}

// pollTask polls tasks/get until the task leaves working.
func pollTask(t *testing.T, base, token, id string) map[string]any {
	t.Helper()
	var res map[string]any
	waitFor(t, "task "+id+" to end", func() bool {
		r := modern(t, base, token, "tasks/get", map[string]any{"taskId": id}, true)
		res, _ = r["result"].(map[string]any)
		return res != nil && res["status"] != mcpadapter.TaskWorking
	})
	return res
}

// TestTasks2026: under the tasks extension, send_message and
// wait_for_reply answer a task handle; tasks/get inlines the tool's
// result once completed; only the owner sees the task; a host that did
// not declare the extension is refused the tasks methods (-32021) and
// gets plain results.
func TestTasks2026(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{})
	alice, bob := registerToken(t, base, "alice"), registerToken(t, base, "bob")
	carol := registerToken(t, base, "carol")

	// send_message as a task: it ends when the message's receipt is final.
	r := modern(t, base, alice, "tools/call", map[string]any{"name": "send_message",
		"arguments": map[string]any{"to": "carol", "text": "task me"}}, true)
	created, _ := r["result"].(map[string]any)
	if created["resultType"] != "task" || created["taskId"] == nil || created["status"] != "working" || created["ttlMs"] == nil || created["task"] != nil {
		t.Fatalf("CreateTaskResult = %v", r)
	}
	sendTask := created["taskId"].(string)
	// Not bob's to see; not without the extension.
	if e, _ := modern(t, base, bob, "tasks/get", map[string]any{"taskId": sendTask}, true)["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Fatalf("bob's tasks/get: %v", e)
	}
	if e, _ := modern(t, base, alice, "tasks/get", map[string]any{"taskId": sendTask}, false)["error"].(map[string]any); e == nil || e["code"] != float64(-32021) {
		t.Fatalf("tasks/get without the extension: %v", e)
	}
	// carol pulls it: delivered, and the task completes with the receipt.
	// The task sends in the background: pull until the message is there.
	waitFor(t, "carol to pull the task's message", func() bool {
		var pulled struct{ Messages []map[string]any }
		req, _ := http.NewRequest(http.MethodGet, base+"/atp/pending/carol", nil)
		req.Header.Set("Authorization", "Bearer "+carol)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&pulled)
		return len(pulled.Messages) > 0
	})
	done := pollTask(t, base, alice, sendTask)
	result, _ := done["result"].(map[string]any)
	sc, _ := result["structuredContent"].(map[string]any)
	if done["status"] != mcpadapter.TaskCompleted || done["resultType"] != "complete" || sc["status"] != "delivered" {
		t.Fatalf("send task = %v", done)
	}
	msgID := sc["message_id"].(string)

	// wait_for_reply as a task, answered later by carol.
	r = modern(t, base, alice, "tools/call", map[string]any{"name": "wait_for_reply",
		"arguments": map[string]any{"message_id": msgID}}, true)
	waitTask := r["result"].(map[string]any)["taskId"].(string)
	if got := modern(t, base, alice, "tasks/get", map[string]any{"taskId": waitTask}, true)["result"].(map[string]any); got["status"] != "working" || got["result"] != nil {
		t.Fatalf("working task = %v", got)
	}
	if code := atpSend(t, base, carol, map[string]any{"message_id": "ans-1", "sender": "carol", "receiver": "alice",
		"type": "task.result", "correlation_id": msgID, "payload": map[string]any{"text": "answer via task"}}); code != http.StatusOK {
		t.Fatalf("carol's answer: %d", code)
	}
	done = pollTask(t, base, alice, waitTask)
	sc = done["result"].(map[string]any)["structuredContent"].(map[string]any)
	if done["status"] != mcpadapter.TaskCompleted || sc["outcome"] != "reply" || sc["reply"].(map[string]any)["text"] != "answer via task" {
		t.Fatalf("wait task = %v", done)
	}

	// Cancel: acknowledged empty, the task ends cancelled.
	r = modern(t, base, alice, "tools/call", map[string]any{"name": "wait_for_reply", "arguments": map[string]any{}}, true)
	cancelled := r["result"].(map[string]any)["taskId"].(string)
	ack := modern(t, base, alice, "tasks/cancel", map[string]any{"taskId": cancelled}, true)["result"].(map[string]any)
	if ack["resultType"] != "complete" || ack["taskId"] != nil {
		t.Fatalf("cancel ack = %v", ack)
	}
	if got := pollTask(t, base, alice, cancelled); got["status"] != mcpadapter.TaskCancelled {
		t.Fatalf("cancelled task = %v", got)
	}
	// Without the extension the same tool answers at once.
	r = modern(t, base, alice, "tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{"to": "carol", "text": "plain"}}, false)
	if res := r["result"].(map[string]any); res["resultType"] == "task" || res["structuredContent"] == nil {
		t.Fatalf("plain call = %v", r)
	}
}

// TestTasks2025 over stdio: capabilities.tasks, execution.taskSupport,
// params.task on tools/call, notifications/tasks/status, tasks/get,
// tasks/result, tasks/list and tasks/cancel.
func TestTasks2025(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Dev: true})
	startWorker(t, base, "slowpoke", nil, nil, nil, 0)
	host := startHost(t, mcpadapter.Local(h.Relay, mcpadapter.Options{Caller: core.DevPrincipal(), Records: h.Store,
		Logger: slog.New(slog.DiscardHandler)}))
	caps := host.initialize()
	tc, _ := caps["tasks"].(map[string]any)
	if tc["list"] == nil || tc["cancel"] == nil || tc["requests"].(map[string]any)["tools"].(map[string]any)["call"] == nil {
		t.Fatalf("capabilities.tasks = %v", caps["tasks"])
	}
	tools := host.request("tools/list", map[string]any{})["tools"].([]any)
	support := map[string]any{}
	for _, x := range tools {
		tm := x.(map[string]any)
		if ex, ok := tm["execution"].(map[string]any); ok {
			support[tm["name"].(string)] = ex["taskSupport"]
		}
	}
	if support["send_message"] != "optional" || support["wait_for_reply"] != "optional" || len(support) != 2 {
		t.Fatalf("taskSupport = %v", support)
	}
	sent := host.tool("send_message", map[string]any{"to": "slowpoke", "text": "work"})
	created := host.request("tools/call", map[string]any{"name": "wait_for_reply", "task": map[string]any{"ttl": 60000},
		"arguments": map[string]any{"message_id": sent["message_id"]}})
	task, _ := created["task"].(map[string]any)
	if task == nil || task["status"] != "working" || task["ttl"] != float64(60000) || task["pollInterval"] == nil {
		t.Fatalf("CreateTaskResult = %v", created)
	}
	id := task["taskId"].(string)
	res := host.request("tasks/result", map[string]any{"taskId": id}) // waits for the end
	if sc := res["structuredContent"].(map[string]any); sc["outcome"] != "reply" || sc["reply"].(map[string]any)["text"] != "done: work" {
		t.Fatalf("tasks/result = %v", res)
	}
	if rel := res["_meta"].(map[string]any)["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != id {
		t.Fatalf("related-task = %v", rel)
	}
	if note := host.taskNote(id, mcpadapter.TaskCompleted); note["taskId"] != id {
		t.Fatalf("status notification = %v", note)
	}
	if got := host.request("tasks/get", map[string]any{"taskId": id}); got["status"] != mcpadapter.TaskCompleted || got["result"] != nil {
		t.Fatalf("tasks/get = %v", got)
	}
	// A task to cancel; the list holds both.
	other := host.request("tools/call", map[string]any{"name": "wait_for_reply", "task": map[string]any{}, "arguments": map[string]any{}})["task"].(map[string]any)
	list := host.request("tasks/list", map[string]any{})["tasks"].([]any)
	if len(list) != 2 {
		t.Fatalf("tasks/list = %v", list)
	}
	if c := host.request("tasks/cancel", map[string]any{"taskId": other["taskId"]}); c["status"] != mcpadapter.TaskCancelled {
		t.Fatalf("tasks/cancel = %v", c)
	}
	if e := host.errorOf("tasks/cancel", map[string]any{"taskId": other["taskId"]}); e["code"] != float64(-32602) {
		t.Fatalf("cancelling a cancelled task: %v", e)
	}
	if e := host.errorOf("tasks/get", map[string]any{"taskId": "nope"}); e["code"] != float64(-32602) {
		t.Fatalf("unknown task: %v", e)
	}
}

// taskNote waits for a notifications/tasks/status of task id with status.
func (h *rawHost) taskNote(id, status string) map[string]any {
	h.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-h.notes:
			p, _ := m["params"].(map[string]any)
			if m["method"] == "notifications/tasks/status" && p["taskId"] == id && p["status"] == status {
				return p
			}
		case <-timeout:
			h.t.Fatalf("no %s status notification for task %s within 30 s", status, id)
		}
	}
}

// TestTasksSurviveRestart: a wait_for_reply task made before the hub
// stops is done again when it starts on the same store, and completes
// with the answer sent after the restart.
func TestTasksSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	_, base, stop := hubtest.StartStop(t, hub.Options{DataDir: dir})
	alice, carol := registerToken(t, base, "alice"), registerToken(t, base, "carol")
	r := modern(t, base, alice, "tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{"to": "carol", "text": "q"}}, false)
	msgID := r["result"].(map[string]any)["structuredContent"].(map[string]any)["message_id"].(string)
	r = modern(t, base, alice, "tools/call", map[string]any{"name": "wait_for_reply", "arguments": map[string]any{"message_id": msgID}}, true)
	id := r["result"].(map[string]any)["taskId"].(string)
	stop()

	_, base2 := hubtest.Start(t, hub.Options{DataDir: dir})
	if got := modern(t, base2, alice, "tasks/get", map[string]any{"taskId": id}, true)["result"].(map[string]any); got["status"] != "working" {
		t.Fatalf("after the restart: %v", got)
	}
	if code := atpSend(t, base2, carol, map[string]any{"message_id": "late", "sender": "carol", "receiver": "alice",
		"type": "task.result", "correlation_id": msgID, "payload": map[string]any{"text": "after the restart"}}); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	done := pollTask(t, base2, alice, id)
	if sc := done["result"].(map[string]any)["structuredContent"].(map[string]any); sc["reply"].(map[string]any)["text"] != "after the restart" {
		t.Fatalf("task = %v", done)
	}

}

// TestTasks2025OverHTTP: a session of the 2025 era asks for a task with
// params.task over Streamable HTTP and polls it.
func TestTasks2025OverHTTP(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	startWorker(t, base, "w", nil, nil, nil, 0)
	resp := rawPost(t, base+"/mcp", initBody, nil)
	resp.Body.Close()
	hdr := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	rawPost(t, base+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr).Body.Close()
	rpc := func(body string) map[string]any {
		t.Helper()
		resp := rawPost(t, base+"/mcp", body, hdr)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		text := string(raw)
		if i := strings.Index(text, "data: "); i >= 0 {
			text = strings.TrimSpace(text[i+len("data: "):])
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			t.Fatalf("%s: %q", body, raw)
		}
		return out
	}
	r := rpc(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_message","task":{"ttl":30000},"arguments":{"to":"w","text":"hi"}}}`)
	task, _ := r["result"].(map[string]any)["task"].(map[string]any)
	if task == nil || task["ttl"] != float64(30000) {
		t.Fatalf("CreateTaskResult = %v", r)
	}
	waitFor(t, "the send task to complete", func() bool {
		g := rpc(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + task["taskId"].(string) + `"}}`)
		return g["result"].(map[string]any)["status"] == mcpadapter.TaskCompleted
	})
}
