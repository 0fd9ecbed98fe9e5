// Package mcpinterop checks Switchboard's MCP server with third-party MCP
// software: the conformance suite (@modelcontextprotocol/conformance) in
// both protocol eras, the MCP Inspector's CLI, the official TypeScript SDK
// (@modelcontextprotocol/sdk) as an MCP host over Streamable HTTP and
// stdio (a channel host and a tasks host among them), and the official Go
// SDK's client.
//
// Install the npm packages first: npm ci --prefix test/interop/mcp.
package mcpinterop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// node returns the Node 22 binary installed by npm (the conformance tool
// needs Node 22; the machines have Node 20). Without node_modules the test
// fails when CI is set and is skipped otherwise.
func node(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join("node_modules", ".bin", "node"))
	if _, err := os.Stat(filepath.Join("node_modules", "@modelcontextprotocol", "conformance")); err != nil || !exists(bin) {
		if os.Getenv("CI") != "" {
			t.Fatalf("node_modules missing: run npm ci --prefix test/interop/mcp")
		}
		t.Skip("node_modules missing: run npm ci --prefix test/interop/mcp")
	}
	return bin
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// applicable are the conformance scenarios that test the protocol itself;
// they must pass. SCENARIOS.md lists them all.
var applicable = []string{"server-initialize", "logging-set-level", "ping", "completion-complete", "tools-list",
	"server-sse-multiple-streams", "resources-list", "prompts-list", "dns-rebinding-protection"}

func TestConformanceSuite(t *testing.T) {
	nodeBin := node(t)
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, filepath.Join("node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
		"server", "--url", base+"/mcp", "--expected-failures", "expected-failures.yml")
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	t.Logf("conformance output (summary):\n%s", tail(out, "=== SUMMARY ==="))
	if err != nil {
		t.Fatalf("conformance suite: %v (unexpected failures or a stale expected-failures.yml)", err)
	}
	if !strings.Contains(out, "Baseline check passed") {
		t.Fatalf("no baseline verdict in the output")
	}
	for _, s := range applicable {
		if !regexp.MustCompile(`(?m)✓ ` + regexp.QuoteMeta(s) + `: [1-9]\d* passed, 0 failed`).MatchString(out) {
			t.Errorf("applicable scenario %s did not pass", s)
		}
	}
}

// TestConformanceSuite2026: the 2026-07-28 requirements
// (@modelcontextprotocol/conformance@0.2.0-alpha.12 --requirements
// 2026-07-28); the scenarios that need the suite's fixtures are listed in
// expected-failures-2026.yml.
func TestConformanceSuite2026(t *testing.T) {
	nodeBin := node(t)
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, filepath.Join("node_modules", "conformance-2026", "dist", "index.js"),
		"server", "--url", base+"/mcp", "--requirements", "2026-07-28", "--expected-failures", "expected-failures-2026.yml")
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	t.Logf("conformance 2026-07-28 output (summary):\n%s", tail(out, "Total:"))
	if err != nil {
		t.Fatalf("conformance suite: %v (unexpected failures or a stale expected-failures-2026.yml)", err)
	}
	for _, s := range []string{"completion-complete", "tools-list", "server-sse-multiple-streams", "resources-list", "sep-2164-resource-not-found",
		"prompts-list", "dns-rebinding-protection", "caching", "http-header-validation", "input-required-result-unsupported-methods",
		"input-required-result-validate-input"} {
		if !regexp.MustCompile(`(?m)✓ ` + regexp.QuoteMeta(s) + `: [1-9]\d* passed, 0 failed`).MatchString(out) {
			t.Errorf("scenario %s did not pass", s)
		}
	}
	// The tasks extension's checks that need no fixture: advertised in
	// server/discover, and the tasks methods gated by -32021.
	if !regexp.MustCompile(`(?m)tasks-capability-negotiation: [3-9] passed`).MatchString(out) {
		t.Errorf("tasks-capability-negotiation: the extension's advertisement and gate did not pass")
	}
}

// TestInspectorCLI: the MCP Inspector's CLI lists the tools, resources and
// prompts, and its schema-portability check finds nothing (--strict makes
// a warning fail the run).
func TestInspectorCLI(t *testing.T) {
	nodeBin := node(t)
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	for _, method := range []string{"tools/list", "resources/list", "resources/templates/list", "prompts/list"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		args := []string{filepath.Join("node_modules", ".bin", "mcp-inspector"), "--cli", base + "/mcp", "--method", method}
		if method == "tools/list" {
			args = append(args, "--strict") // the Inspector checks schemas for tools/list only
		}
		cmd := exec.CommandContext(ctx, nodeBin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil || strings.Contains(strings.ToLower(stderr.String()), "warning") {
			t.Fatalf("inspector %s: %v\nstderr:\n%s", method, err, stderr.String())
		}
		if method == "tools/list" && !strings.Contains(stdout.String(), `"send_message"`) {
			t.Fatalf("inspector tools/list: %s", stdout.String())
		}
	}
}

// TestTypeScriptChannelHost: a host on the TypeScript SDK launches
// switchboard mcp --embedded --agent reviewer on stdio, declaring the
// channel capability; an ATP agent's message arrives as a
// notifications/claude/channel event; the reply tool answers; the ATP
// agent reads the answer.
func TestTypeScriptChannelHost(t *testing.T) {
	nodeBin := node(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	steps := runScript(t, nodeBin, "channel_host.mjs", "channel", bin, t.TempDir())
	var conn struct {
		Capabilities map[string]any `json:"capabilities"`
	}
	_ = json.Unmarshal(steps["connected"], &conn)
	if exp, _ := conn.Capabilities["experimental"].(map[string]any); exp["claude/channel"] == nil {
		t.Fatalf("capabilities %v lack claude/channel", conn.Capabilities)
	}
	var ev struct {
		Event struct {
			Content string            `json:"content"`
			Meta    map[string]string `json:"meta"`
		} `json:"event"`
	}
	_ = json.Unmarshal(steps["event"], &ev)
	if ev.Event.Content != "Please review PR 7." || ev.Event.Meta["sender"] != "author" || ev.Event.Meta["message_id"] != "review-req-1" ||
		ev.Event.Meta["conversation_id"] != "pr-7" {
		t.Fatalf("event = %+v", ev.Event)
	}
	var ans struct {
		Results []struct {
			Sender, CorrelationID, ConversationID string
			Payload                               map[string]any
		} `json:"results"`
	}
	_ = json.Unmarshal(steps["answer"], &ans)
	if len(ans.Results) != 1 || ans.Results[0].Payload["text"] != "PR 7: approved." {
		t.Fatalf("answer = %s", steps["answer"])
	}
	var raw []map[string]any
	_ = json.Unmarshal(steps["answer"], &struct{ Results *[]map[string]any }{&raw})
	if raw[0]["correlation_id"] != "review-req-1" || raw[0]["conversation_id"] != "pr-7" || raw[0]["sender"] != "reviewer" {
		t.Fatalf("answer = %v", raw[0])
	}
}

// TestTypeScriptTasks: the TypeScript SDK's experimental tasks client
// (2025-11-25 tasks) runs send_message and wait_for_reply as tasks
// against switchboard mcp --embedded and lists them.
func TestTypeScriptTasks(t *testing.T) {
	nodeBin := node(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	steps := runScript(t, nodeBin, "channel_host.mjs", "tasks", bin, t.TempDir())
	var send, wait struct {
		Seen   []string       `json:"seen"`
		Result map[string]any `json:"result"`
	}
	_ = json.Unmarshal(steps["send"], &send)
	_ = json.Unmarshal(steps["wait"], &wait)
	if len(send.Seen) == 0 || send.Seen[0] != "taskCreated" || send.Seen[len(send.Seen)-1] != "result" || send.Result["status"] != "delivered" {
		t.Fatalf("send task: %s", steps["send"])
	}
	reply, _ := wait.Result["reply"].(map[string]any)
	if wait.Seen[0] != "taskCreated" || wait.Result["outcome"] != "reply" || wait.Result["source"] != "inline" || reply["text"] != "reversed: cba" {
		t.Fatalf("wait task: %s", steps["wait"])
	}
	var list struct {
		Tasks []map[string]any `json:"tasks"`
	}
	_ = json.Unmarshal(steps["list"], &list)
	if len(list.Tasks) != 2 || list.Tasks[0]["status"] != "completed" || list.Tasks[1]["status"] != "completed" {
		t.Fatalf("tasks/list: %s", steps["list"])
	}
}

// runScript runs a node script and returns its steps (one JSON object per
// line, keyed by "step"), failing the test if it fails.
func runScript(t *testing.T, nodeBin, script string, args ...string) map[string]json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	steps := map[string]json.RawMessage{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		var s struct{ Step string }
		if json.Unmarshal([]byte(line), &s) == nil && s.Step != "" {
			steps[s.Step] = json.RawMessage(line)
		}
	}
	if err != nil {
		t.Fatalf("%s %v: %v\nerror step: %s\nstderr:\n%s", script, args, err, steps["error"], stderr.String())
	}
	return steps
}

func tail(s, from string) string {
	if i := strings.Index(s, from); i >= 0 {
		return s[i:]
	}
	return s
}

// worker is a real ATP agent: a callback server that accepts each task and
// answers it with a task.result correlated to it, sent to the sender
// through the hub's POST /atp/send.
type worker struct {
	id      string
	srv     *httptest.Server
	mu      sync.Mutex
	hub     string
	token   string
	hubSet  chan struct{}
	once    sync.Once
	tasks   chan map[string]any
	replies chan int
}

func newWorker(t *testing.T, id string) *worker {
	w := &worker{id: id, hubSet: make(chan struct{}), tasks: make(chan map[string]any, 10), replies: make(chan int, 10)}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var env map[string]any
		if err := json.NewDecoder(r.Body).Decode(&env); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.tasks <- env
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"status":"accepted"}`))
		go w.answer(env)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *worker) setHub(url string) {
	w.once.Do(func() {
		w.mu.Lock()
		w.hub = url
		w.mu.Unlock()
		close(w.hubSet)
	})
}

func (w *worker) register(t *testing.T, hubURL string) {
	t.Helper()
	w.setHub(hubURL)
	b, _ := json.Marshal(map[string]any{"agent_id": w.id, "callback_url": w.srv.URL, "capabilities": []string{"echo"}})
	resp, err := http.Post(hubURL+"/atp/register", "application/json", bytes.NewReader(b))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("register worker: %v %v", err, resp)
	}
	defer resp.Body.Close()
	var reg struct{ Token string }
	_ = json.NewDecoder(resp.Body).Decode(&reg)
	w.mu.Lock()
	w.token = reg.Token // empty with auth off
	w.mu.Unlock()
}

func (w *worker) answer(env map[string]any) {
	<-w.hubSet
	w.mu.Lock()
	hubURL, token := w.hub, w.token
	w.mu.Unlock()
	payload, _ := env["payload"].(map[string]any)
	text, _ := payload["text"].(string)
	b, _ := json.Marshal(map[string]any{"atp_version": "1.0", "sender": w.id, "receiver": env["sender"], "type": "task.result",
		"correlation_id": env["message_id"], "payload": map[string]any{"text": "pong: " + text}})
	req, _ := http.NewRequest(http.MethodPost, hubURL+"/atp/send", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	code := 0
	if err == nil {
		code = resp.StatusCode
		resp.Body.Close()
	}
	w.replies <- code
}

// step is one line the TypeScript host prints.
type step struct {
	Step  string `json:"step"`
	Error string `json:"error"`
	URL   string `json:"url"`
	Names []string
	// Output schemas advertised, sent and reply results.
	WithOutputSchema int            `json:"withOutputSchema"`
	Result           map[string]any `json:"result"`
	Text             []string       `json:"text"`
	Progress         int            `json:"progress"`
}

// runHost runs client.mjs and returns its steps; onStep sees each as it
// arrives.
func runHost(t *testing.T, nodeBin string, onStep func(step), args ...string) map[string]step {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, append([]string{"client.mjs"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	steps := map[string]step{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s step
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Logf("host: %s", sc.Text())
			continue
		}
		if s.Step == "tools" {
			var raw struct{ Names []string }
			_ = json.Unmarshal(sc.Bytes(), &raw)
			s.Names = raw.Names
		}
		steps[s.Step] = s
		if onStep != nil {
			onStep(s)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("TypeScript host failed: %v\nerror step: %s\nstderr:\n%s", err, steps["error"].Error, stderr.String())
	}
	return steps
}

// checkConversation asserts the host listed the tools, sent the message and
// got the worker's reply.
func checkConversation(t *testing.T, steps map[string]step, w *worker) {
	t.Helper()
	tools := strings.Join(steps["tools"].Names, ",")
	for _, want := range []string{"list_agents", "get_agent_card", "send_message", "get_receipt", "wait_for_reply", "list_conversations", "get_conversation"} {
		if !strings.Contains(tools, want) {
			t.Errorf("tools %s lack %s", tools, want)
		}
	}
	if steps["tools"].WithOutputSchema < 7 {
		t.Errorf("%d tools have an output schema", steps["tools"].WithOutputSchema)
	}
	task := <-w.tasks
	if task["sender"] != "mcp-host" || task["payload"].(map[string]any)["text"] != "ping from the TypeScript SDK" {
		t.Fatalf("worker got %v", task)
	}
	if code := <-w.replies; code != http.StatusOK {
		t.Fatalf("worker's reply: HTTP %d", code)
	}
	sent, reply := steps["sent"].Result, steps["reply"].Result
	if sent["sender"] != "mcp-host" || sent["receiver"] != w.id || sent["message_id"] != task["message_id"] {
		t.Fatalf("sent = %v", sent)
	}
	r, _ := reply["reply"].(map[string]any)
	if reply["outcome"] != "reply" || r["text"] != "pong: ping from the TypeScript SDK" || r["correlation_id"] != sent["message_id"] || r["sender"] != w.id {
		t.Fatalf("reply = %v", reply)
	}
	if !strings.Contains(strings.Join(steps["reply"].Text, "\n"), "pong: ping from the TypeScript SDK") {
		t.Fatalf("reply text content = %v", steps["reply"].Text)
	}
	t.Logf("progress notifications seen by the host while waiting: %d", steps["reply"].Progress)
}

func TestTypeScriptHostOverHTTP(t *testing.T) {
	nodeBin := node(t)
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := newWorker(t, "ts-http-worker")
	w.register(t, base)
	checkConversation(t, runHost(t, nodeBin, nil, "http", base+"/mcp", w.id), w)
}

// buildSwitchboard builds the switchboard binary once per test binary.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "switchboard-mcp-interop")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "switchboard")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command("go", "build", "-o", bin, "github.com/switchboard-hub/switchboard/cmd/switchboard").CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

func TestTypeScriptHostOverStdioBridge(t *testing.T) {
	nodeBin := node(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := newWorker(t, "ts-bridge-worker")
	w.register(t, base)
	checkConversation(t, runHost(t, nodeBin, nil, "stdio-bridge", bin, base, w.id), w)
}

func TestTypeScriptHostOverStdioEmbedded(t *testing.T) {
	nodeBin := node(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, "ts-embedded-worker")
	steps := runHost(t, nodeBin, func(s step) {
		if s.Step == "hub" {
			w.setHub(s.URL) // the host registered the worker at the embedded hub
		}
	}, "stdio-embedded", bin, t.TempDir(), w.id, w.srv.URL)
	if steps["hub"].URL == "" {
		t.Fatal("the embedded hub's address was not reported")
	}
	checkConversation(t, steps, w)
}

// TestGoSDKClient: the official Go SDK's client, over Streamable HTTP to a
// hub with auth on (an agent's token) and over stdio through the bridge:
// it finds the worker, sends, and gets the answer with wait_for_reply.
func TestGoSDKClient(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	w := newWorker(t, "go-sdk-worker")
	w.register(t, base)
	var reg struct{ Token string }
	b, _ := json.Marshal(map[string]any{"agent_id": "go-host"})
	resp, err := http.Post(base+"/atp/register", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	ctx := context.Background()
	hc := &http.Client{Transport: bearerRT{reg.Token}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-host", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "send_message", Arguments: map[string]any{"to": w.id, "text": "from go"}})
	if err != nil || res.IsError {
		t.Fatalf("send: %v %v", err, res)
	}
	id := res.StructuredContent.(map[string]any)["message_id"]
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "wait_for_reply", Arguments: map[string]any{"message_id": id, "timeout_ms": 30000}})
	if err != nil || res.IsError {
		t.Fatalf("wait: %v %v", err, res)
	}
	reply, _ := res.StructuredContent.(map[string]any)["reply"].(map[string]any)
	if reply["text"] != "pong: from go" || reply["receiver"] != "go-host" {
		t.Fatalf("reply = %v", res.StructuredContent)
	}
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
