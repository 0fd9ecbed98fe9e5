package a2a_test

import (
	"bufio"
	"bytes"
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

// rpc posts body to url with an optional A2A-Version header and returns
// the status and decoded answer (nil for an empty one).
// post posts a JSON-RPC body with the A2A-Version header (none when
// version is empty). It reports errors instead of failing the test, so any
// goroutine may call it.
func post(url, version, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	return http.DefaultClient.Do(req)
}

func rpc(t *testing.T, url, version, body string) (int, any) {
	t.Helper()
	resp, err := post(url, version, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if len(bytes.TrimSpace(raw)) == 0 {
		return resp.StatusCode, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	return resp.StatusCode, v
}

func errCode(v any) float64 {
	m, _ := v.(map[string]any)
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

type worker struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []map[string]any
}

// startWorker runs an ATP worker answering with reply (a JSON body) and
// status.
func startWorker(t *testing.T, status int, reply string) *worker {
	w := &worker{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var env map[string]any
		_ = json.NewDecoder(r.Body).Decode(&env)
		w.mu.Lock()
		w.seen = append(w.seen, env)
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(status)
		_, _ = io.WriteString(rw, reply)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *worker) last() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) == 0 {
		return nil
	}
	return w.seen[len(w.seen)-1]
}

// await waits for the worker to get an envelope and returns the latest it
// got.
func (w *worker) await(t *testing.T) map[string]any {
	t.Helper()
	var env map[string]any
	waitfor.True(t, "the worker to get the message", func() bool { env = w.last(); return env != nil })
	return env
}

func register(t *testing.T, base, id, callback string, card *core.Card) {
	t.Helper()
	body := map[string]any{"agent_id": id, "callback_url": callback}
	if card != nil {
		body["card"] = card
	}
	b, _ := json.Marshal(body)
	resp, err := http.Post(base+"/atp/register", "application/json", bytes.NewReader(b))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("register %s: %v %v", id, err, resp)
	}
	resp.Body.Close()
}

func send(text string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-` + text + `","role":"ROLE_USER","parts":[{"text":"` + text + `"}]}}}`
}

func TestJSONRPCErrors(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := startWorker(t, 200, `{"status":"accepted","result":{"text":"ok"}}`)
	register(t, base, "w", w.srv.URL, nil)
	register(t, base, "textonly", w.srv.URL, &core.Card{ContentTypes: []string{"text"}, MaxMessageSize: 10})
	url := base + "/a2a/w"
	tests := []struct {
		name, url, version, body string
		code                     float64
	}{
		{"parse error", url, "1.0", `{"jsonrpc":`, -32700},
		{"not an object", url, "1.0", `"x"`, -32600},
		{"empty batch", url, "1.0", `[]`, -32600},
		{"unknown method", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`, -32601},
		{"0.3 name under 1.0", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, -32601},
		{"1.0 name under 0.3", url, "0.3", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, -32601},
		{"bad version", url, "7.1", send("x"), -32009},
		{"no params", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage"}`, -32602},
		{"no message", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, -32602},
		{"no parts", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"a","role":"ROLE_USER","parts":[]}}}`, -32602},
		{"empty part", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"a","role":"ROLE_USER","parts":[{}]}}}`, -32602},
		{"agent role", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"a","role":"ROLE_AGENT","parts":[{"text":"x"}]}}}`, -32602},
		{"no message id", url, "0.3", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","parts":[{"kind":"text","text":"x"}]}}}`, -32602},
		{"bad 0.3 part", url, "0.3", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"a","role":"user","parts":[{"kind":"video"}]}}}`, -32602},
		{"negative history", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","historyLength":-1}}`, -32602},
		{"unknown task", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`, -32001},
		{"unknown task 0.3", url, "", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}}`, -32001},
		{"cancel unknown", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"nope"}}`, -32001},
		{"subscribe unknown", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"nope"}}`, -32001},
		{"push on unknown task", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"nope","url":"http://127.0.0.1:9/x"}}`, -32001},
		{"push bad url", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"nope","url":"ftp://x"}}`, -32602},
		{"extended card", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`, -32007},
		{"bad list page size", url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1000}}`, -32602},
		{"content type", base + "/a2a/textonly", "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"a","role":"ROLE_USER","parts":[{"data":{"a":1}}]}}}`, -32005},
		{"oversized", base + "/a2a/textonly", "1.0", send("this-text-is-longer-than-ten-bytes"), -32602},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, v := rpc(t, tt.url, tt.version, tt.body)
			if got := errCode(v); got != tt.code {
				t.Fatalf("error code %v, want %v (answer %v)", got, tt.code, v)
			}
			if tt.version == "1.0" {
				e := v.(map[string]any)["error"].(map[string]any)
				if d, ok := e["data"].([]any); !ok || len(d) == 0 {
					t.Errorf("1.0 error without ErrorInfo details: %v", e)
				}
			}
		})
	}
	// Nothing was half-stored by the refused sends.
	_, v := rpc(t, url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`)
	if n := v.(map[string]any)["result"].(map[string]any)["totalSize"]; n != float64(0) {
		t.Errorf("refused sends left %v tasks", n)
	}
	if st, v := rpc(t, base+"/a2a/nobody", "1.0", send("x")); st != 404 || errCode(v) != -32600 {
		t.Errorf("unknown agent: %d %v", st, v)
	}
}

func TestBatch(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := startWorker(t, 200, `{"status":"accepted","result":{"text":"ok"}}`)
	register(t, base, "w", w.srv.URL, nil)
	url := base + "/a2a/w"
	_, v := rpc(t, url, "1.0", `[
		{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"nope"}},
		{"jsonrpc":"2.0","method":"GetTask","params":{"id":"nope"}},
		{"foo":1},
		{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":{}},
		`+strings.Replace(send("batched"), `"id":1`, `"id":"b"`, 1)+`
	]`)
	list, ok := v.([]any)
	if !ok || len(list) != 4 {
		t.Fatalf("batch answer = %v, want 4 responses (the notification gets none)", v)
	}
	want := map[string]float64{"a": -32001, "": -32600, "s": -32004, "b": 0}
	for _, x := range list {
		m := x.(map[string]any)
		id, _ := m["id"].(string)
		if got := errCode(m); got != want[id] {
			t.Errorf("response %q: code %v, want %v (%v)", id, got, want[id], m)
		}
	}
	if st, v := rpc(t, url, "1.0", `[{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}]`); st != http.StatusNoContent || v != nil {
		t.Errorf("all-notification batch: %d %v", st, v)
	}
}

func result(t *testing.T, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %v", v)
	}
	return r
}

func TestTaskFollowsRelay(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true, Relay: core.Config{BackoffBase: 10 * time.Millisecond}})
	async := startWorker(t, 200, `{"status":"accepted"}`)
	refuse := startWorker(t, 403, `{"error":"no"}`)
	ask := startWorker(t, 200, `{"status":"input-required","result":{"text":"which city?"}}`)
	register(t, base, "async", async.srv.URL, nil)
	register(t, base, "refuse", refuse.srv.URL, nil)
	register(t, base, "ask", ask.srv.URL, nil)

	// async: working until the worker sends its result with correlation_id.
	task := result(t, second(rpc(t, base+"/a2a/async", "1.0", strings.Replace(send("job"), `"params":{`, `"params":{"configuration":{"returnImmediately":true},`, 1))))["task"].(map[string]any)
	env := async.await(t)
	// The worker has the message; the hub records the delivery once the
	// worker's answer is in, so the task turns working shortly after.
	waitfor.OK(t, "the async task to turn working once delivered", func() error {
		_, v0 := rpc(t, base+"/a2a/async", "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"`+task["id"].(string)+`"}}`)
		if state := result(t, v0)["status"].(map[string]any)["state"]; state != "TASK_STATE_WORKING" {
			return fmt.Errorf("state %v", state)
		}
		return nil
	})
	meta := env["metadata"].(map[string]any)
	if meta["a2a_task_id"] != task["id"] || meta["a2a_context_id"] != task["contextId"] {
		t.Fatalf("relayed metadata %v does not carry the task", meta)
	}
	b, _ := json.Marshal(map[string]any{"atp_version": "1.0", "sender": "async", "receiver": "a2a-client", "type": "result",
		"correlation_id": env["message_id"], "payload": map[string]string{"text": "42"}})
	register(t, base, "a2a-client", "", nil) // a pull inbox so the result can be addressed
	resp, err := http.Post(base+"/atp/send", "application/json", bytes.NewReader(b))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("send result: %v %v", err, resp)
	}
	resp.Body.Close()
	var got map[string]any
	waitfor.OK(t, "the async task to complete with the result", func() error {
		got = result(t, second(rpc(t, base+"/a2a/async", "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"`+task["id"].(string)+`"}}`)))
		if st := got["status"].(map[string]any)["state"]; st != "TASK_STATE_COMPLETED" {
			return fmt.Errorf("state %v", st)
		}
		return nil
	})
	if a, _ := json.Marshal(got["artifacts"]); !strings.Contains(string(a), `"text":"42"`) {
		t.Fatalf("task after result = %v", got)
	}

	// refuse: the worker's 403 rejects the task.
	rt := result(t, second(rpc(t, base+"/a2a/refuse", "0.3", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"r1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`)))
	if rt["kind"] != "task" || rt["status"].(map[string]any)["state"] != "rejected" {
		t.Fatalf("refused task = %v", rt)
	}

	// ask: input-required, then the client's follow-up continues the task.
	at := result(t, second(rpc(t, base+"/a2a/ask", "1.0", send("weather"))))["task"].(map[string]any)
	st := at["status"].(map[string]any)
	if st["state"] != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(mustJSON(st["message"]), "which city?") {
		t.Fatalf("ask task = %v", at)
	}
	follow := `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"configuration":{"returnImmediately":true},"message":{"messageId":"m2","taskId":"` +
		at["id"].(string) + `","role":"ROLE_USER","parts":[{"text":"Paris"}]}}}`
	ft := result(t, second(rpc(t, base+"/a2a/ask", "1.0", follow)))["task"].(map[string]any)
	if ft["id"] != at["id"] || len(ft["history"].([]any)) < 3 {
		t.Fatalf("follow-up task = %v", ft)
	}
	waitfor.OK(t, "the worker to get the follow-up", func() error {
		if e := mustJSON(ask.last()["payload"]); !strings.Contains(e, "Paris") {
			return fmt.Errorf("the worker got %s", e)
		}
		return nil
	})
	// A terminal task refuses further messages and a second cancel.
	_, v := rpc(t, base+"/a2a/refuse", "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m3","taskId":"`+rt["id"].(string)+`","role":"ROLE_USER","parts":[{"text":"again"}]}}}`)
	if errCode(v) != -32004 {
		t.Fatalf("message to a rejected task: %v", v)
	}
	if _, v := rpc(t, base+"/a2a/refuse", "1.0", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"`+rt["id"].(string)+`"}}`); errCode(v) != -32002 {
		t.Fatalf("cancel rejected task: %v", v)
	}
}

func second(_ int, v any) any { return v }

// openStream posts an A2A 1.0 streaming call and returns the data of its
// events as they come; the channel closes when the stream ends.
func openStream(t *testing.T, url, body string) <-chan string {
	t.Helper()
	resp, err := post(url, "1.0", body)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream answer %d %q", resp.StatusCode, ct)
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				events <- data
			}
		}
	}()
	return events
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestCards(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := startWorker(t, 200, `{}`)
	register(t, base, "w", w.srv.URL, &core.Card{Name: "Worker", Description: "does work", ContentTypes: []string{"text", "data"}})
	get := func(path string) map[string]any {
		resp, err := http.Get(base + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, err, resp)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return m
	}
	c := get("/a2a/w/.well-known/agent-card.json")
	ifs := c["supportedInterfaces"].([]any)
	if len(ifs) != 2 || ifs[0].(map[string]any)["url"] != base+"/a2a/w" || ifs[0].(map[string]any)["protocolVersion"] != "1.0" {
		t.Errorf("interfaces = %v", ifs)
	}
	if c["name"] != "Worker" || c["url"] != base+"/a2a/w" || mustJSON(c["defaultInputModes"]) != `["text/plain","application/json"]` {
		t.Errorf("card = %v", c)
	}
	caps := c["capabilities"].(map[string]any)
	if caps["streaming"] != true || caps["pushNotifications"] != true || caps["stateTransitionHistory"] != true {
		t.Errorf("capabilities = %v", caps)
	}
	legacy := get("/a2a/w/.well-known/agent.json")
	if legacy["protocolVersion"] != "0.3.0" || legacy["supportedInterfaces"] != nil || legacy["preferredTransport"] != "JSONRPC" {
		t.Errorf("0.3 card = %v", legacy)
	}
	hubCard := get("/.well-known/agent-card.json")
	if dir := hubCard["agents"].([]any); len(dir) != 1 || dir[0].(map[string]any)["cardUrl"] != base+"/a2a/w/.well-known/agent-card.json" {
		t.Errorf("hub directory = %v", hubCard["agents"])
	}
}

// TestStreamOutlivesBodyTimeout: the hub bounds how long a request body may
// take to arrive, and a POST that opens an event stream has a body; the
// stream must go on long after that bound once the body is in.
func TestStreamOutlivesBodyTimeout(t *testing.T) {
	const bodyTimeout = 200 * time.Millisecond
	_, base := hubtest.Start(t, hub.Options{Dev: true, BodyTimeout: bodyTimeout})
	w := startWorker(t, 200, `{"status":"accepted"}`)
	register(t, base, "slow", w.srv.URL, nil)
	register(t, base, "a2a-client", "", nil)

	events := openStream(t, base+"/a2a/slow", strings.Replace(send("stream"), `"SendMessage"`, `"SendStreamingMessage"`, 1))
	env := w.await(t)
	// The scenario, not a wait for an event: real time passes well beyond
	// the body's deadline (a net/http read deadline, on the real clock).
	time.Sleep(3 * bodyTimeout)
	b, _ := json.Marshal(map[string]any{"atp_version": "1.0", "sender": "slow", "receiver": "a2a-client", "type": "result",
		"correlation_id": env["message_id"], "payload": map[string]string{"text": "late"}})
	r2, err := http.Post(base+"/atp/send", "application/json", bytes.NewReader(b))
	if err != nil || r2.StatusCode != 200 {
		t.Fatalf("send result: %v %v", err, r2)
	}
	r2.Body.Close()
	var seen strings.Builder
	for !strings.Contains(seen.String(), "TASK_STATE_COMPLETED") {
		seen.WriteString(waitfor.Recv(t, "the completion on the stream (so far: "+seen.String()+")", events))
	}
	if !strings.Contains(seen.String(), "late") {
		t.Fatalf("the completion lacks the result: %s", seen.String())
	}
}

// TestPushConfigsPerTask: a task takes at most a2a.MaxPushConfigs push
// notification configs (each change is POSTed to every one); one more is
// refused -32602 and not stored, replacing one is not refused, and a
// deleted one makes room.
func TestPushConfigsPerTask(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	register(t, base, "w", "", nil)
	url := base + "/a2a/w"
	task := result(t, second(rpc(t, url, "1.0", asyncSend("push-bound"))))["task"].(map[string]any)["id"].(string)
	set := func(id string) any {
		_, v := rpc(t, url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"`+task+`","id":"`+id+`","url":"http://127.0.0.1:9/hook-`+id+`"}}`)
		return v
	}
	for i := range a2a.MaxPushConfigs {
		result(t, set(fmt.Sprint("c", i)))
	}
	if code := errCode(set("one-more")); code != -32602 {
		t.Fatalf("config %d: code %v, want -32602", a2a.MaxPushConfigs+1, code)
	}
	result(t, set("c0")) // a replacement
	_, v := rpc(t, url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"`+task+`"}}`)
	if n := len(result(t, v)["configs"].([]any)); n != a2a.MaxPushConfigs {
		t.Fatalf("%d configs listed, want %d", n, a2a.MaxPushConfigs)
	}
	_, v = rpc(t, url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"`+task+`","id":"c3"}}`)
	if e := errCode(v); e != 0 {
		t.Fatalf("delete: code %v", e)
	}
	result(t, set("one-more"))
}

// TestPushConfigsPerTaskAtOnce creates configs for one task concurrently:
// on one hub the bound is exact.
func TestPushConfigsPerTaskAtOnce(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	// Concurrent requests leave the client connections it dialed and did
	// not use; the hub's shutdown would wait 5 s for their first request.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	register(t, base, "w", "", nil)
	url := base + "/a2a/w"
	task := result(t, second(rpc(t, url, "1.0", asyncSend("push-race"))))["task"].(map[string]any)["id"].(string)
	const tries = 3 * a2a.MaxPushConfigs
	var wg sync.WaitGroup
	codes := make([]float64, tries)
	for i := range tries {
		wg.Go(func() {
			// Not rpc: it may call t.Fatal, which only the test's goroutine may.
			resp, err := post(url, "1.0", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":%q,"id":"c%d","url":"http://127.0.0.1:9/hook"}}`, task, i))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var v any
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				t.Errorf("config %d: %v", i, err)
				return
			}
			codes[i] = errCode(v)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	created := 0
	for i, c := range codes {
		switch c {
		case 0:
			created++
		case -32602:
		default:
			t.Fatalf("config %d: code %v", i, c)
		}
	}
	_, v := rpc(t, url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"`+task+`"}}`)
	listed := len(result(t, v)["configs"].([]any))
	if created != a2a.MaxPushConfigs || listed != a2a.MaxPushConfigs {
		t.Fatalf("%d created and %d listed of %d tried at once, want %d", created, listed, tries, a2a.MaxPushConfigs)
	}
}

// TestStreamsPerCaller opens as many streams as one caller may, then one
// more: it is refused with a JSON-RPC error and starts no task; closing a
// stream makes room.
func TestStreamsPerCaller(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	register(t, base, "w", "", nil)
	url := base + "/a2a/w"
	task := result(t, second(rpc(t, url, "1.0", asyncSend("streams"))))["task"].(map[string]any)["id"].(string)
	// open posts a streaming call; it returns the answer and, for a
	// stream, its first event, else the JSON body.
	open := func(body string) (*http.Response, string) {
		t.Helper()
		resp, err := post(url, "1.0", body)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			raw, _ := io.ReadAll(br)
			resp.Body.Close()
			return resp, string(raw)
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before its first event: %v", err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				return resp, data
			}
		}
	}
	var streams []*http.Response
	t.Cleanup(func() {
		for _, r := range streams {
			r.Body.Close()
		}
	})
	subscribe := `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"` + task + `"}}`
	for i := range a2a.MaxStreamsPerCaller {
		resp, first := open(subscribe)
		if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(first, task) {
			t.Fatalf("stream %d: %s %q", i, resp.Header.Get("Content-Type"), first)
		}
		streams = append(streams, resp)
	}
	tasks := func() any {
		_, v := rpc(t, url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`)
		return v.(map[string]any)["result"].(map[string]any)["totalSize"]
	}
	before := tasks()
	resp, body := open(strings.Replace(send("one too many"), `"SendMessage"`, `"SendStreamingMessage"`, 1))
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil || errCode(v) != -32603 || !strings.Contains(body, "streams open") {
		t.Fatalf("stream %d: %d %s", a2a.MaxStreamsPerCaller+1, resp.StatusCode, body)
	}
	if after := tasks(); after != before {
		t.Fatalf("the refused stream started a task: %v tasks, %v before", after, before)
	}
	streams[0].Body.Close()
	waitfor.True(t, "a closed stream to make room for another", func() bool {
		resp, first := open(subscribe)
		if resp.Header.Get("Content-Type") != "text/event-stream" {
			return false
		}
		streams = append(streams, resp)
		return strings.Contains(first, task)
	})
}
