package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// ownPostgres starts a PostgreSQL cluster of the test's own (initdb in a
// temporary directory, a free loopback port) with
// scripts/postgres-test-server.sh, so the test may stop and restart it
// without disturbing other tests' server. It returns the database URL and
// functions that stop (immediately, as a crash would) and start it again on
// the same port. The cluster is stopped when the test ends. It needs root
// and PostgreSQL's binaries (the script installs them on Debian); like
// every PostgreSQL test, it is skipped outside CI when
// SWITCHBOARD_TEST_POSTGRES is not set.
func ownPostgres(t *testing.T) (url string, stop, start func()) {
	t.Helper()
	if os.Getenv("SWITCHBOARD_TEST_POSTGRES") == "" && os.Getenv("CI") == "" {
		t.Skip("SWITCHBOARD_TEST_POSTGRES is not set (PostgreSQL tests are off)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test starts its own PostgreSQL cluster and needs root")
	}
	dir := filepath.Join(t.TempDir(), "pg")
	_, port, _ := net.SplitHostPort(proctest.FreeAddr(t))
	script := filepath.Join(proctest.RepoRoot(), "scripts", "postgres-test-server.sh")
	run := func(args ...string) string {
		cmd := exec.Command(script, args...)
		// Durable settings (fsync, synchronous commit): an immediate stop
		// must keep every acknowledged message.
		cmd.Env = append(os.Environ(), "PGTEST_FAST=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", script, args, err, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// initdb runs as the postgres user, which must reach the directory.
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	_ = os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755)
	url = run("start", dir, port)
	t.Cleanup(func() { run("stop", dir) })
	pgctl := func(args ...string) {
		bin, err := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
		if err != nil || len(bin) == 0 {
			t.Fatalf("pg_ctl not found: %v", err)
		}
		out, err := exec.Command("runuser", append([]string{"-u", "postgres", "--", bin[len(bin)-1], "-D", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
		}
	}
	stop = func() { pgctl("-m", "immediate", "-w", "stop") }
	start = func() { run("start", dir, port) }
	return url, stop, start
}

// post sends body to url and returns the status, the Retry-After header and
// the answer.
func post(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPostgresOutage stops a hub's PostgreSQL under it (immediate stop,
// as a crash) and starts it again: while it is down, sends on ATP and
// MAMP are answered 503 with Retry-After and A2A sends 503 with a JSON-RPC
// error and Retry-After, /readyz answers 503; once it is back the hub
// serves again by itself (no restart), the message accepted before the
// outage is still queued, and the ids refused during it are accepted.
func TestPostgresOutage(t *testing.T) {
	url, stopPG, startPG := ownPostgres(t)
	addr := proctest.FreeAddr(t)
	hub := proctest.StartHub(t, addr, "--dev", "--store", url)
	base := "http://" + addr
	for _, id := range []string{"worker", "planner"} {
		if code, _, body := post(t, base+"/atp/register", `{"agent_id":"`+id+`"}`); code != 200 {
			t.Fatalf("register %s: %d %s", id, code, body)
		}
	}
	send := func(id string) (int, string, string) {
		return post(t, base+"/atp/send", `{"message_id":"`+id+`","sender":"planner","receiver":"worker","type":"t","payload":{"n":1}}`)
	}
	if code, _, body := send("before"); code != 200 {
		t.Fatalf("send before the outage: %d %s", code, body)
	}

	stopPG()
	down := []struct {
		name, url, body string
		want            int
	}{
		{"atp send", base + "/atp/send", `{"message_id":"during-atp","sender":"planner","receiver":"worker","type":"t","payload":{}}`, 503},
		{"mamp message", base + "/mamp/v1/messages", `{"protocol":"mamp/1.0","message_id":"during-mamp","from":"agent://127.0.0.1/planner","to":"agent://127.0.0.1/worker","type":"request","content":"hi","metadata":{"timestamp":"2026-01-01T00:00:00Z"}}`, 503},
		{"a2a message/send", base + "/a2a/worker", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"during-a2a","parts":[{"kind":"text","text":"hi"}]}}}`, 503},
		{"atp register", base + "/atp/register", `{"agent_id":"late"}`, 503},
	}
	for _, c := range down {
		code, retry, body := post(t, c.url, c.body)
		if code != c.want || retry == "" {
			t.Errorf("%s while PostgreSQL is down: %d, Retry-After %q, %s; want %d with Retry-After", c.name, code, retry, body, c.want)
		}
		if strings.Contains(body, "127.0.0.1:") && !strings.Contains(body, "agent://") {
			t.Errorf("%s: the answer leaks the store's address: %s", c.name, body)
		}
	}
	if code, body := get(t, base+"/readyz"); code != 503 {
		t.Errorf("/readyz while PostgreSQL is down: %d %s", code, body)
	}
	if hub.Exited() {
		t.Fatalf("the hub exited during the outage:\n%s", hub.Out.String())
	}

	startPG()
	// The hub reconnects by itself: wait for a send to go through.
	waitfor.OKWithin(t, 30*time.Second, "a send to go through after PostgreSQL came back", func() error {
		if code, _, body := send("during-atp"); code != 200 {
			return fmt.Errorf("the hub answers %d %s", code, body)
		}
		return nil
	})
	if code, body := get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz after the outage: %d %s", code, body)
	}
	code, body := get(t, base+"/atp/pending/worker?limit=10")
	if code != 200 {
		t.Fatalf("pull after the outage: %d %s", code, body)
	}
	var pulled struct {
		Messages []struct {
			ID string `json:"message_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &pulled); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range pulled.Messages {
		ids = append(ids, m.ID)
	}
	if fmt.Sprint(ids) != "[before during-atp]" {
		t.Errorf("after the outage the worker pulled %v, want [before during-atp]", ids)
	}
}

// TestPostgresRefusesUnstorableText sends, through every protocol, a text
// PostgreSQL cannot keep in a column (a NUL character) where the hub stores
// it as text: each gets a 400-class answer, not a 500, and nothing is
// stored; a NUL inside a payload is content and goes through unchanged.
func TestPostgresRefusesUnstorableText(t *testing.T) {
	db := postgresDB(t)
	_, bases := startHubs(t, 1, db)
	base := bases[0]
	for _, id := range []string{"worker", "planner"} {
		if code, _, body := post(t, base+"/atp/register", `{"agent_id":"`+id+`"}`); code != 200 {
			t.Fatalf("register %s: %d %s", id, code, body)
		}
	}
	long := make([]byte, 3000)
	for i := range long {
		long[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rand.IntN(36)]
	}
	cases := []struct {
		name, path, body string
		want             int    // HTTP status
		rpc              string // for JSON-RPC: the error code in the body
	}{
		{"ATP capability", "/atp/register", `{"agent_id":"nul-worker","capabilities":["text\u0000reverse"]}`, 400, ""},
		{"ATP conversation id", "/atp/send", `{"message_id":"nul-1","sender":"planner","receiver":"worker","type":"t","conversation_id":"c\u0000","payload":{}}`, 400, ""},
		{"ATP correlation id", "/atp/send", `{"message_id":"nul-2","sender":"planner","receiver":"worker","type":"t","correlation_id":"x\u0000y","payload":{}}`, 400, ""},
		{"MAMP metadata.trace_id", "/mamp/v1/messages", `{"protocol":"mamp/1.0","message_id":"nul-3","from":"agent://127.0.0.1/planner","to":"agent://127.0.0.1/worker","type":"request","content":"hi","metadata":{"timestamp":"` + time.Now().UTC().Format(time.RFC3339) + `","trace_id":"t\u0000"}}`, 400, ""},
		{"A2A contextId", "/a2a/worker", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"nul-4","contextId":"ctx\u0000","parts":[{"kind":"text","text":"hi"}]}}}`, 200, "-32602"},
		{"A2A 1.0 contextId", "/a2a/worker", `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"nul-5","contextId":"\u0000","parts":[{"text":"hi"}]}}}`, 200, "-32602"},
		// Keys longer than PostgreSQL can index (random, so that it cannot
		// compress them under its limit).
		{"ATP long capability", "/atp/register", `{"agent_id":"long-worker","capabilities":["` + string(long) + `"]}`, 400, ""},
		{"A2A long contextId", "/a2a/worker", `{"jsonrpc":"2.0","id":4,"method":"message/send","params":{"message":{"role":"user","messageId":"long-1","contextId":"` + string(long) + `","parts":[{"kind":"text","text":"hi"}]}}}`, 200, "-32602"},
		{"AMP long session_id", "/v4/tick", `{"session_id":"` + string(long) + `"}`, 400, ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, base+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		if strings.Contains(c.body, "SendMessage") {
			req.Header.Set("A2A-Version", "1.0")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || (c.rpc != "" && !strings.Contains(string(b), `"code":`+c.rpc)) {
			t.Errorf("%s: %d %s; want %d %s", c.name, resp.StatusCode, b, c.want, c.rpc)
		}
	}
	// Nothing of the refused requests was stored.
	if code, _ := get(t, base+"/atp/agents/nul-worker"); code != 404 {
		t.Errorf("the refused agent was stored: %d", code)
	}
	for _, id := range []string{"nul-1", "nul-2", "nul-3"} {
		if code, body := get(t, base+"/atp/receipts/"+id); code != 404 {
			t.Errorf("refused message %s was stored: %d %s", id, code, body)
		}
	}
	// A lookup by such a text finds nothing, as on the embedded store:
	// not found, or an empty list, never PostgreSQL's own error.
	for _, c := range []struct {
		path string
		want int
	}{
		{"/atp/agents/wo%00rker", 404},
		{"/atp/receipts/nul-1%00", 404},
		{"/atp/results/nul-1%00", 404},
		{"/atp/agents?capability=x%00", 200},
		{"/v1/dlq?receiver=w%FF", 200},
		{"/mamp/v1/conversations/c%00", 404},
		{"/dashboard/api/messages?q=a%00", 200},
	} {
		if code, body := get(t, base+c.path); code != c.want || strings.Contains(body, "SQLSTATE") {
			t.Errorf("GET %s: %d %s; want %d", c.path, code, body, c.want)
		}
	}
	if code, _, body := post(t, base+"/a2a/worker", `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"t\u0000"}}`); code != 200 || !strings.Contains(body, `"code":-32001`) {
		t.Errorf("A2A tasks/get by an id with a NUL: %d %s; want task not found (-32001)", code, body)
	}
	if code, _, body := post(t, base+"/atp/send", `{"message_id":"nul-6","sender":"planner","receiver":"wor\u0000ker","type":"t","payload":{}}`); code != 404 {
		t.Errorf("send to a receiver with a NUL: %d %s; want 404 (unknown receiver)", code, body)
	}
	// A NUL in content is kept.
	if code, _, body := post(t, base+"/atp/send", `{"message_id":"nul-ok","sender":"planner","receiver":"worker","type":"t","payload":{"text":"a\u0000b"}}`); code != 200 {
		t.Fatalf("a NUL in the payload: %d %s", code, body)
	}
	code, body := get(t, base+"/atp/pending/worker")
	if code != 200 || !strings.Contains(body, `a\u0000b`) {
		t.Errorf("payload with a NUL read back: %d %s", code, body)
	}
}
