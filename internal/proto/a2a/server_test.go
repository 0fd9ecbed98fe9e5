package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

const admin = "sba_test-admin-token"

// call is one HTTP exchange's outcome.
type call struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// do sends a request with a bearer token (none when empty) and decodes a
// JSON answer.
func do(t *testing.T, method, url, token, ctype string, body []byte, hdr ...string) call {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	c := call{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &c.body)
	return c
}

// rpc calls a 1.0 JSON-RPC method of agent at base.
func rpc(t *testing.T, base, agent, token, method string, params any) call {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	return do(t, http.MethodPost, base+"/a2a/"+agent, token, "application/json", b, "A2A-Version", "1.0")
}

// code is a JSON-RPC answer's error code (0 if none).
func (c call) code() int {
	e, _ := c.body["error"].(map[string]any)
	n, _ := e["code"].(float64)
	return int(n)
}

// result is a JSON-RPC answer's result, or the test fails.
func (c call) result(t *testing.T) map[string]any {
	t.Helper()
	r, ok := c.body["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %d %s", c.status, c.raw)
	}
	return r
}

// task is the task of a SendMessage answer.
func (c call) task(t *testing.T) map[string]any {
	t.Helper()
	r := c.result(t)
	if tk, ok := r["task"].(map[string]any); ok {
		return tk
	}
	return r
}

func state(task map[string]any) string {
	st, _ := task["status"].(map[string]any)
	s, _ := st["state"].(string)
	return s
}

func message(id, text, contextID, taskID string) map[string]any {
	m := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	if contextID != "" {
		m["contextId"] = contextID
	}
	if taskID != "" {
		m["taskId"] = taskID
	}
	return m
}

func sendParams(id, text, contextID string, async bool) map[string]any {
	return map[string]any{"message": message(id, text, contextID, ""), "configuration": map[string]any{"returnImmediately": async}}
}

// register registers an ATP agent (pull, or push to callback) and returns
// its token (empty in dev mode).
func register(t *testing.T, base, token, id, callback string) string {
	t.Helper()
	body := map[string]any{"agent_id": id}
	if callback != "" {
		body["callback_url"] = callback
	}
	b, _ := json.Marshal(body)
	c := do(t, http.MethodPost, base+"/atp/register", token, "application/json", b)
	if c.status != 200 {
		t.Fatalf("register %s: %d %s", id, c.status, c.raw)
	}
	tok, _ := c.body["token"].(string)
	return tok
}

// atpSend sends an ATP message; it returns the answer.
func atpSend(t *testing.T, base, token string, env map[string]any) call {
	t.Helper()
	env["atp_version"] = "1.0"
	if _, ok := env["ttl_ms"]; !ok {
		env["ttl_ms"] = 60000
	}
	b, _ := json.Marshal(env)
	return do(t, http.MethodPost, base+"/atp/send", token, "application/json", b)
}

// pull pulls an ATP agent's messages.
func pull(t *testing.T, base, token, id string) []map[string]any {
	t.Helper()
	c := do(t, http.MethodGet, base+"/atp/pending/"+id, token, "", nil)
	ms, _ := c.body["messages"].([]any)
	var out []map[string]any
	for _, m := range ms {
		out = append(out, m.(map[string]any))
	}
	return out
}

// waitFor waits until ok holds, failing with what after d.
func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	waitfor.TrueWithin(t, d, what, ok)
}

// worker is an ATP webhook worker answering every message with reply.
func worker(t *testing.T, reply string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReplyPathWithoutAnAgent: the operator (auth on) and a dev-mode
// caller have no agent of their own; their task's message goes out from a
// hidden reply path of the task, the worker's answer reaches it, the task
// completes and a subscription sees it, and the reply path shows in no
// listing.
func TestReplyPathWithoutAnAgent(t *testing.T) {
	for _, dev := range []bool{false, true} {
		t.Run(fmt.Sprintf("dev=%v", dev), func(t *testing.T) {
			_, base := hubtest.Start(t, hub.Options{Dev: dev})
			caller := admin
			if dev {
				caller = ""
			}
			wtok := register(t, base, "", "worker", "")
			task := rpc(t, base, "worker", caller, "SendMessage", sendParams("m1", "question", "", true)).task(t)
			id := task["id"].(string)
			// A subscription opened before the answer sees the completion.
			events := subscribe(t, base, "worker", caller, id)
			ms := pull(t, base, wtok, "worker")
			if len(ms) != 1 || !strings.HasPrefix(ms[0]["sender"].(string), core.InternalPrefix+"a2a-reply.") {
				t.Fatalf("the worker got %v, want one message from the task's reply path", ms)
			}
			helper := ms[0]["sender"].(string)
			ans := atpSend(t, base, wtok, map[string]any{"message_id": "answer-1", "sender": "worker", "receiver": helper,
				"type": "task.result", "correlation_id": ms[0]["message_id"], "payload": map[string]string{"text": "the answer"}})
			if ans.status != 200 {
				t.Fatalf("the worker's answer to the reply path: %d %s", ans.status, ans.raw)
			}
			waitFor(t, 10*time.Second, "the task to complete", func() bool {
				return state(rpc(t, base, "worker", caller, "GetTask", map[string]any{"id": id}).result(t)) == "TASK_STATE_COMPLETED"
			})
			select {
			case last := <-events:
				if !strings.Contains(last, "TASK_STATE_COMPLETED") {
					t.Fatalf("the subscription ended with %s", last)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the subscription did not see the completion")
			}
			// Not in A2A's directories, the operator's neither.
			for _, u := range []string{base + "/a2a/agents", base + "/.well-known/agent-card.json"} {
				if c := do(t, http.MethodGet, u, caller, "", nil); strings.Contains(c.raw, helper) || strings.Contains(c.raw, "_a2a-") {
					t.Errorf("%s lists the reply path: %s", u, c.raw)
				}
			}
			if dev {
				return // dev mode may do anything the operator may
			}
			// Nor in an agent's listing, and nobody but the worker
			// answering may write to it.
			if c := do(t, http.MethodGet, base+"/atp/agents", wtok, "", nil); strings.Contains(c.raw, "_a2a-") {
				t.Errorf("the worker's agent listing shows the reply path: %s", c.raw)
			}
			if c := atpSend(t, base, wtok, map[string]any{"message_id": "spam", "sender": "worker", "receiver": helper,
				"type": "note", "payload": map[string]string{"text": "x"}}); c.status != 404 {
				t.Errorf("a plain message to the reply path: %d %s, want 404", c.status, c.raw)
			}
		})
	}
}

// subscribe opens SubscribeToTask and returns a channel that gets the last
// event when the stream ends.
func subscribe(t *testing.T, base, agent, token, id string) <-chan string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": map[string]any{"id": id}})
	req, _ := http.NewRequest(http.MethodPost, base+"/a2a/"+agent, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("SubscribeToTask answered %s: %s", ct, raw)
	}
	out := make(chan string, 1)
	ready := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		last := ""
		first := true
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				last = d
				if first {
					first = false
					close(ready)
				}
			}
		}
		out <- last
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription sent no first event")
	}
	return out
}

// fixture is a hub with auth on and three agents: alice and bob talk in
// conversation c-ab; alice has an A2A task with bob.
type fixture struct {
	base string
	h    *hub.Hub
	tok  map[string]string
	task string // alice's task to bob
	// relayed is the id of the task's message to bob.
	relayed string
}

func newFixture(t *testing.T) *fixture {
	h, base := hubtest.Start(t, hub.Options{})
	f := &fixture{base: base, h: h, tok: map[string]string{}}
	for _, id := range []string{"alice", "bob", "carol"} {
		f.tok[id] = register(t, base, "", id, "")
	}
	if c := atpSend(t, base, f.tok["alice"], map[string]any{"message_id": "ab-1", "sender": "alice", "receiver": "bob",
		"type": "note", "conversation_id": "c-ab", "payload": map[string]string{"text": "secret"}}); c.status != 200 {
		t.Fatalf("alice → bob: %d %s", c.status, c.raw)
	}
	f.task = rpc(t, base, "bob", f.tok["alice"], "SendMessage", sendParams("a-1", "for bob", "", true)).task(t)["id"].(string)
	for _, m := range pull(t, base, f.tok["bob"], "bob") {
		if md, _ := m["metadata"].(map[string]any); md["a2a_task_id"] == f.task {
			f.relayed = m["message_id"].(string)
		}
	}
	if f.relayed == "" {
		t.Fatal("bob got no message of alice's task")
	}
	return f
}

// records counts the store's records of a kind.
func (f *fixture) records(t *testing.T, kind string) int {
	t.Helper()
	recs, err := f.h.Store.ListRecords(context.Background(), kind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// TestAttacksThroughA2A tries each attack class through the A2A bindings
// as carol, an ordinary agent of a hub with auth on: each is refused, and
// nothing carol sent is stored or delivered.
func TestAttacksThroughA2A(t *testing.T) {
	f := newFixture(t)
	carol := f.tok["carol"]
	tasks := f.records(t, a2a.KindTask)
	t.Run("join a foreign contextId", func(t *testing.T) {
		c := rpc(t, f.base, "bob", carol, "SendMessage", sendParams("c-1", "let me in", "c-ab", true))
		if c.code() != a2a.CodeTaskNotFound {
			t.Fatalf("SendMessage in c-ab: %s, want -32001 (not found, as every protocol answers)", c.raw)
		}
		if n := f.records(t, a2a.KindTask); n != tasks {
			t.Errorf("a refused send left a task: %d tasks, want %d", n, tasks)
		}
		for _, m := range pull(t, f.base, f.tok["bob"], "bob") {
			if m["sender"] == "carol" {
				t.Errorf("carol's message was delivered: %v", m)
			}
		}
	})
	t.Run("read a foreign contextId", func(t *testing.T) {
		if c := rpc(t, f.base, "bob", carol, "ListTasks", map[string]any{"contextId": "c-ab"}); c.code() != a2a.CodeTaskNotFound {
			t.Fatalf("ListTasks of c-ab: %s, want -32001", c.raw)
		}
	})
	t.Run("another's task", func(t *testing.T) {
		for method, params := range map[string]any{
			"GetTask":                          map[string]any{"id": f.task},
			"CancelTask":                       map[string]any{"id": f.task},
			"SubscribeToTask":                  map[string]any{"id": f.task},
			"ListTaskPushNotificationConfigs":  map[string]any{"taskId": f.task},
			"CreateTaskPushNotificationConfig": map[string]any{"taskId": f.task, "url": "https://attacker.example/p"},
			"SendMessage":                      map[string]any{"message": message("c-2", "hijack", "", f.task)},
		} {
			c := rpc(t, f.base, "bob", carol, method, params)
			if !strings.Contains(c.raw, `"code":-32001`) {
				t.Errorf("%s on alice's task by carol: %s, want -32001", method, c.raw)
			}
		}
		if n := f.records(t, a2a.KindPush); n != 0 {
			t.Errorf("%d push configs stored, want none", n)
		}
		list := rpc(t, f.base, "bob", carol, "ListTasks", map[string]any{}).result(t)
		if ts, _ := list["tasks"].([]any); len(ts) != 0 {
			t.Errorf("carol lists %d of bob's tasks, want none", len(ts))
		}
		// alice herself, and the operator, see it.
		for _, tok := range []string{f.tok["alice"], admin} {
			if c := rpc(t, f.base, "bob", tok, "GetTask", map[string]any{"id": f.task}); c.code() != 0 {
				t.Errorf("GetTask by its owner or the operator: %s", c.raw)
			}
		}
	})
	t.Run("forged answer", func(t *testing.T) {
		relayed := f.relayed
		c := atpSend(t, f.base, carol, map[string]any{"message_id": "forged", "sender": "carol", "receiver": "alice",
			"type": "task.result", "correlation_id": relayed, "payload": map[string]string{"text": "forged"}})
		if c.status != 403 {
			t.Fatalf("carol answers alice's task message: %d %s, want 403", c.status, c.raw)
		}
		got := rpc(t, f.base, "bob", f.tok["alice"], "GetTask", map[string]any{"id": f.task}).result(t)
		if state(got) == "TASK_STATE_COMPLETED" || strings.Contains(fmt.Sprint(got), "forged") {
			t.Fatalf("the forged answer reached the task: %v", got)
		}
	})
	t.Run("list hidden agents", func(t *testing.T) {
		// A push config makes a hidden push agent.
		hook := worker(t, `{}`)
		_ = hook
		if c := rpc(t, f.base, "bob", f.tok["alice"], "CreateTaskPushNotificationConfig", map[string]any{"taskId": f.task, "url": "https://push.example/hook",
			"id": strings.Repeat("p", 257)}); c.code() != a2a.CodeInvalidParams || !strings.Contains(c.raw, "id is 257 bytes long") {
			t.Fatalf("a push config with a 257-byte id: %s, want invalid params naming the id", c.raw)
		}
		if c := rpc(t, f.base, "bob", f.tok["alice"], "CreateTaskPushNotificationConfig", map[string]any{"taskId": f.task, "url": "https://push.example/hook"}); c.code() != 0 {
			t.Fatalf("alice's push config: %s", c.raw)
		}
		if c := rpc(t, f.base, "bob", f.tok["alice"], "CancelTask", map[string]any{"id": f.task}); c.code() != 0 {
			t.Fatalf("cancel: %s", c.raw)
		}
		for _, tok := range []string{carol, admin} {
			for _, u := range []string{"/a2a/agents", "/.well-known/agent-card.json"} {
				if c := do(t, http.MethodGet, f.base+u, tok, "", nil); strings.Contains(c.raw, "_a2a-") || !strings.Contains(c.raw, "alice") {
					t.Errorf("%s (%s): %s", u, tok[:6], c.raw)
				}
			}
		}
		if c := do(t, http.MethodGet, f.base+"/a2a/agents", "", "", nil); c.status != 401 {
			t.Errorf("anonymous directory: %d", c.status)
		}
	})
	t.Run("no credential", func(t *testing.T) {
		c := rpc(t, f.base, "bob", "", "SendMessage", sendParams("anon", "x", "", true))
		if c.status != 401 || c.code() != a2a.CodeUnauthenticated || !strings.HasPrefix(c.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("anonymous SendMessage: %d %s", c.status, c.raw)
		}
		if c := do(t, http.MethodGet, f.base+"/a2a/bob/tasks", "", "", nil); c.status != 401 {
			t.Fatalf("anonymous REST ListTasks: %d %s", c.status, c.raw)
		}
	})
}

// TestListTasksCursor: tasks created while a client pages never show
// twice and every task there was when paging began is listed once; page
// sizes 0 and 101 are refused with the specification's error on JSON-RPC
// and REST.
func TestListTasksCursor(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	register(t, base, "", "w", worker(t, `{"status":"accepted"}`).URL)
	before := map[string]bool{}
	for i := range 12 {
		before[rpc(t, base, "w", "", "SendMessage", sendParams(fmt.Sprint("p", i), "x", "", true)).task(t)["id"].(string)] = true
	}
	seen := map[string]int{}
	token := ""
	for page := 0; ; page++ {
		params := map[string]any{"pageSize": 5}
		if token != "" {
			params["pageToken"] = token
		}
		res := rpc(t, base, "w", "", "ListTasks", params).result(t)
		for _, x := range res["tasks"].([]any) {
			seen[x.(map[string]any)["id"].(string)]++
		}
		// Two more tasks arrive between pages.
		for i := range 2 {
			rpc(t, base, "w", "", "SendMessage", sendParams(fmt.Sprint("q", page, i), "x", "", true))
		}
		token, _ = res["nextPageToken"].(string)
		if _, ok := res["nextPageToken"]; !ok {
			t.Fatalf("nextPageToken missing: %v", res)
		}
		if token == "" {
			break
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("task %s listed %d times", id, n)
		}
	}
	for id := range before {
		if seen[id] != 1 {
			t.Errorf("task %s, there when paging began, listed %d times", id, seen[id])
		}
	}
	for _, size := range []int{0, 101} {
		if c := rpc(t, base, "w", "", "ListTasks", map[string]any{"pageSize": size}); c.code() != a2a.CodeInvalidParams {
			t.Errorf("JSON-RPC pageSize %d: %s, want -32602", size, c.raw)
		}
		if c := do(t, http.MethodGet, fmt.Sprintf("%s/a2a/w/tasks?pageSize=%d", base, size), "", "", nil); c.status != 400 {
			t.Errorf("REST pageSize %d: %d %s, want 400", size, c.status, c.raw)
		}
	}
	if c := rpc(t, base, "w", "", "ListTasks", map[string]any{}); c.code() != 0 {
		t.Errorf("ListTasks without pageSize: %s", c.raw)
	}
}

// TestBlockingSend: a blocking SendMessage returns once the task is
// terminal or interrupted, whatever state that is.
func TestBlockingSend(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	for id, tc := range map[string]struct{ reply, want string }{
		"done":  {`{"status":"accepted","result":{"text":"ok"}}`, "TASK_STATE_COMPLETED"},
		"ask":   {`{"status":"input-required","result":{"text":"which one?"}}`, "TASK_STATE_INPUT_REQUIRED"},
		"fails": {`{"status":"failed","detail":"no"}`, "TASK_STATE_FAILED"},
	} {
		register(t, base, "", id, worker(t, tc.reply).URL)
		if got := state(rpc(t, base, id, "", "SendMessage", sendParams("b-"+id, "x", "", false)).task(t)); got != tc.want {
			t.Errorf("%s: blocking send answered %s, want %s", id, got, tc.want)
		}
	}
}

// TestCardCaching: cards carry Cache-Control and an ETag, and a request
// naming the ETag gets 304.
func TestCardCaching(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	register(t, base, "", "w", "")
	for _, path := range []string{"/a2a/w/.well-known/agent-card.json", "/a2a/w/.well-known/agent.json", "/.well-known/agent-card.json"} {
		c := do(t, http.MethodGet, base+path, "", "", nil)
		etag := c.header.Get("ETag")
		if c.status != 200 || etag == "" || !strings.Contains(c.header.Get("Cache-Control"), "max-age=") {
			t.Fatalf("%s: %d ETag %q Cache-Control %q", path, c.status, etag, c.header.Get("Cache-Control"))
		}
		if c2 := do(t, http.MethodGet, base+path, "", "", nil, "If-None-Match", etag); c2.status != http.StatusNotModified || c2.raw != "" {
			t.Errorf("%s with If-None-Match: %d %q, want 304", path, c2.status, c2.raw)
		}
		if c3 := do(t, http.MethodGet, base+path, "", "", nil, "If-None-Match", `"other"`); c3.status != 200 {
			t.Errorf("%s with another ETag: %d", path, c3.status)
		}
	}
}

// TestPushRequest: a push notification is the stream event, POSTed with
// the specification's content type, the config's token and its
// authentication.
func TestPushRequest(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	var mu sync.Mutex
	var got []*http.Request
	var bodies []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	register(t, base, "", "w", worker(t, `{"status":"accepted","result":{"text":"ok"}}`).URL)
	params := sendParams("push-1", "x", "", true)
	params["configuration"].(map[string]any)["taskPushNotificationConfig"] = map[string]any{"url": hook.URL, "token": "tok-1",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": "secret-1"}}
	rpc(t, base, "w", "", "SendMessage", params).task(t)
	waitFor(t, 10*time.Second, "the completion's push", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) > 0 && strings.Contains(bodies[len(bodies)-1], "TASK_STATE_COMPLETED")
	})
	mu.Lock()
	defer mu.Unlock()
	r, body := got[len(got)-1], bodies[len(bodies)-1]
	if ct := r.Header.Get("Content-Type"); ct != "application/a2a+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if r.Header.Get("Authorization") != "Bearer secret-1" || r.Header.Get("X-A2A-Notification-Token") != "tok-1" {
		t.Errorf("headers %v", r.Header)
	}
	var ev map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &ev) != nil || len(ev) != 1 || ev["statusUpdate"] == nil {
		t.Errorf("body %s, want one StreamResponse statusUpdate", body)
	}
}

// TestJSONRPCWraps: what the wrap around the SDK's JSON-RPC binding
// answers itself.
func TestJSONRPCWraps(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	register(t, base, "", "w", worker(t, `{"status":"accepted"}`).URL)
	post := func(body, version string) call {
		var hdr []string
		if version != "" {
			hdr = []string{"A2A-Version", version}
		}
		return do(t, http.MethodPost, base+"/a2a/w", "", "application/json", []byte(body), hdr...)
	}
	for _, tc := range []struct {
		name, body, version string
		status, code        int
	}{
		{"unsupported version", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, "9.9", 200, a2a.CodeVersionNotSupported},
		{"not JSON", `{"jsonrpc":`, "1.0", 200, a2a.CodeParseError},
		{"params missing", `{"jsonrpc":"2.0","id":1,"method":"GetTask"}`, "1.0", 200, a2a.CodeInvalidParams},
		{"params of the wrong shape", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_NOPE","parts":[]}}}`, "1.0", 200, a2a.CodeInvalidParams},
		{"a key twice", `{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask","params":{"id":"x"}}`, "1.0", 200, a2a.CodeInvalidRequest},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"Nope","params":{}}`, "1.0", 200, a2a.CodeMethodNotFound},
		{"0.3 method with 1.0 header", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, "1.0", 200, a2a.CodeMethodNotFound},
		{"unknown task, 0.3", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, "", 200, a2a.CodeTaskNotFound},
		{"contextId too long", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m-long","contextId":"` + strings.Repeat("c", core.MaxStoredText+1) + `","parts":[{"kind":"text","text":"hi"}]}}}`, "", 200, a2a.CodeInvalidParams},
	} {
		c := post(tc.body, tc.version)
		if c.status != tc.status || c.code() != tc.code {
			t.Errorf("%s: %d %s, want %d with %d", tc.name, c.status, c.raw, tc.status, tc.code)
		}
		if strings.Contains(c.raw, `: invalid"`) {
			t.Errorf("%s: %s names its kind twice", tc.name, c.raw)
		}
	}
	if c := do(t, http.MethodPost, base+"/a2a/w", "", "text/plain", []byte(`{}`)); c.status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain body: %d", c.status)
	}
	if c := post(`{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}`, "1.0"); c.status != http.StatusNoContent {
		t.Errorf("notification: %d %s, want 204", c.status, c.raw)
	}
	c := post(`[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}},{"jsonrpc":"2.0","id":2,"method":"SubscribeToTask","params":{"id":"x"}},{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}]`, "1.0")
	var answers []map[string]any
	if err := json.Unmarshal([]byte(c.raw), &answers); err != nil || len(answers) != 2 {
		t.Fatalf("batch: %s, want two answers (the notification gets none)", c.raw)
	}
	if !strings.Contains(c.raw, "-32001") || !strings.Contains(c.raw, "-32004") {
		t.Errorf("batch answers %s, want task not found and streaming refused", c.raw)
	}
}
