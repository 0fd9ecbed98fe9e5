// Package codinginbox is the walkthrough of README.md, run as a test: two
// coding-agent sessions, scripted as MCP hosts that speak the documented
// shapes (Claude Code's channel notifications and hook contract), hand a
// review request and its answer to each other through a hub, the reviewer
// offline while the request is sent. The sessions run the real
// switchboard binary with the configuration files of this directory.
package codinginbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proctest"
)

// docHub is the hub URL the configuration files name.
const docHub = "http://127.0.0.1:8080"

// session is an MCP host: the server command of an .mcp.json, run as a
// child process, spoken to in newline-delimited JSON-RPC on its stdio.
type session struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	mu     sync.Mutex
	nextID int
	resp   map[int]chan map[string]any
	notes  chan map[string]any
	stderr *proctest.SafeBuffer
}

// startSession starts the "switchboard" server of the .mcp.json at path,
// as a host does: ${VAR} expanded from env, the hub URL replaced by base.
func startSession(t *testing.T, path, bin, base string, env map[string]string) *session {
	t.Helper()
	var cfg struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]string
		} `json:"mcpServers"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	srv := cfg.MCPServers["switchboard"]
	if srv.Command != "switchboard" {
		t.Fatalf("%s: command %q", path, srv.Command)
	}
	expand := func(s string) string {
		return strings.ReplaceAll(os.Expand(s, func(k string) string { return env[k] }), docHub, base)
	}
	var args []string
	for _, a := range srv.Args {
		args = append(args, expand(a))
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+expand(v))
	}
	s := &session{t: t, cmd: cmd, resp: map[int]chan map[string]any{}, notes: make(chan map[string]any, 100), stderr: &proctest.SafeBuffer{}}
	cmd.Stderr = s.stderr
	if s.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			if id, ok := m["id"].(float64); ok && m["method"] == nil {
				s.mu.Lock()
				ch := s.resp[int(id)]
				s.mu.Unlock()
				if ch != nil {
					ch <- m
				}
				continue
			}
			s.notes <- m
		}
		close(done)
	}()
	t.Cleanup(func() { s.stop(done) })
	return s
}

// stop closes the session's stdin (a host quitting) and waits for the
// server to end.
func (s *session) stop(done chan struct{}) {
	s.in.Close()
	exited := make(chan error, 1)
	go func() { <-done; exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			s.t.Errorf("switchboard mcp: %v\n%s", err, s.stderr.String())
		}
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		s.t.Errorf("switchboard mcp did not end within 20 s of its host leaving")
	}
}

func (s *session) request(method string, params any) map[string]any {
	s.t.Helper()
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	ch := make(chan map[string]any, 1)
	s.resp[id] = ch
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		s.t.Fatal(err)
	}
	select {
	case m := <-ch:
		if m["error"] != nil {
			s.t.Fatalf("%s: %v", method, m["error"])
		}
		r, _ := m["result"].(map[string]any)
		return r
	case <-time.After(30 * time.Second):
		s.t.Fatalf("%s: no answer within 30 s\n%s", method, s.stderr.String())
	}
	return nil
}

// initialize is a host's handshake; channel hosts declare the capability.
func (s *session) initialize(channel bool) map[string]any {
	s.t.Helper()
	caps := map[string]any{}
	if channel {
		caps["experimental"] = map[string]any{"claude/channel": map[string]any{}}
	}
	r := s.request("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": caps,
		"clientInfo": map[string]any{"name": "walkthrough-host", "version": "1"}})
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		s.t.Fatal(err)
	}
	caps, _ = r["capabilities"].(map[string]any)
	return caps
}

func (s *session) tool(name string, args map[string]any) map[string]any {
	s.t.Helper()
	r := s.request("tools/call", map[string]any{"name": name, "arguments": args})
	if r["isError"] == true {
		s.t.Fatalf("%s: %v", name, r["content"])
	}
	sc, _ := r["structuredContent"].(map[string]any)
	return sc
}

// channelEvent waits for a notifications/claude/channel.
func (s *session) channelEvent() (content string, meta map[string]string) {
	s.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-s.notes:
			if m["method"] != "notifications/claude/channel" {
				continue
			}
			var p struct {
				Content string            `json:"content"`
				Meta    map[string]string `json:"meta"`
			}
			b, _ := json.Marshal(m["params"])
			if err := json.Unmarshal(b, &p); err != nil {
				s.t.Fatal(err)
			}
			return p.Content, p.Meta
		case <-timeout:
			s.t.Fatalf("no channel event within 30 s\n%s", s.stderr.String())
		}
	}
}

// hookCommand is the command line of event in the settings file at path.
func hookCommand(t *testing.T, path, event string) string {
	t.Helper()
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct{ Type, Command string }
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, g := range s.Hooks[event] {
		for _, h := range g.Hooks {
			if h.Type == "command" && strings.Contains(h.Command, "hook inbox") {
				return h.Command
			}
		}
	}
	t.Fatalf("%s has no inbox hook for %s", path, event)
	return ""
}

// runHook runs a hook's command line as the host does (through the shell,
// the payload on stdin) and returns its JSON answer.
func runHook(t *testing.T, command, base, home, binDir string, payload map[string]any) map[string]any {
	t.Helper()
	in, _ := json.Marshal(payload)
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(command, docHub, base))
	cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hook %q: %v\n%s", command, err, stderr.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("hook %q answered %q (%v)\n%s", command, out, err, stderr.String())
	}
	return v
}

// register registers a pull agent on the hub and returns its token.
func register(t *testing.T, base, id string) string {
	t.Helper()
	resp, err := http.Post(base+"/atp/register", "application/json", strings.NewReader(`{"agent_id":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reg struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil || reg.Token == "" {
		t.Fatalf("register %s: %d %v", id, resp.StatusCode, err)
	}
	return reg.Token
}

// TestWalkthrough is README.md's walkthrough.
func TestWalkthrough(t *testing.T) {
	bin := proctest.Binary(t)
	binDir := filepath.Dir(bin)
	_, base := hubtest.Start(t, hub.Options{}) // auth on
	// Step 1: one identity per session.
	env := map[string]string{"SWITCHBOARD_REVIEWER_TOKEN": register(t, base, "reviewer"), "SWITCHBOARD_AUTHOR_TOKEN": register(t, base, "author")}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".switchboard"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".switchboard", "author.token"), []byte(env["SWITCHBOARD_AUTHOR_TOKEN"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join("author", ".claude", "settings.json")

	// Step 2: the author's session asks for a review while the reviewer's
	// session is not running.
	author := startSession(t, filepath.Join("author", ".mcp.json"), bin, base, env)
	author.initialize(false)
	sent := author.tool("send_message", map[string]any{"to": "reviewer", "conversation_id": "pr-12",
		"text": "Please review PR 12: it makes the retry loop back off exponentially."})
	if sent["status"] != "queued" || sent["sender"] != "author" {
		t.Fatalf("send = %v", sent)
	}
	// The author's turn ends: nothing to answer yet, so Stop passes.
	stop := map[string]any{"session_id": "author-1", "hook_event_name": "Stop", "stop_hook_active": false}
	if v := runHook(t, hookCommand(t, settings, "Stop"), base, home, binDir, stop); len(v) != 0 {
		t.Fatalf("Stop with an empty inbox = %v", v)
	}

	// Step 3: the reviewer's session starts; the request is pushed into it.
	reviewer := startSession(t, filepath.Join("reviewer", ".mcp.json"), bin, base, env)
	caps := reviewer.initialize(true)
	if exp, _ := caps["experimental"].(map[string]any); exp["claude/channel"] == nil {
		t.Fatalf("the reviewer's server does not declare claude/channel: %v", caps)
	}
	content, meta := reviewer.channelEvent()
	if !strings.Contains(content, "Please review PR 12") || meta["sender"] != "author" || meta["conversation_id"] != "pr-12" ||
		meta["message_id"] != sent["message_id"] {
		t.Fatalf("channel event %q %v", content, meta)
	}
	// The reviewer answers with the reply tool.
	ans := reviewer.tool("reply", map[string]any{"message_id": meta["message_id"],
		"text": "Approved, with one nit: cap the backoff at 30 s."})
	if ans["receiver"] != "author" || ans["conversation_id"] != "pr-12" {
		t.Fatalf("reply = %v", ans)
	}

	// Step 4: at the author's next prompt the answer is in its context.
	prompt := map[string]any{"session_id": "author-1", "hook_event_name": "UserPromptSubmit", "prompt": "what's next?"}
	v := runHook(t, hookCommand(t, settings, "UserPromptSubmit"), base, home, binDir, prompt)
	out, _ := v["hookSpecificOutput"].(map[string]any)
	ctxText, _ := out["additionalContext"].(string)
	if out["hookEventName"] != "UserPromptSubmit" || !strings.Contains(ctxText, "cap the backoff at 30 s") ||
		!strings.Contains(ctxText, "answering your message "+sent["message_id"].(string)) {
		t.Fatalf("UserPromptSubmit = %v", v)
	}
	// Shown once: the next prompt has nothing new.
	if v := runHook(t, hookCommand(t, settings, "UserPromptSubmit"), base, home, binDir, prompt); len(v) != 0 {
		t.Fatalf("the answer was shown twice: %v", v)
	}
	// The author's session also reads the whole exchange.
	conv := author.tool("get_conversation", map[string]any{"conversation_id": "pr-12"})
	if msgs, _ := conv["messages"].([]any); len(msgs) != 2 {
		t.Fatalf("conversation = %v", conv)
	}
}
