package atp_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clocktest"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

type resp struct {
	status int
	body   map[string]any
	raw    string
}

func call(t *testing.T, method, url, token string, body any) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, url, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

// worker is a real callback server that reverses text, like the tutorial's.
type worker struct {
	*httptest.Server
	mu   sync.Mutex
	seen []map[string]any
}

func newWorker(t *testing.T) *worker {
	w := &worker{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var env map[string]any
		_ = json.NewDecoder(r.Body).Decode(&env)
		w.mu.Lock()
		w.seen = append(w.seen, env)
		w.mu.Unlock()
		p, _ := env["payload"].(map[string]any)
		text, _ := p["text"].(string)
		if text == "" {
			_ = json.NewEncoder(rw).Encode(map[string]any{"status": "rejected", "code": 400, "detail": "payload.text 为空"})
			return
		}
		r2 := []rune(text)
		for i, j := 0, len(r2)-1; i < j; i, j = i+1, j-1 {
			r2[i], r2[j] = r2[j], r2[i]
		}
		_ = json.NewEncoder(rw).Encode(map[string]any{"status": "accepted", "result": map[string]any{"text": string(r2)}})
	}))
	t.Cleanup(w.Close)
	return w
}

func TestRegisterSendReceipt(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := newWorker(t)
	r := call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "worker", "callback_url": w.URL, "capabilities": []string{"text.reverse"}, "lease_seconds": 300})
	if r.status != 200 || r.body["ok"] != true || r.body["lease_seconds"].(float64) != 300 || r.body["queued"].(float64) != 0 {
		t.Fatalf("register: %d %s", r.status, r.raw)
	}
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "planner", "capabilities": []string{"plan"}})

	env := map[string]any{"atp_version": "1.0", "message_id": "m-1", "sender": "planner", "receiver": "worker",
		"type": "task.request", "timestamp": float64(time.Now().Unix()), "ttl_ms": 5000, "payload": map[string]any{"text": "abc"}}
	r = call(t, "POST", base+"/atp/send?wait_ms=5000", "", env)
	if r.status != 200 || r.body["status"] != "delivered" {
		t.Fatalf("send: %d %s", r.status, r.raw)
	}
	if res := r.body["receipt"].(map[string]any)["result"].(map[string]any)["text"]; res != "cba" {
		t.Fatalf("receipt result: %v", res)
	}
	r = call(t, "POST", base+"/atp/send", "", env)
	if r.body["duplicate"] != true || r.body["status"] != "delivered" {
		t.Fatalf("duplicate: %s", r.raw)
	}
	// The id reused for another payload is not a retry: 409, nothing routed.
	env["payload"] = map[string]any{"text": "xyz"}
	if r = call(t, "POST", base+"/atp/send", "", env); r.status != 409 || r.body["error"] != "message_id_conflict" {
		t.Fatalf("id reused for other content: %d %s", r.status, r.raw)
	}
	env["payload"] = map[string]any{"text": "abc"}
	if len(w.seen) != 1 {
		t.Fatalf("worker saw %d deliveries, want 1", len(w.seen))
	}
	if got := w.seen[0]; got["atp_version"] != "1.0" || got["sender"] != "planner" || got["type"] != "task.request" || got["ttl_ms"].(float64) != 5000 {
		t.Fatalf("envelope pushed: %v", got)
	}
	r = call(t, "GET", base+"/atp/receipts/m-1", "", nil)
	if r.status != 200 || r.body["status"] != "delivered" || r.body["attempts"].(float64) != 1 {
		t.Fatalf("receipt: %s", r.raw)
	}
	if r = call(t, "GET", base+"/atp/receipts/nope", "", nil); r.status != 404 || r.body["error"] != "not_found" {
		t.Fatalf("unknown receipt: %d %s", r.status, r.raw)
	}
	// A receiver's refusal in a 200 body is a rejection.
	env["message_id"], env["payload"] = "m-2", map[string]any{}
	if r = call(t, "POST", base+"/atp/send?wait_ms=5000", "", env); r.body["status"] != "rejected" {
		t.Fatalf("rejected: %s", r.raw)
	}
}

func TestAgentsDiscoveryHeartbeatDeregister(t *testing.T) {
	clock := clocktest.New(time.Now())
	_, base := hubtest.Start(t, hub.Options{Dev: true, Clock: clock})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "a", "capabilities": []string{"text.reverse"}, "lease_seconds": 1})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "b", "capabilities": []string{"plan"}})
	r := call(t, "GET", base+"/atp/agents?capability=text.reverse", "", nil)
	if _, ok := r.body["a"]; !ok || len(r.body) != 1 {
		t.Fatalf("capability filter: %s", r.raw)
	}
	if a := r.body["a"].(map[string]any); a["alive"] != true {
		t.Fatalf("alive: %v", a)
	}
	clock.Advance(1100 * time.Millisecond) // a's 1s lease lapses
	if r = call(t, "GET", base+"/atp/agents?alive=true", "", nil); len(r.body) != 1 || r.body["b"] == nil {
		t.Fatalf("alive filter: %s", r.raw)
	}
	if r = call(t, "POST", base+"/atp/heartbeat", "", map[string]any{"agent_id": "a", "lease_seconds": 60}); r.status != 200 || r.body["lease_seconds"].(float64) != 60 {
		t.Fatalf("heartbeat: %s", r.raw)
	}
	if r = call(t, "GET", base+"/atp/agents/a", "", nil); r.body["alive"] != true {
		t.Fatalf("after heartbeat: %s", r.raw)
	}
	if r = call(t, "POST", base+"/atp/heartbeat", "", map[string]any{"agent_id": "ghost"}); r.status != 404 {
		t.Fatalf("heartbeat unknown: %d", r.status)
	}
	if r = call(t, "DELETE", base+"/atp/agents/a", "", nil); r.status != 200 {
		t.Fatalf("deregister: %s", r.raw)
	}
	if r = call(t, "GET", base+"/atp/agents/a", "", nil); r.status != 404 {
		t.Fatalf("after deregister: %d", r.status)
	}
}

func TestOfflineQueueFlushesOnRegister(t *testing.T) {
	clock := clocktest.New(time.Now())
	_, base := hubtest.Start(t, hub.Options{Dev: true, Clock: clock})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "worker", "lease_seconds": 1})
	clock.Advance(1100 * time.Millisecond) // its lease lapses
	for _, id := range []string{"q1", "q2"} {
		r := call(t, "POST", base+"/atp/send", "", map[string]any{"message_id": id, "sender": "p", "receiver": "worker", "type": "task.request", "ttl_ms": 60000, "payload": map[string]any{"text": id}})
		if r.body["status"] != "queued" {
			t.Fatalf("send to offline: %s", r.raw)
		}
	}
	w := newWorker(t)
	r := call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "worker", "callback_url": w.URL})
	if r.body["queued"].(float64) != 2 {
		t.Fatalf("register should report 2 queued: %s", r.raw)
	}
	for _, id := range []string{"q1", "q2"} {
		waitfor.True(t, id+" to be flushed to the registered worker", func() bool {
			return call(t, "GET", base+"/atp/receipts/"+id, "", nil).body["status"] == "delivered"
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[0]["message_id"] != "q1" || w.seen[1]["message_id"] != "q2" {
		t.Fatalf("flush order: %v", w.seen)
	}
}

func TestResultsAndPull(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "planner"})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "worker"})
	call(t, "POST", base+"/atp/send", "", map[string]any{"message_id": "task", "sender": "planner", "receiver": "worker", "type": "task.request", "payload": map[string]any{"text": "x", "Text": "y"}})
	// A misspelt ack mode is refused and hands nothing out (it used to
	// fall back to the pop, which counts messages delivered at once).
	if r := call(t, "GET", base+"/atp/pending/worker?ack=Manual&visibility_ms=60000", "", nil); r.status != 400 {
		t.Fatalf("ack=Manual: %s, want 400", r.raw)
	}
	r := call(t, "GET", base+"/atp/pending/worker?ack=manual&visibility_ms=60000", "", nil)
	msgs := r.body["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["message_id"] != "task" {
		t.Fatalf("pull: %s", r.raw)
	}
	// Payload keys that differ only in case are the sender's data: kept
	// apart, not refused as a key named twice.
	if p, _ := msgs[0].(map[string]any)["payload"].(map[string]any); p["text"] != "x" || p["Text"] != "y" {
		t.Fatalf("payload: %s", r.raw)
	}
	if r = call(t, "GET", base+"/atp/receipts/task", "", nil); r.body["status"] != "queued" {
		t.Fatalf("unacked pull must stay queued: %s", r.raw)
	}
	if r = call(t, "POST", base+"/atp/ack", "", map[string]any{"agent_id": "worker", "message_ids": []string{"task"}}); r.body["acked"].(float64) != 1 {
		t.Fatalf("ack: %s", r.raw)
	}
	// The result may arrive before or during the wait; both must answer
	// it (core's TestWaitSeesOtherInstances and the relay's own tests
	// cover the wait woken mid-way, deterministically).
	done := make(chan resp, 1)
	go func() { done <- call(t, "GET", base+"/atp/results/task?wait_ms=5000", "", nil) }()
	call(t, "POST", base+"/atp/send", "", map[string]any{"message_id": "res", "sender": "worker", "receiver": "planner", "type": "task.result", "correlation_id": "task", "payload": map[string]any{"text": "done"}})
	r = <-done
	results := r.body["results"].([]any)
	if len(results) != 1 || results[0].(map[string]any)["message_id"] != "res" {
		t.Fatalf("results: %s", r.raw)
	}
	// The tutorial's pending call pops (auto-ack).
	r = call(t, "GET", base+"/atp/pending/planner", "", nil)
	if len(r.body["messages"].([]any)) != 1 {
		t.Fatalf("planner pending: %s", r.raw)
	}
	if r = call(t, "GET", base+"/atp/receipts/res", "", nil); r.body["status"] != "delivered" {
		t.Fatalf("popped message: %s", r.raw)
	}
}

func TestBadInput(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true, MaxBody: 4096})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "worker"})
	valid := func(mod func(m map[string]any)) map[string]any {
		m := map[string]any{"atp_version": "1.0", "message_id": "x", "sender": "p", "receiver": "worker", "type": "t", "ttl_ms": 1000, "payload": map[string]any{}}
		mod(m)
		return m
	}
	big := `{"agent_id":"worker","pad":"` + strings.Repeat("x", 5000) + `"}`
	cases := []struct {
		name   string
		method string // POST unless set
		path   string
		body   any
		status int
		code   string
	}{
		// Every JSON body endpoint: the same answers to a broken body.
		{"send: malformed json", "", "/atp/send", `{"sender":`, 400, "invalid_json"},
		{"send: trailing data", "", "/atp/send", `{} {}`, 400, "invalid_json"},
		{"send: trailing brace", "", "/atp/send", `{"sender":"p"}}`, 400, "invalid_json"},
		{"send: trailing bracket", "", "/atp/send", `{"sender":"p"}]`, 400, "invalid_json"},
		{"send: empty body", "", "/atp/send", ``, 400, "invalid_json"},
		{"send: array body", "", "/atp/send", `[1]`, 400, "invalid_json"},
		{"register: malformed json", "", "/atp/register", `{"agent_id"`, 400, "invalid_json"},
		{"register: trailing bracket", "", "/atp/register", `{"agent_id":"z"}]`, 400, "invalid_json"},
		{"register: empty body", "", "/atp/register", ``, 400, "invalid_json"},
		{"register: oversized", "", "/atp/register", big, 413, "payload_too_large"},
		{"heartbeat: malformed json", "", "/atp/heartbeat", `{`, 400, "invalid_json"},
		{"heartbeat: trailing brace", "", "/atp/heartbeat", `{"agent_id":"worker"}}`, 400, "invalid_json"},
		{"heartbeat: oversized", "", "/atp/heartbeat", big, 413, "payload_too_large"},
		{"deregister: malformed json", "", "/atp/deregister", `{`, 400, "invalid_json"},
		{"deregister: trailing brace", "", "/atp/deregister", `{"agent_id":"worker"}}`, 400, "invalid_json"},
		{"ack: malformed json", "", "/atp/ack", `{`, 400, "invalid_json"},
		{"ack: trailing bracket", "", "/atp/ack", `{"agent_id":"worker","message_ids":[]}]`, 400, "invalid_json"},
		{"ack: oversized", "", "/atp/ack", big, 413, "payload_too_large"},
		// A key named twice is ambiguous (parsers keep the first, the
		// last or both), so the body is refused, not read one way.
		{"send: sender named twice", "", "/atp/send", `{"atp_version":"1.0","message_id":"x","sender":"p","receiver":"worker","type":"t","ttl_ms":1000,"payload":{},"sender":"q"}`, 400, "invalid_json"},
		{"send: receiver named again in capitals", "", "/atp/send", `{"atp_version":"1.0","message_id":"x","sender":"p","receiver":"worker","RECEIVER":"ghost","type":"t","ttl_ms":1000,"payload":{}}`, 400, "invalid_json"},
		{"send: payload key named twice", "", "/atp/send", `{"atp_version":"1.0","message_id":"x","sender":"p","receiver":"worker","type":"t","ttl_ms":1000,"payload":{"amount":1,"amount":1000}}`, 400, "invalid_json"},
		{"register: agent id named twice", "", "/atp/register", `{"agent_id":"z","agent_id":"worker"}`, 400, "invalid_json"},
		// Fields of the wrong JSON type name the field.
		{"send: ttl as string", "", "/atp/send", valid(func(m map[string]any) { m["ttl_ms"] = "1000" }), 400, "invalid_field"},
		{"register: lease as string", "", "/atp/register", map[string]any{"agent_id": "z", "lease_seconds": "60"}, 400, "invalid_field"},
		{"ack: ids not an array", "", "/atp/ack", map[string]any{"agent_id": "worker", "message_ids": "x"}, 400, "invalid_field"},
		// Missing fields.
		{"send: missing sender", "", "/atp/send", valid(func(m map[string]any) { delete(m, "sender") }), 400, "missing_field"},
		{"send: missing receiver", "", "/atp/send", valid(func(m map[string]any) { delete(m, "receiver") }), 400, "missing_field"},
		{"send: missing type", "", "/atp/send", valid(func(m map[string]any) { m["type"] = "" }), 400, "missing_field"},
		{"register: missing agent id", "", "/atp/register", map[string]any{}, 400, "missing_field"},
		{"register: push without callback", "", "/atp/register", map[string]any{"agent_id": "z", "delivery": "push"}, 400, "missing_field"},
		{"heartbeat: missing agent id", "", "/atp/heartbeat", map[string]any{}, 400, "missing_field"},
		{"deregister: missing agent id", "", "/atp/deregister", map[string]any{}, 400, "missing_field"},
		{"ack: missing agent id", "", "/atp/ack", map[string]any{"message_ids": []string{"x"}}, 400, "missing_field"},
		{"ack: missing message ids", "", "/atp/ack", map[string]any{"agent_id": "worker"}, 400, "missing_field"},
		// Values out of range or of the wrong form.
		{"send: unknown version", "", "/atp/send", valid(func(m map[string]any) { m["atp_version"] = "2.0" }), 400, "unsupported_version"},
		{"send: zero ttl", "", "/atp/send", valid(func(m map[string]any) { m["ttl_ms"] = 0 }), 400, "invalid_ttl"},
		{"send: negative ttl", "", "/atp/send", valid(func(m map[string]any) { m["ttl_ms"] = -5 }), 400, "invalid_ttl"},
		{"send: absurd ttl", "", "/atp/send", valid(func(m map[string]any) { m["ttl_ms"] = int64(1e15) }), 400, "invalid_ttl"},
		{"send: timestamp past year 9999", "", "/atp/send", valid(func(m map[string]any) { m["timestamp"] = 253402300800 }), 400, "invalid_field"},
		{"send: negative timestamp", "", "/atp/send", valid(func(m map[string]any) { m["timestamp"] = -1 }), 400, "invalid_field"},
		{"send: sender not an agent id", "", "/atp/send", valid(func(m map[string]any) { m["sender"] = "../p" }), 400, "invalid_field"},
		{"send: control character in id", "", "/atp/send", valid(func(m map[string]any) { m["message_id"] = "a\u0000/../b" }), 400, "invalid_field"},
		{"send: id too long", "", "/atp/send", valid(func(m map[string]any) { m["message_id"] = strings.Repeat("i", 201) }), 400, "invalid_field"},
		{"send: conversation id too long", "", "/atp/send", valid(func(m map[string]any) { m["conversation_id"] = strings.Repeat("c", 201) }), 400, "invalid_field"},
		{"send: payload not object", "", "/atp/send", valid(func(m map[string]any) { m["payload"] = []int{1} }), 400, "invalid_field"},
		{"send: oversized", "", "/atp/send", valid(func(m map[string]any) { m["payload"] = map[string]any{"text": strings.Repeat("x", 5000)} }), 413, "payload_too_large"},
		{"send: unknown receiver", "", "/atp/send", valid(func(m map[string]any) { m["receiver"] = "ghost" }), 404, "unreachable"},
		{"send: negative wait", "", "/atp/send?wait_ms=-1", valid(func(m map[string]any) {}), 400, "invalid_field"},
		{"send: wait not a number", "", "/atp/send?wait_ms=soon", valid(func(m map[string]any) {}), 400, "invalid_field"},
		{"register: bad callback scheme", "", "/atp/register", map[string]any{"agent_id": "z", "callback_url": "ftp://x/y"}, 400, "invalid_callback_url"},
		{"register: callback without host", "", "/atp/register", map[string]any{"agent_id": "z", "callback_url": "http:///y"}, 400, "invalid_callback_url"},
		{"register: bad agent id", "", "/atp/register", map[string]any{"agent_id": "../etc"}, 400, "invalid_field"},
		{"register: unknown delivery", "", "/atp/register", map[string]any{"agent_id": "z", "delivery": "carrier pigeon"}, 400, "invalid_field"},
		{"register: absurd lease", "", "/atp/register", map[string]any{"agent_id": "z", "lease_seconds": 10000000}, 400, "invalid_field"},
		{"register: lease that would overflow", "", "/atp/register", map[string]any{"agent_id": "z", "lease_seconds": int64(36028797018964028)}, 400, "invalid_field"},
		{"register: negative lease", "", "/atp/register", map[string]any{"agent_id": "z", "lease_seconds": -5}, 400, "invalid_field"},
		{"heartbeat: lease that would overflow", "", "/atp/heartbeat", map[string]any{"agent_id": "worker", "lease_seconds": int64(36028797018964028)}, 400, "invalid_field"},
		{"heartbeat: negative lease", "", "/atp/heartbeat", map[string]any{"agent_id": "worker", "lease_seconds": -5}, 400, "invalid_field"},
		{"pending: zero visibility", "GET", "/atp/pending/worker?ack=manual&visibility_ms=0", nil, 400, "invalid_field"},
		{"pending: visibility past a day", "GET", "/atp/pending/worker?ack=manual&visibility_ms=36028797018964028", nil, 400, "invalid_field"},
		{"pending: misspelt ack mode", "GET", "/atp/pending/worker?ack=Manual", nil, 400, "invalid_field"},
		{"agents: alive neither true nor false", "GET", "/atp/agents?alive=maybe", nil, 400, "invalid_field"},
		{"pending: unknown ack mode", "GET", "/atp/pending/worker?ack=none", nil, 400, "invalid_field"},
		// Unknown agents.
		{"heartbeat: unknown agent", "", "/atp/heartbeat", map[string]any{"agent_id": "ghost"}, 404, "not_found"},
		{"ack: unknown agent", "", "/atp/ack", map[string]any{"agent_id": "ghost", "message_ids": []string{"x"}}, 404, "not_found"},
		{"receipt: unknown message", "GET", "/atp/receipts/nope", nil, 404, "not_found"},
		{"pending: unknown agent", "GET", "/atp/pending/ghost", nil, 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := cmp.Or(c.method, "POST")
			r := call(t, method, base+c.path, "", c.body)
			msg, _ := r.body["message"].(string)
			sc, _ := r.body["status_code"].(float64)
			if r.status != c.status || r.body["error"] != c.code || sc != float64(c.status) || msg == "" {
				t.Fatalf("got %d %s, want %d %s with a message", r.status, r.raw, c.status, c.code)
			}
			if strings.Contains(msg, "Go ") || strings.Contains(msg, "atp.") || strings.HasSuffix(msg, ": invalid") {
				t.Fatalf("the message shows the hub's internals: %q", msg)
			}
			if strings.Count(msg, `"ghost"`) > 1 {
				t.Fatalf("the message names the agent twice: %q", msg)
			}
		})
	}
	// Nothing was stored by any refused send or registration, and the
	// worker is as it was.
	if r := call(t, "GET", base+"/atp/receipts/x", "", nil); r.status != 404 {
		t.Fatalf("a refused message was stored: %s", r.raw)
	}
	if r := call(t, "GET", base+"/atp/agents/z", "", nil); r.status != 404 {
		t.Fatalf("a refused registration was stored: %s", r.raw)
	}
	if r := call(t, "GET", base+"/atp/agents/worker", "", nil); r.status != 200 || r.body["expires_at"].(float64)-r.body["last_seen"].(float64) != 300 {
		t.Fatalf("refused heartbeats or deregistrations changed the worker: %s", r.raw)
	}
}

func TestIdentityBinding(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	admin := h.AdminToken
	reg := func(id, token string) resp {
		return call(t, "POST", base+"/atp/register", token, map[string]any{"agent_id": id})
	}
	a := reg("alice", "")
	tokA, _ := a.body["token"].(string)
	if a.status != 200 || !strings.HasPrefix(tokA, "sbk_") {
		t.Fatalf("first registration should issue a token: %s", a.raw)
	}
	tokB, _ := reg("bob", "").body["token"].(string)
	cases := []struct {
		name, method, path, token string
		body                      any
		status                    int
	}{
		{"re-register without token", "POST", "/atp/register", "", map[string]any{"agent_id": "alice"}, 401},
		{"re-register with other's token", "POST", "/atp/register", tokB, map[string]any{"agent_id": "alice"}, 403},
		{"re-register with own token", "POST", "/atp/register", tokA, map[string]any{"agent_id": "alice"}, 200},
		{"send without token", "POST", "/atp/send", "", map[string]any{"sender": "alice", "receiver": "bob", "type": "t"}, 401},
		{"spoofed sender", "POST", "/atp/send", tokB, map[string]any{"sender": "alice", "receiver": "bob", "type": "t"}, 403},
		{"wrong token", "POST", "/atp/send", "sbk_nope", map[string]any{"sender": "alice", "receiver": "bob", "type": "t"}, 401},
		{"own send", "POST", "/atp/send", tokA, map[string]any{"message_id": "ok1", "sender": "alice", "receiver": "bob", "type": "t"}, 200},
		{"read other's queue", "GET", "/atp/pending/bob", tokA, nil, 403},
		{"heartbeat other", "POST", "/atp/heartbeat", tokA, map[string]any{"agent_id": "bob"}, 403},
		{"deregister other", "DELETE", "/atp/agents/bob", tokA, nil, 403},
		{"dlq without admin", "GET", "/v1/dlq", tokA, nil, 403},
		{"dlq with admin", "GET", "/v1/dlq", admin, nil, 200},
		{"receipt by stranger", "GET", "/atp/receipts/ok1", "", nil, 401},
		{"receipt by receiver", "GET", "/atp/receipts/ok1", tokB, nil, 200},
		{"list agents anonymously", "GET", "/atp/agents", "", nil, 401},
		{"read an agent anonymously", "GET", "/atp/agents/alice", "", nil, 401},
		{"list agents as an agent", "GET", "/atp/agents", tokB, nil, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := call(t, c.method, base+c.path, c.token, c.body); r.status != c.status {
				t.Fatalf("got %d %s, want %d", r.status, r.raw, c.status)
			}
		})
	}
	if r := call(t, "GET", base+"/atp/pending/bob", tokB, nil); r.status != 200 || len(r.body["messages"].([]any)) != 1 {
		t.Fatalf("bob reads his own queue: %s", r.raw)
	}
	_ = context.Background()
}

// TestStreamsPerAgent: an agent may hold --max-streams event streams open;
// opening one more ends the oldest (which says why), and the newest work.
func TestStreamsPerAgent(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true, Relay: core.Config{MaxStreams: 2}})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "reader", "delivery": "stream"})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "writer"})
	type stream struct {
		ended chan string // what the stream carried, once it ended
		data  *strings.Builder
		mu    *sync.Mutex
	}
	open := func() stream {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/atp/stream/reader", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		st := stream{ended: make(chan string, 1), data: &strings.Builder{}, mu: &sync.Mutex{}}
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := resp.Body.Read(buf)
				st.mu.Lock()
				st.data.Write(buf[:n])
				all := st.data.String()
				st.mu.Unlock()
				if err != nil {
					st.ended <- all
					return
				}
			}
		}()
		return st
	}
	first, second := open(), open()
	third := open()
	if got := waitfor.Recv(t, "the oldest stream to end when a third opened", first.ended); !strings.Contains(got, "a newer stream of this agent took its place") {
		t.Fatalf("the oldest stream ended without saying why: %q", got)
	}
	// The two newest carry messages sent now.
	for i := range 4 {
		if r := call(t, "POST", base+"/atp/send", "", map[string]any{"message_id": "s" + strconv.Itoa(i), "sender": "writer", "receiver": "reader", "type": "t", "payload": map[string]any{}}); r.status != 200 {
			t.Fatalf("send: %s", r.raw)
		}
	}
	waitfor.OK(t, "the two open streams to carry the 4 messages", func() error {
		var seen int
		for _, st := range []stream{second, third} {
			st.mu.Lock()
			seen += strings.Count(st.data.String(), "event: message")
			st.mu.Unlock()
		}
		if seen < 4 {
			return fmt.Errorf("%d of 4", seen)
		}
		return nil
	})
	select {
	case got := <-second.ended:
		t.Fatalf("the second stream ended too: %q", got)
	default:
	}
}

// TestStreamRedeliversLapsedLease: a message a stream wrote out but that
// was never acknowledged comes down the stream again once its lease
// (visibility_ms) runs out, with nothing else happening to wake the
// stream: the stream's own pulls find it.
func TestStreamRedeliversLapsedLease(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "reader", "delivery": "stream"})
	call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "writer"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/atp/stream/reader?visibility_ms=300", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ids := make(chan string, 16)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				close(ids)
				return
			}
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
				ids <- id
			}
		}
	}()
	if r := call(t, "POST", base+"/atp/send", "", map[string]any{"message_id": "lapse", "sender": "writer", "receiver": "reader", "type": "t", "payload": map[string]any{}}); r.status != 200 {
		t.Fatalf("send: %s", r.raw)
	}
	for _, what := range []string{"the message on the stream", "the unacknowledged message again, after its 300 ms lease"} {
		if id := waitfor.Recv(t, what, ids); id != "lapse" {
			t.Fatalf("stream carried %q", id)
		}
	}
}

// TestAgentLimitAnswer: with auth on, a registration of a new id past
// --max-agents is answered 507 agent_limit with nothing stored, while an
// agent already registered re-registers with its token.
func TestAgentLimitAnswer(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Relay: core.Config{MaxAgents: 2}})
	first := call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "one"})
	if first.status != 200 {
		t.Fatalf("first registration: %d %s", first.status, first.raw)
	}
	if r := call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "two"}); r.status != 200 {
		t.Fatalf("second registration: %d %s", r.status, r.raw)
	}
	r := call(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "three"})
	if r.status != http.StatusInsufficientStorage || r.body["error"] != "agent_limit" || r.body["status_code"] != float64(507) {
		t.Fatalf("registration past the limit: %d %s", r.status, r.raw)
	}
	if _, err := h.Store.GetAgent(context.Background(), "three"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("the refused agent was stored: %v", err)
	}
	again := call(t, "POST", base+"/atp/register", first.body["token"].(string), map[string]any{"agent_id": "one", "lease_seconds": 120})
	if again.status != 200 {
		t.Fatalf("re-registration at the limit: %d %s", again.status, again.raw)
	}
}

// TestSigningSecretPerIdentity: the webhook signing secret an ATP
// registration returns belongs to the identity, not the id: renewing the
// registration keeps it, and an id deregistered and registered again (by
// anyone) gets a new one, which the old owner's secret does not sign for.
func TestSigningSecretPerIdentity(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	reg := func(token string) (secret, tok string) {
		t.Helper()
		r := call(t, "POST", base+"/atp/register", token, map[string]any{"agent_id": "worker", "callback_url": "http://127.0.0.1:9/inbox"})
		secret, _ = r.body["signing_secret"].(string)
		tok, _ = r.body["token"].(string)
		if r.status != 200 || !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("register: %s", r.raw)
		}
		return secret, tok
	}
	first, tok := reg("")
	renewed, _ := reg(tok)
	if renewed != first {
		t.Errorf("renewing the registration changed the secret: %q, then %q", first, renewed)
	}
	if r := call(t, "DELETE", base+"/atp/agents/worker", tok, nil); r.status != 200 {
		t.Fatalf("deregister: %s", r.raw)
	}
	next, nextTok := reg("")
	if next == first {
		t.Errorf("the id's next identity inherited the old signing secret %q", first)
	}
	if r := call(t, "POST", base+"/atp/heartbeat", tok, map[string]any{"agent_id": "worker"}); r.status != 401 {
		t.Errorf("the old identity's token renews the new one: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", base+"/atp/heartbeat", nextTok, map[string]any{"agent_id": "worker"}); r.status != 200 {
		t.Errorf("the new identity's token: %d %s", r.status, r.raw)
	}
}
