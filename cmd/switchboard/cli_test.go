package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// run runs the CLI in-process and returns its exit code and output.
func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(context.Background(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

func TestCLIAgainstHub(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	t.Setenv("SWITCHBOARD_HUB", base)
	t.Setenv("SWITCHBOARD_TOKEN", h.AdminToken)
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env map[string]any
		_ = json.NewDecoder(r.Body).Decode(&env)
		if env["type"] == "refuse" {
			_, _ = w.Write([]byte(`{"status":"rejected","code":415}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"accepted","result":{"ok":true}}`))
	}))
	defer worker.Close()
	for _, reg := range []string{
		`{"agent_id":"worker","callback_url":"` + worker.URL + `","capabilities":["text.reverse"]}`,
		`{"agent_id":"planner","capabilities":["plan"]}`,
		`{"agent_id":"sleeper"}`, // pulls, but never does
	} {
		req, _ := http.NewRequest("POST", base+"/atp/register", strings.NewReader(reg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+h.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("register: %v %v", resp, err)
		}
		resp.Body.Close()
	}

	cases := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		contains string
	}{
		{"version", []string{"version"}, "", exitOK, "switchboard "},
		{"no command", nil, "", exitUsage, "Usage: switchboard"},
		{"unknown command", []string{"frobnicate"}, "", exitUsage, ""},
		{"help for send", []string{"help", "send"}, "", exitOK, ""},
		{"agents by capability", []string{"agents", "--capability", "text.reverse"}, "", exitOK, "worker"},
		{"agents json", []string{"agents", "--json"}, "", exitOK, `"planner"`},
		{"send and wait", []string{"send", "--from", "planner", "--to", "worker", "--text", "hi", "--id", "c1", "--wait", "10s"}, "", exitOK, "c1 delivered"},
		{"send duplicate", []string{"send", "--from", "planner", "--to", "worker", "--text", "hi", "--id", "c1"}, "", exitOK, "(duplicate)"},
		{"send payload from stdin", []string{"send", "--from", "planner", "--to", "worker", "--payload", "-", "--wait", "10s"}, `{"n":1}`, exitOK, "delivered"},
		{"send queued", []string{"send", "--from", "planner", "--to", "sleeper", "--text", "hi", "--id", "q1"}, "", exitOK, "q1 queued"},
		{"send not delivered within the wait", []string{"send", "--from", "planner", "--to", "sleeper", "--text", "hi", "--id", "q2", "--wait", "300ms"}, "", exitFailure, "q2 not delivered within 300ms"},
		{"send rejected", []string{"send", "--from", "planner", "--to", "worker", "--type", "refuse", "--wait", "10s"}, "", exitFailure, "rejected"},
		{"send unknown receiver", []string{"send", "--from", "planner", "--to", "ghost", "--text", "x"}, "", exitNotFound, ""},
		{"send missing flags", []string{"send", "--text", "x"}, "", exitUsage, ""},
		{"send bad payload", []string{"send", "--from", "a", "--to", "b", "--payload", "[1]"}, "", exitUsage, ""},
		{"receipts", []string{"receipts", "c1"}, "", exitOK, "delivered"},
		{"receipts unknown", []string{"receipts", "nope"}, "", exitNotFound, ""},
		{"receipts, flags after the id", []string{"receipts", "c1", "--json"}, "", exitOK, `"status": "delivered"`},
		{"receipts, two ids", []string{"receipts", "c1", "c2"}, "", exitUsage, `unexpected argument "c2"`},
		{"agents, stray argument", []string{"agents", "worker"}, "", exitUsage, `unexpected argument "worker"`},
		{"dlq list", []string{"dlq", "list"}, "", exitOK, "rejected"},
		{"dlq bad subcommand", []string{"dlq", "purge"}, "", exitUsage, `unknown subcommand "purge"`},
		{"dlq replay unknown", []string{"dlq", "replay", "nope"}, "", exitNotFound, ""},
		{"dlq replay, not a dead letter", []string{"dlq", "replay", "c1"}, "", exitFailure, "409"},
		{"dlq list help has only list's flags", []string{"dlq", "list", "--help"}, "", exitOK, "-receiver"},
		{"help for an unknown command", []string{"help", "frobnicate"}, "", exitUsage, `unknown command "frobnicate"`},
		{"serve, delivery timeout too near the claim lease", []string{"serve", "--dev", "--deliver-timeout", "28s", "--claim-lease", "30s"}, "", exitUsage, "must be at most nine tenths of --claim-lease"},
		{"send, id reused for other content", []string{"send", "--from", "planner", "--to", "worker", "--text", "other", "--id", "c1"}, "", exitFailure, "other content"},
		{"send, id another sender used", []string{"send", "--from", "sleeper", "--to", "worker", "--text", "hi", "--id", "c1"}, "", exitFailure, "409"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(t, c.stdin, c.args...)
			if code != c.code || !strings.Contains(out+errOut, c.contains) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, c.code, out, errOut)
			}
		})
	}
	// The receipt's history prints in columns: time, status (padded to the
	// longest status, "unreachable"), detail.
	_, out, _ := run(t, "", "receipts", "c1")
	histLine := regexp.MustCompile(`^  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  ([a-z]+)(?: +(\S.*))?$`)
	const detailCol = 2 + len(historyTime) + 2 + len("unreachable") + 2
	var events, details int
	for _, line := range strings.Split(out, "\n") {
		m := histLine.FindStringSubmatchIndex(line)
		if m == nil {
			continue
		}
		events++
		if m[4] >= 0 {
			details++
			if m[4] != detailCol {
				t.Fatalf("detail at column %d, want %d:\n%s", m[4], detailCol, out)
			}
		}
	}
	if events < 2 || details < 1 {
		t.Fatalf("receipt history: %d events, %d with a detail, want 2 and 1:\n%s", events, details, out)
	}
	// Replaying the rejected dead letter re-queues it.
	_, out, _ = run(t, "", "dlq", "list", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		t.Fatalf("dlq list --json: %v %s", err, out)
	}
	id := list[0]["message_id"].(string)
	if code, out, _ := run(t, "", "dlq", "replay", id); code != exitOK || !strings.Contains(out, "queued") {
		t.Fatalf("replay: %d %s", code, out)
	}
	// tail sees the flow.
	done := make(chan string, 1)
	go func() {
		_, out, _ := run(t, "", "tail", "-n", "2", "--agent", "worker")
		done <- out
	}()
	time.Sleep(300 * time.Millisecond)
	run(t, "", "send", "--from", "planner", "--to", "worker", "--text", "tailed", "--id", "tail-1")
	select {
	case out := <-done:
		if !strings.Contains(out, "accepted") || !strings.Contains(out, "tail-1") {
			t.Fatalf("tail: %s", out)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("tail saw nothing")
	}
}

// TestSendWaitIsOneDeadline: --wait D bounds the whole wait. The hub waits
// with the send (wait_ms) and the CLI spends only what is left of D
// watching the receipt; it used to start a second full D after the hub's.
func TestSendWaitIsOneDeadline(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	t.Setenv("SWITCHBOARD_HUB", base)
	t.Setenv("SWITCHBOARD_TOKEN", h.AdminToken)
	req, _ := http.NewRequest("POST", base+"/atp/register", strings.NewReader(`{"agent_id":"sleeper"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("register: %v %v", resp, err)
	}
	resp.Body.Close()
	const wait = 1500 * time.Millisecond
	start := time.Now()
	code, _, errOut := run(t, "", "send", "--from", "planner", "--to", "sleeper", "--text", "hi", "--wait", wait.String())
	took := time.Since(start)
	if code != exitFailure || !strings.Contains(errOut, "not delivered within 1.5s") {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	// Two full waits would take at least 2×D; one takes D and a little.
	if took < wait || took >= 2*wait {
		t.Fatalf("send --wait %v took %v, want at least %v and under %v", wait, took, wait, 2*wait)
	}
}

func TestCLIHubUnreachable(t *testing.T) {
	t.Setenv("SWITCHBOARD_HUB", "http://"+proctest.FreeAddr(t))
	send := []string{"send", "--from", "planner", "--to", "worker", "--text", "hi", "--id", "u1"}
	for _, c := range []struct {
		name     string
		args     []string
		code     int
		contains string // in stderr
		lacks    string
	}{
		{"agents", []string{"agents"}, exitUnavail, "hub unavailable", ""},
		{"send retries, then gives up", send, exitUnavail, "gave up after 4 attempts", ""},
		{"send --retries 0 tries once", append(send, "--retries", "0"), exitUnavail, "hub unavailable", "gave up"},
		{"send --retries 1", append(send, "--retries", "1"), exitUnavail, "gave up after 2 attempts", ""},
		{"send --retries -1", append(send, "--retries", "-1"), exitUsage, "--retries must be 0 or more", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := run(t, "", c.args...)
			if code != c.code || !strings.Contains(errOut, c.contains) || (c.lacks != "" && strings.Contains(errOut, c.lacks)) {
				t.Fatalf("exit %d (want %d), stderr: %s", code, c.code, errOut)
			}
		})
	}
}

func TestServeRefusesDevOffLoopback(t *testing.T) {
	code, _, errOut := run(t, "", "serve", "--dev", "--addr", "0.0.0.0:0", "--data", filepath.Join(t.TempDir(), "d"))
	if code != exitUsage || !strings.Contains(errOut, "loopback") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestBenchCPUProfile(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	t.Setenv("SWITCHBOARD_HUB", base)
	t.Setenv("SWITCHBOARD_TOKEN", h.AdminToken)
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	code, out, errOut := run(t, "", "bench", "--messages", "40", "--senders", "4", "--receive", "stream", "--quiet", "--cpuprofile", prof)
	if code != exitOK || !strings.Contains(out, "delivered 40") {
		t.Fatalf("bench: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatalf("profile: %v", err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // pprof profiles are gzipped protobufs
		t.Fatalf("profile is not a gzipped pprof profile (%d bytes)", len(b))
	}
	bad := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	if code, _, errOut := run(t, "", "bench", "--messages", "1", "--quiet", "--cpuprofile", bad); code != exitUsage || !strings.Contains(errOut, "--cpuprofile") {
		t.Fatalf("unwritable --cpuprofile: exit %d, %s", code, errOut)
	}
}

func TestParseArgs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want int
		pos  []string
		ends bool // parsing ends the command, with code
		code int
		json bool
		out  string // in what parsing printed
	}{
		{name: "flag before the argument", args: []string{"--json", "m1"}, want: 1, pos: []string{"m1"}, json: true},
		{name: "flag after the argument", args: []string{"m1", "--json"}, want: 1, pos: []string{"m1"}, json: true},
		{name: "flag value after the argument", args: []string{"m1", "--hub", "http://h", "--json"}, want: 1, pos: []string{"m1"}, json: true},
		{name: "after -- all are arguments", args: []string{"--", "--json"}, want: 1, pos: []string{"--json"}},
		{name: "no arguments", args: nil, want: 0},
		{name: "missing argument", ends: true, args: []string{"--json"}, want: 1, code: exitUsage, out: "Usage:"},
		{name: "one too many", ends: true, args: []string{"m1", "m2"}, want: 1, code: exitUsage, out: `unexpected argument "m2"`},
		{name: "argument to a command without", ends: true, args: []string{"--json", "extra"}, want: 0, code: exitUsage, out: `unexpected argument "extra"`},
		{name: "unknown flag after the argument", ends: true, args: []string{"m1", "--nope"}, want: 1, code: exitUsage, out: "-nope"},
		{name: "help", ends: true, args: []string{"m1", "--help"}, want: 1, code: exitOK, out: "Usage:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var errb bytes.Buffer
			fs := newFlagSet("receipts", "Usage: switchboard receipts [flags] MESSAGE_ID", stdio{err: &errb})
			var h hubFlags
			h.add(fs)
			pos, code, ok := parseArgs(fs, c.args, c.want)
			if ok == c.ends || code != c.code {
				t.Fatalf("ok %v, code %d; want ends %v, code %d; printed %q", ok, code, c.ends, c.code, errb.String())
			}
			if !strings.Contains(errb.String(), c.out) {
				t.Fatalf("printed %q, want %q in it", errb.String(), c.out)
			}
			if ok && (strings.Join(pos, " ") != strings.Join(c.pos, " ") || h.json != c.json) {
				t.Fatalf("arguments %q json %v, want %q json %v", pos, h.json, c.pos, c.json)
			}
		})
	}
}

func TestServeRefusesADataDirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	hubtest.Start(t, hub.Options{Dev: true, DataDir: dir})
	// Should the second serve start after all, it stops at the timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := runMain(ctx, []string{"serve", "--dev", "--addr", "127.0.0.1:0", "--data", dir}, stdio{in: strings.NewReader(""), out: &out, err: &errb})
	errOut := errb.String()
	if code != exitFailure || !strings.Contains(errOut, "data directory in use by another process") {
		t.Fatalf("second serve on one data directory: exit %d, stderr %q", code, errOut)
	}
}

func TestTailEndsWhenTheHubGoes(t *testing.T) {
	addr := proctest.FreeAddr(t)
	hubProc := proctest.StartHub(t, addr, "--dev", "--data", t.TempDir())
	var out, errOut proctest.SafeBuffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(context.Background(), []string{"tail", "--hub", "http://" + addr, "-n", "1000"}, stdio{in: strings.NewReader(""), out: &out, err: &errOut})
	}()
	// Registrations until tail shows one (it may not be connected yet).
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), "registered") {
		if time.Now().After(deadline) {
			t.Fatalf("tail showed no event: stdout %q, stderr %q", out.String(), errOut.String())
		}
		resp, err := http.Post("http://"+addr+"/atp/register", "application/json", strings.NewReader(`{"agent_id":"seen"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(100 * time.Millisecond)
	}
	hubProc.Kill()
	select {
	case code := <-done:
		if code != exitUnavail || !strings.Contains(errOut.String(), "the hub closed the event stream after") {
			t.Fatalf("tail after the hub was killed: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("tail did not end when the hub went away")
	}
}

// TestSendTakesTheHubsDefaultTTL: without --ttl the hub's --default-ttl
// applies (the CLI used to send a TTL of its own, 1 minute, always).
func TestSendTakesTheHubsDefaultTTL(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Relay: core.Config{DefaultTTL: 5 * time.Minute}})
	t.Setenv("SWITCHBOARD_HUB", base)
	t.Setenv("SWITCHBOARD_TOKEN", h.AdminToken)
	req, _ := http.NewRequest("POST", base+"/atp/register", strings.NewReader(`{"agent_id":"sleeper"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("register: %v %v", resp, err)
	}
	resp.Body.Close()
	for _, c := range []struct {
		args []string
		ttl  time.Duration
	}{
		{[]string{"--id", "t-default"}, 5 * time.Minute},
		{[]string{"--id", "t-own", "--ttl", "90s"}, 90 * time.Second},
	} {
		start := time.Now()
		args := append([]string{"send", "--from", "planner", "--to", "sleeper", "--text", "hi"}, c.args...)
		if code, _, errOut := run(t, "", args...); code != exitOK {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		_, out, _ := run(t, "", "receipts", c.args[1], "--json")
		var rc struct {
			ExpiresAt float64 `json:"expires_at"`
		}
		if err := json.Unmarshal([]byte(out), &rc); err != nil {
			t.Fatalf("receipt: %v %s", err, out)
		}
		got := time.UnixMicro(int64(rc.ExpiresAt * 1e6)).Sub(start)
		if got < c.ttl-5*time.Second || got > c.ttl+5*time.Second {
			t.Fatalf("%v: expires %v after the send, want about %v", args, got, c.ttl)
		}
	}
}
