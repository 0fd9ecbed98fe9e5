package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// isolate gives the test its own configuration directory and clears the
// variables that would name a hub or a token.
func isolate(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("SWITCHBOARD_CONFIG_DIR", dir)
	for _, k := range []string{"SWITCHBOARD_HUB", "SWITCHBOARD_TOKEN", "SWITCHBOARD_CONTEXT"} {
		t.Setenv(k, "")
	}
	t.Setenv("SWITCHBOARD_DATA", filepath.Join(dir, "no-data-here"))
	return dir
}

func registerAgent(t *testing.T, base, id, callback string) string {
	t.Helper()
	body := `{"agent_id":"` + id + `"`
	if callback != "" {
		body += `,"callback_url":"` + callback + `"`
	}
	resp, err := http.Post(base+"/atp/register", "application/json", strings.NewReader(body+"}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reg struct {
		Token string `json:"token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&reg)
	if resp.StatusCode != 200 || reg.Token == "" {
		t.Fatalf("register %s: %d", id, resp.StatusCode)
	}
	return reg.Token
}

func TestLoginAndContexts(t *testing.T) {
	dir := isolate(t)
	h, base := hubtest.Start(t, hub.Options{})
	workerTok := registerAgent(t, base, "worker", "")
	tokFile := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(tokFile, []byte(h.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Without a context or a token, listing agents is refused.
	if code, _, _ := run(t, "", "agents", "--hub", base); code != exitUsage {
		t.Fatalf("agents with no token: exit %d, want 2 (401)", code)
	}
	steps := []struct {
		name     string
		stdin    string
		args     []string
		code     int
		contains string
	}{
		{"a wrong token is not saved", "", []string{"login", "--hub", base, "--token", "sba_wrong"}, exitUsage, "401"},
		{"login as the operator from a file", "", []string{"login", "--hub", base, "--token-file", tokFile, "--name", "ops"}, exitOK, "as admin"},
		{"commands use the current context", "", []string{"dlq", "list"}, exitOK, "MESSAGE"},
		{"login as an agent from standard input", workerTok + "\n", []string{"login", "--hub", base, "--name", "worker"}, exitOK, "as agent:worker"},
		{"the agent's context cannot list dead letters", "", []string{"dlq", "list"}, exitUsage, "403"},
		{"--context picks another", "", []string{"dlq", "list", "--context", "ops"}, exitOK, "MESSAGE"},
		{"SWITCHBOARD_CONTEXT too", "", []string{"agents", "--output", "json"}, exitOK, `"worker"`},
		{"an unknown context is an error", "", []string{"agents", "--context", "nope"}, exitUsage, `no context "nope"`},
		{"context list", "", []string{"context"}, exitOK, "worker"},
		{"switch back", "", []string{"context", "use", "ops"}, exitOK, `"ops" in use`},
		{"the operator again", "", []string{"dlq", "list", "--output", "json"}, exitOK, "["},
		{"a flag's hub does not get the context's token", "", []string{"dlq", "list", "--hub", "http://" + base[len("http://"):] + "/"}, exitOK, ""},
		{"logout forgets the token", "", []string{"logout"}, exitOK, "forgotten"},
		{"then the operator's call is refused", "", []string{"dlq", "list"}, exitUsage, "401"},
		{"remove a context", "", []string{"context", "remove", "worker"}, exitOK, "removed"},
		{"bad --output", "", []string{"context", "list", "--output", "yaml"}, exitUsage, "want table or json"},
	}
	for _, st := range steps {
		if st.name == "SWITCHBOARD_CONTEXT too" {
			t.Setenv("SWITCHBOARD_CONTEXT", "ops")
		} else {
			t.Setenv("SWITCHBOARD_CONTEXT", "")
		}
		code, out, errOut := run(t, st.stdin, st.args...)
		if code != st.code || !strings.Contains(out+errOut, st.contains) {
			t.Fatalf("%s: %v: exit %d (want %d)\nstdout: %s\nstderr: %s", st.name, st.args, code, st.code, out, errOut)
		}
	}
	// The file is private and holds no token that was logged out.
	path := filepath.Join(dir, "contexts.json")
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("contexts file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), h.AdminToken) || strings.Contains(string(b), workerTok) {
		t.Fatalf("logged-out or removed tokens still in %s:\n%s", path, b)
	}
	_, out, _ := run(t, "", "context", "list", "--output", "json")
	if strings.Contains(out, "sba_") || strings.Contains(out, "sbk_") {
		t.Fatalf("context list prints tokens: %s", out)
	}
}

func TestTokenAndDeregisterCommands(t *testing.T) {
	isolate(t)
	h, base := hubtest.Start(t, hub.Options{})
	t.Setenv("SWITCHBOARD_HUB", base)
	oldTok := registerAgent(t, base, "worker", "")
	registerAgent(t, base, "other", "")
	newFile := filepath.Join(t.TempDir(), "worker.token")
	steps := []struct {
		name     string
		token    string
		args     []string
		code     int
		contains string
	}{
		{"the agent rotates its own token", oldTok, []string{"token", "rotate", "worker", "--write", newFile}, exitOK, "written to"},
		{"the old token no longer works", oldTok, []string{"agents"}, exitUsage, "401"},
		{"the operator rotates, printing it", h.AdminToken, []string{"token", "rotate", "other", "--output", "json"}, exitOK, `"token": "sbk_`},
		{"unknown agent", h.AdminToken, []string{"token", "rotate", "ghost"}, exitNotFound, "404"},
		{"bad subcommand", h.AdminToken, []string{"token", "mint", "x"}, exitUsage, `unknown subcommand "mint"`},
		{"the operator revokes", h.AdminToken, []string{"token", "revoke", "other"}, exitOK, "every token revoked"},
		{"deregister needs the right credential", "", []string{"agents", "deregister", "other"}, exitUsage, "401"},
		{"the operator deregisters", h.AdminToken, []string{"agents", "deregister", "other"}, exitOK, "other deregistered"},
		{"it is gone", h.AdminToken, []string{"agents", "--output", "json"}, exitOK, `"worker"`},
		{"deregister an unknown agent", h.AdminToken, []string{"agents", "deregister", "ghost"}, exitNotFound, ""},
	}
	for _, st := range steps {
		t.Setenv("SWITCHBOARD_TOKEN", st.token)
		code, out, errOut := run(t, "", st.args...)
		if code != st.code || !strings.Contains(out+errOut, st.contains) {
			t.Fatalf("%s: %v: exit %d (want %d)\nstdout: %s\nstderr: %s", st.name, st.args, code, st.code, out, errOut)
		}
		if st.name == "it is gone" && strings.Contains(out, `"other"`) {
			t.Fatalf("deregistered agent still listed: %s", out)
		}
	}
	b, err := os.ReadFile(newFile)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(newFile); st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", st.Mode().Perm())
	}
	t.Setenv("SWITCHBOARD_TOKEN", strings.TrimSpace(string(b)))
	if code, out, errOut := run(t, "", "agents", "--output", "table"); code != exitOK || !strings.Contains(out, "worker") {
		t.Fatalf("the rotated token: exit %d %s %s", code, out, errOut)
	}
}

// TestDeadLettersShowTheLastError: receivers answering 500 or refusing
// connections until the TTL passes leave dead letters whose last error
// and attempt count the CLI shows.
func TestDeadLettersShowTheLastError(t *testing.T) {
	isolate(t)
	h, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	t.Setenv("SWITCHBOARD_HUB", base)
	t.Setenv("SWITCHBOARD_TOKEN", h.AdminToken)
	failing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	srv := &http.Server{Handler: failing}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + closed.Addr().String() + "/inbox"
	closed.Close() // nothing listens there now: connections are refused
	registerAgent(t, base, "sender", "")
	registerAgent(t, base, "failing", "http://"+ln.Addr().String()+"/inbox")
	registerAgent(t, base, "refusing", refusedURL)
	const n = 4
	for i := range n {
		for _, to := range []string{"failing", "refusing"} {
			id := to + "-" + string(rune('0'+i))
			if code, _, errOut := run(t, "", "send", "--from", "sender", "--to", to, "--text", "x", "--id", id, "--ttl", "1500ms"); code != exitOK {
				t.Fatalf("send %s: %d %s", id, code, errOut)
			}
		}
	}
	var list []map[string]any
	waitfor.OKWithin(t, 20*time.Second, fmt.Sprintf("%d dead letters", 2*n), func() error {
		_, out, _ := run(t, "", "dlq", "list", "--output", "json")
		list = nil
		_ = json.Unmarshal([]byte(out), &list)
		if len(list) != 2*n {
			return fmt.Errorf("%d dead letters so far", len(list))
		}
		return nil
	})
	// The first message of each receiver was tried and keeps its own last
	// error; the ones behind it were tried too (their own error) or timed
	// out held behind it, which their error says.
	for _, dl := range list {
		id, _ := dl["message_id"].(string)
		lastErr, _ := dl["last_error"].(string)
		attempts, _ := dl["attempts"].(float64)
		code, _ := dl["code"].(float64)
		want := "connection refused"
		if strings.HasPrefix(id, "failing") {
			want = "receiver answered 500"
			if code != 500 {
				t.Errorf("%s: code %v, want 500", id, code)
			}
		}
		head := strings.HasSuffix(id, "-0")
		switch {
		case !strings.Contains(lastErr, want):
			t.Errorf("%s: last error %q, want %q in it (attempts %v)", id, lastErr, want, attempts)
		case head && attempts < 1:
			t.Errorf("%s: %v attempts, want at least 1", id, attempts)
		case attempts == 0 && !strings.Contains(lastErr, "held behind "+strings.TrimSuffix(id, id[len(id)-2:])+"-0"):
			t.Errorf("%s: not attempted, yet its error does not say what held it: %q", id, lastErr)
		}
	}
	_, out, _ := run(t, "", "dlq", "list")
	if !strings.Contains(out, "CODE") || !strings.Contains(out, "receiver answered 500") || !strings.Contains(out, "connection refused") {
		t.Fatalf("dlq list table:\n%s", out)
	}
	_, out, _ = run(t, "", "receipts", "failing-0")
	if !strings.Contains(out, "code      500") || !strings.Contains(out, "error     receiver answered 500") {
		t.Fatalf("receipts:\n%s", out)
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, _ := run(t, "", "completion", sh)
		if code != exitOK || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d %q", sh, code, out)
		}
	}
	tests := []struct {
		words []string
		want  []string
		not   []string
	}{
		{[]string{"se"}, []string{"send", "serve"}, []string{"__complete"}},
		{[]string{""}, []string{"agents", "token", "login", "completion", "help"}, []string{"__complete"}},
		{[]string{"serve", "--print"}, []string{"--print-config"}, nil},
		{[]string{"serve", "--"}, []string{"--config", "--addr", "--max-queue"}, []string{"--help"}},
		{[]string{"dlq", ""}, []string{"list", "replay"}, nil},
		{[]string{"dlq", "list", "--"}, []string{"--receiver", "--output", "--context"}, []string{"--ttl"}},
		{[]string{"token", ""}, []string{"rotate", "revoke"}, nil},
		{[]string{"help", "to"}, []string{"token"}, nil},
	}
	for _, tt := range tests {
		code, out, _ := run(t, "", append([]string{"__complete"}, tt.words...)...)
		lines := strings.Fields(out)
		for _, w := range tt.want {
			if code != exitOK || !contains(lines, w) {
				t.Errorf("complete %q: %v, want %s among them", tt.words, lines, w)
			}
		}
		for _, w := range tt.not {
			if contains(lines, w) {
				t.Errorf("complete %q offers %s", tt.words, w)
			}
		}
	}
	if code, _, _ := run(t, "", "completion", "powershell"); code != exitUsage {
		t.Errorf("an unknown shell: exit %d", code)
	}
}
