// Package mcpinterop checks Switchboard's MCP server with third-party MCP
// software: the conformance suite (@modelcontextprotocol/conformance) and
// the official TypeScript SDK (@modelcontextprotocol/sdk) as an MCP host,
// over Streamable HTTP and over stdio.
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
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// node returns the Node 22 binary installed by npm (the conformance tool
// needs Node 22; the machines have Node 20). Without node_modules the test
// fails when CI is set and is skipped otherwise.
func node(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs third-party programs (Node.js) against a hub: full lane, not with -short")
	}
	bin, _ := filepath.Abs(filepath.Join("node_modules", ".bin", "node"))
	if _, err := os.Stat(filepath.Join("node_modules", "@modelcontextprotocol", "conformance")); err != nil || !exists(bin) {
		if os.Getenv("CI") != "" {
			t.Fatalf("node_modules missing: run npm ci --prefix test/interop/mcp")
		}
		t.Skip("node_modules missing: run npm ci --prefix test/interop/mcp")
	}
	return bin
}

func TestMain(m *testing.M) { proctest.Main(m) }

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
	cmd := proctest.Command(ctx, nodeBin, filepath.Join("node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
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
	resp.Body.Close()
}

func (w *worker) answer(env map[string]any) {
	<-w.hubSet
	w.mu.Lock()
	hubURL := w.hub
	w.mu.Unlock()
	payload, _ := env["payload"].(map[string]any)
	text, _ := payload["text"].(string)
	b, _ := json.Marshal(map[string]any{"atp_version": "1.0", "sender": w.id, "receiver": env["sender"], "type": "task.result",
		"correlation_id": env["message_id"], "payload": map[string]any{"text": "pong: " + text}})
	resp, err := http.Post(hubURL+"/atp/send", "application/json", bytes.NewReader(b))
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
	cmd := proctest.Command(ctx, nodeBin, append([]string{"client.mjs"}, args...)...)
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
	task := waitfor.Recv(t, "the worker to receive the host's message", w.tasks)
	if task["sender"] != "mcp-host" || task["payload"].(map[string]any)["text"] != "ping from the TypeScript SDK" {
		t.Fatalf("worker got %v", task)
	}
	if code := waitfor.Recv(t, "the worker's reply to be sent", w.replies); code != http.StatusOK {
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

func TestTypeScriptHostOverStdioBridge(t *testing.T) {
	nodeBin := node(t)
	bin := proctest.Binary(t)
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := newWorker(t, "ts-bridge-worker")
	w.register(t, base)
	checkConversation(t, runHost(t, nodeBin, nil, "stdio-bridge", bin, base, w.id), w)
}

func TestTypeScriptHostOverStdioEmbedded(t *testing.T) {
	nodeBin := node(t)
	bin := proctest.Binary(t)
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
