package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/amp"
)

// binary is the switchboard executable built by TestMain, and hookBinary
// the small switchboard-hook one.
var binary, hookBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The binaries' tests are full-lane: building two binaries is
		// most of this package's time.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "switchboard-hook-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "switchboard")
	goTool := "go"
	build := exec.Command(goTool, "build", "-o", binary, "github.com/switchboard-hub/switchboard/cmd/switchboard")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	hookBinary = filepath.Join(dir, "switchboard-hook")
	build2 := exec.Command(goTool, "build", "-o", hookBinary, "github.com/switchboard-hub/switchboard/cmd/switchboard-hook")
	build2.Stdout, build2.Stderr = os.Stderr, os.Stderr
	if err := errors.Join(build.Run(), build2.Run()); err != nil {
		fmt.Fprintln(os.Stderr, "building switchboard:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needBinaries skips t under go test -short, where TestMain builds no
// binaries: their tests are full-lane.
func needBinaries(t *testing.T) {
	t.Helper()
	if binary == "" {
		t.Skip("runs the switchboard and switchboard-hook binaries: full lane, not with -short")
	}
}

// session is one state directory and a fixed clock for a run of hooks.
type session struct {
	t    *testing.T
	home string
	now  time.Time
	env  []string
}

func newSession(t *testing.T) *session {
	needBinaries(t)
	return &session{t: t, home: t.TempDir(), now: time.Date(2026, 9, 12, 10, 0, 0, 0, time.UTC)}
}

// run execs "switchboard hook <args>" with payload on stdin and returns
// stdout, stderr and the exit code.
func (s *session) run(payload string, args ...string) (string, string, int) {
	s.t.Helper()
	cmd := exec.Command(binary, append([]string{"hook"}, args...)...)
	cmd.Env = append(os.Environ(), amp.EnvHome+"="+s.home, "SWITCHBOARD_AMP_NOW="+s.now.Format(time.RFC3339), "PUAX_GUARD_MODE=")
	cmd.Env = append(cmd.Env, s.env...)
	cmd.Stdin = strings.NewReader(payload)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("exec: %v", err)
	}
	return out.String(), errb.String(), code
}

// expect runs one hook and asserts the exact stdout and exit code 0.
func (s *session) expect(event, payload, want string) {
	s.t.Helper()
	out, stderr, code := s.run(payload, event)
	if code != 0 {
		s.t.Fatalf("%s: exit code %d (stderr %q)", event, code, stderr)
	}
	if out != want+"\n" {
		s.t.Fatalf("%s stdout:\n got %s\nwant %s", event, out, want)
	}
}

func (s *session) state(id string) amp.State {
	s.t.Helper()
	st, ok, err := amp.NewFileStore(s.home).Load(context.Background(), id)
	if err != nil || !ok {
		s.t.Fatalf("state %s: ok=%v err=%v", id, ok, err)
	}
	return st
}

const (
	five  = `\nFive steps: read the failure in full; state the diagnosis; change one thing; verify with a real command; report the evidence.\n[PUAX-DIAGNOSIS] problem: ___; evidence: ___; next action: ___ (state it before the next change)`
	l1    = `[PUAX-RUNTIME] pressure L1 提示 hint · %s\nRead the whole error output before the next attempt; do not retry the same command unchanged.` + five
	l2    = `[PUAX-RUNTIME] pressure L2 换框 reframe · %s\nSwitch method: re-read the requirement, search the code for how this is done elsewhere, and question one assumption you have not checked.` + five
	first = `[PUAX-RUNTIME] pressure L0 静息 rest · %s\nFirst failure: diagnose before you retry; do not run the same command again unchanged.` + five
	arena = `[PUAX-ARENA] The situation is set, not a costume: a rival agent works the same task, the reviewers watch the log, and one badge goes to the first verified fix.`
)

func bashFailure(cmd string) string {
	return fmt.Sprintf(`{"session_id":"sess-1","transcript_path":"/tmp/t.jsonl","cwd":"/repo","permission_mode":"default","hook_event_name":"PostToolUseFailure","tool_name":"Bash","tool_input":{"command":%q,"description":"run tests"},"tool_use_id":"toolu_01","error":"Exit code 1\nFAIL\tgithub.com/x/y\t0.01s","is_interrupt":false}`, cmd)
}

const bashSuccess = `{"session_id":"sess-1","transcript_path":"/tmp/t.jsonl","cwd":"/repo","permission_mode":"default","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"go test ./..."},"tool_response":{"stdout":"ok  \tgithub.com/x/y\t0.01s","stderr":"","interrupted":false,"isImage":false},"tool_use_id":"toolu_04"}`

func TestHookThreeFailuresThenPass(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	s.expect("post-tool-use-failure", bashFailure("go test ./..."),
		`{"hookSpecificOutput":{"hookEventName":"PostToolUseFailure","additionalContext":"`+fmt.Sprintf(first, "1 consecutive tool failures (last: Bash)")+`"}}`)
	s.now = s.now.Add(2 * time.Second)
	s.expect("post-tool-use-failure", bashFailure("go test ./..."),
		`{"hookSpecificOutput":{"hookEventName":"PostToolUseFailure","additionalContext":"`+fmt.Sprintf(l1, "2 consecutive tool failures (last: Bash)")+`"}}`)
	s.now = s.now.Add(2 * time.Second)
	s.expect("post-tool-use-failure", bashFailure("go test -run X ./..."),
		`{"hookSpecificOutput":{"hookEventName":"PostToolUseFailure","additionalContext":"`+fmt.Sprintf(l2, "3 consecutive tool failures (last: Bash)")+`\n\n`+arena+`"}}`)
	st := s.state("sess-1")
	if st.Failures != 3 || st.Pressure != 2 || !st.Arena {
		t.Fatalf("after three failures: %+v", st)
	}
	s.now = s.now.Add(2 * time.Second)
	s.expect("post-tool-use", bashSuccess,
		`{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"AMP breakthrough: a real pass after 3 consecutive failures; pressure L2 reset to L0. Note in one line what fixed it, then continue."}}`)
	st = s.state("sess-1")
	if st.Failures != 0 || st.Pressure != 0 || st.Breakthroughs != 1 {
		t.Fatalf("after the pass: %+v", st)
	}
}

func TestHookFailuresViaExitCodeAndEnvelope(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	payload := `{"session_id":"sess-2","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"make"},"tool_response":{"exit_code":2,"stdout":"","stderr":"make: *** [all] Error 2"}}`
	s.expect("post-tool-use", payload,
		`{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"`+fmt.Sprintf(first, "1 consecutive tool failures (last: Bash)")+`"}}`)
	out, stderr, code := s.run(payload, "post-tool-use", "--amp")
	if code != 0 || !strings.Contains(out, "pressure L1") {
		t.Fatalf("second failure: %d %s", code, out)
	}
	env, err := amp.DecodeEnvelope([]byte(stderr))
	if err != nil {
		t.Fatalf("--amp envelope %q: %v", stderr, err)
	}
	if !slices.Equal(env.Events, []amp.Event{amp.EventFailure}) || env.Gate != amp.GateDiagnosis || env.State.Pressure != 1 ||
		env.State.Role != "military-warrior" || !env.State.Happened {
		t.Fatalf("envelope %+v", env)
	}
}

func TestHookSuccessfulBashIsNotAFailure(t *testing.T) {
	needBinaries(t)
	// The reference counts every Claude Bash call as a failure (no exit_code
	// in the response); two successful calls must not reach L1.
	s := newSession(t)
	ls := `{"session_id":"sess-3","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_response":{"stdout":"a\nb","stderr":"","interrupted":false,"isImage":false}}`
	s.expect("post-tool-use", ls, `{}`)
	s.expect("post-tool-use", ls, `{}`)
	if st := s.state("sess-3"); st.Failures != 0 || st.TotalFailures != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestHookGivingUpPrompt(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	s.expect("user-prompt", `{"session_id":"sess-4","transcript_path":"/tmp/t.jsonl","cwd":"/repo","permission_mode":"default","hook_event_name":"UserPromptSubmit","prompt":"算了，这个太难了，建议放弃吧"}`,
		`{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"`+fmt.Sprintf(l1, "giving-up language: “建议放弃”")+`"}}`)
	// Inside the 30 s trigger cooldown the same prompt injects nothing.
	s.now = s.now.Add(10 * time.Second)
	s.expect("user-prompt", `{"session_id":"sess-4","prompt":"I give up, this cannot be done"}`, `{}`)
	s.now = s.now.Add(30 * time.Second)
	s.expect("user-prompt", `{"session_id":"sess-4","prompt":"I give up, this cannot be done"}`,
		`{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"`+fmt.Sprintf(l2, "giving-up language: “cannot be done”")+`\n\n`+arena+`"}}`)
	s.expect("user-prompt", `{"session_id":"sess-5","prompt":"Add a --verbose flag please"}`, `{}`)
}

func TestHookGuard(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	deny := func(reason string) string {
		return `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"AMP guard: ` + reason +
			`. Reach the goal another way. [PUAX-DIAGNOSIS] problem: ___; evidence: ___; next action: ___ (state it before the next change)"}}`
	}
	pre := func(tool, input string) string {
		return `{"session_id":"sess-6","transcript_path":"/tmp/t.jsonl","cwd":"/nonexistent/repo","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"` + tool + `","tool_input":` + input + `,"tool_use_id":"toolu_9"}`
	}
	s.expect("pre-tool-use", pre("Bash", `{"command":"git reset --hard HEAD~3","description":"reset"}`),
		deny("GIT_DESTRUCTIVE_BLOCK: git reset --hard discards uncommitted work: git reset --hard HEAD~3"))
	s.expect("pre-tool-use", pre("Read", `{"file_path":"/repo/test/hidden/expected.txt"}`),
		deny("ANTI_CHEAT_BLOCK: access to /repo/test/hidden/expected.txt is not allowed (answer, hidden-test or grading file)"))
	s.expect("pre-tool-use", pre("Bash", `{"command":"cat tests/hidden/answers.json | head"}`),
		deny("ANTI_CHEAT_BLOCK: the command touches tests/hidden/answers.json, an answer, hidden-test or grading file"))
	s.expect("pre-tool-use", pre("Read", `{"file_path":"/repo/src/main.go"}`), `{}`)
	s.expect("pre-tool-use", pre("Bash", `{"command":"git push origin feature/x"}`), `{}`)
	s.env = []string{"PUAX_GUARD_MODE=eval"}
	s.expect("pre-tool-use", pre("Bash", `{"command":"git push origin feature/x"}`),
		deny("GIT_BYPASS_BLOCKED: git push is not allowed in eval mode: git push origin feature/x"))
	s.env = nil
	if st := s.state("sess-6"); st.Denials != 4 {
		t.Fatalf("denials %d", st.Denials)
	}
	// Fail closed: a payload the guard cannot read is denied.
	out, _, code := s.run(`{"tool_name":`, "pre-tool-use")
	if code != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) || !strings.Contains(out, "GUARD_ERROR") {
		t.Fatalf("malformed pre-tool-use: %d %s", code, out)
	}
}

func TestHookPreCompactAndRestore(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	transcript := filepath.Join(t.TempDir(), "t.jsonl")
	os.WriteFile(transcript, []byte(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"The race is in the cache refresh; next I add a mutex."}]}}`+"\n"), 0o600)
	for range 3 {
		s.expect("post-tool-use-failure", strings.Replace(bashFailure("go test -race"), `"sess-1"`, `"sess-7"`, 1), func() string {
			st, ok, _ := amp.NewFileStore(s.home).Load(context.Background(), "sess-7")
			switch {
			case !ok || st.Failures == 0:
				return `{"hookSpecificOutput":{"hookEventName":"PostToolUseFailure","additionalContext":"` + fmt.Sprintf(first, "1 consecutive tool failures (last: Bash)") + `"}}`
			case st.Failures == 1:
				return `{"hookSpecificOutput":{"hookEventName":"PostToolUseFailure","additionalContext":"` + fmt.Sprintf(l1, "2 consecutive tool failures (last: Bash)") + `"}}`
			}
			return `{"hookSpecificOutput":{"hookEventName":"PostToolUseFailure","additionalContext":"` + fmt.Sprintf(l2, "3 consecutive tool failures (last: Bash)") + `\n\n` + arena + `"}}`
		}())
	}
	s.expect("pre-compact", `{"session_id":"sess-7","transcript_path":"`+transcript+`","cwd":"/repo","hook_event_name":"PreCompact","trigger":"auto","custom_instructions":""}`, `{}`)
	cp := s.state("sess-7").Checkpoint
	if cp == nil || cp.Pressure != 2 || cp.Trigger != "auto" || cp.Summary != "The race is in the cache refresh; next I add a mutex." {
		t.Fatalf("checkpoint %+v", cp)
	}
	s.now = s.now.Add(time.Minute)
	s.expect("session-start", `{"session_id":"sess-7","transcript_path":"`+transcript+`","cwd":"/repo","hook_event_name":"SessionStart","source":"compact"}`,
		`{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"[PUAX 会话恢复] Session restored: pressure L2, 3 consecutive failures, 3 triggers, role military-warrior.\n\n`+
			fmt.Sprintf(l2, "restored pressure")+`\n\n`+arena+
			`\n\n[PUAX 断点恢复] Checkpoint from compaction (auto) at 2026-09-12T10:00:00Z: pressure L2, 3 consecutive failures.\nReasoning before compaction:\nThe race is in the cache refresh; next I add a mutex."}}`)
	s.expect("session-start", `{"session_id":"fresh","hook_event_name":"SessionStart","source":"startup"}`, `{}`)
}

func TestHookStop(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	stop := func(msg string, active bool) string {
		return fmt.Sprintf(`{"session_id":"sess-8","transcript_path":"/tmp/t.jsonl","cwd":"/repo","permission_mode":"default","hook_event_name":"Stop","stop_hook_active":%v,"last_assistant_message":%q}`, active, msg)
	}
	s.expect("stop", stop("I've fixed the bug; it should work now.", false),
		`{"decision":"block","reason":"AMP confidence gate: a completion claim (“should work now”) without evidence. Before claiming done: 1) re-read the request; 2) run the tests; 3) run the build and linters; 4) check the edge cases; 5) show the command output; 6) list what is still unverified."}`)
	s.expect("stop", stop("I've fixed the bug; it should work now.", true), `{}`)
	s.expect("stop", stop("Fixed. go test ./... output:\nok  \tgithub.com/x/y\t0.2s\nPASS", false), `{}`)
	s.expect("stop", `{"session_id":"sess-9","hook_event_name":"Stop","stop_hook_active":false}`, `{}`)
}

func TestHookGracefulDegradation(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	for _, ev := range []string{"session-start", "user-prompt", "post-tool-use", "post-tool-use-failure", "pre-compact", "stop"} {
		for _, payload := range []string{"", "not json", `{"session_id":5}`, "[]"} {
			out, _, code := s.run(payload, ev)
			if code != 0 {
				t.Errorf("%s %q: exit %d", ev, payload, code)
			}
			if ev != "post-tool-use-failure" && out != "{}\n" {
				t.Errorf("%s %q: %q", ev, payload, out)
			}
		}
	}
	// A state directory that cannot be created.
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o600)
	s.home = filepath.Join(blocker, "amp")
	out, stderr, code := s.run(`{"session_id":"x","prompt":"I give up"}`, "user-prompt")
	if code != 0 || out != "{}\n" || !strings.Contains(stderr, "switchboard hook") {
		t.Fatalf("unwritable state dir: %d %q %q", code, out, stderr)
	}
	out, _, code = s.run(`{"session_id":"x","tool_name":"Bash","tool_input":{"command":"rm -rf .git"}}`, "pre-tool-use")
	if code != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Fatalf("guard with unwritable state dir: %d %q", code, out)
	}
	// Unknown events and flags never break the host.
	if out, _, code := s.run(`{}`, "no-such-event"); code != 0 || out != "{}\n" {
		t.Fatalf("unknown event: %d %q", code, out)
	}
	if out, _, code := s.run(`{}`, "stop", "--no-such-flag"); code != 0 || out != "{}\n" {
		t.Fatalf("unknown flag: %d %q", code, out)
	}
}

func TestHookHelpAndInstall(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	out, _, code := s.run("", "--help")
	if code != 0 || !strings.Contains(out, "switchboard hook install --host claude-code") {
		t.Fatalf("--help: %d %s", code, out)
	}
	out, _, code = s.run("", "install", "--host", "claude-code")
	if code != 0 {
		t.Fatalf("install: %d", code)
	}
	var cfg map[string]map[string]any
	if err := json.Unmarshal([]byte(out), &cfg); err != nil || len(cfg["hooks"]) != 7 {
		t.Fatalf("install printed %s (%v)", out, err)
	}
	if _, _, code := s.run("", "install", "--host", "vscode"); code != 2 {
		t.Fatalf("unknown host exit %d", code)
	}
	if _, _, code := s.run("", "install"); code != 2 {
		t.Fatalf("missing --host exit %d", code)
	}
	project := t.TempDir()
	out, _, code = s.run("", "install", "--host", "claude-code", "--write", "--project", project)
	if code != 0 || !strings.Contains(out, filepath.Join(project, ".claude", "settings.json")) {
		t.Fatalf("--write: %d %s", code, out)
	}
	data, err := os.ReadFile(filepath.Join(project, ".claude", "settings.json"))
	if err != nil || !strings.Contains(string(data), `"switchboard hook pre-tool-use"`) {
		t.Fatalf("settings: %s %v", data, err)
	}
}

// TestHookConcurrentProcesses runs many hook processes for one session at
// once; the per-session lock must not lose a single failure.
func TestHookConcurrentProcesses(t *testing.T) {
	needBinaries(t)
	s := newSession(t)
	const n = 16
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(binary, "hook", "post-tool-use-failure")
			cmd.Env = append(os.Environ(), amp.EnvHome+"="+s.home)
			cmd.Stdin = strings.NewReader(strings.Replace(bashFailure("make"), `"sess-1"`, `"shared"`, 1))
			if out, err := cmd.Output(); err != nil || !json.Valid(out) {
				t.Errorf("process: %v %q", err, out)
			}
		}()
	}
	wg.Wait()
	st := s.state("shared")
	if st.TotalFailures != n || st.Failures != n || st.Pressure != 4 || st.PeakPressure != 4 {
		t.Fatalf("after %d concurrent failures: %+v", n, st)
	}
}

// BenchmarkHookProcess measures one hook invocation as a whole process
// (fork, exec, read stdin, decide, write stdout), as the host runs it on
// every tool call. It reports the median and p90 in ms. Run it with
//
//	go test -run '^$' -bench HookProcess -benchtime 500x ./internal/amp/hook/
func BenchmarkHookProcess(b *testing.B) {
	cases := []struct{ name, event, payload string }{
		// The control: the same binary doing (almost) nothing, so the
		// difference to the hooks is the hook's own cost.
		{"baseline-version", "", ""},
		{"pre-tool-use", "pre-tool-use", `{"session_id":"bench","transcript_path":"/tmp/t.jsonl","cwd":"/repo","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"go test ./... 2>&1 | tail -20"}}`},
		{"post-tool-use", "post-tool-use", `{"session_id":"bench","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_response":{"stdout":"a","stderr":"","interrupted":false,"isImage":false}}`},
		{"user-prompt", "user-prompt", `{"session_id":"bench","hook_event_name":"UserPromptSubmit","prompt":"Please refactor the parser and add tests for the edge cases."}`},
	}
	home := b.TempDir()
	for _, bin := range []string{binary, hookBinary} {
		for _, c := range cases {
			if bin == hookBinary && c.event == "" {
				continue
			}
			benchHook(b, bin, c.name, c.event, c.payload, home)
		}
	}
}

func benchHook(b *testing.B, bin, name, event, payload, home string) {
	b.Run(filepath.Base(bin)+"/"+name, func(b *testing.B) {
		{
			var durations []time.Duration
			for b.Loop() {
				cmd := exec.Command(bin, "hook", event)
				if event == "" {
					cmd = exec.Command(bin, "version")
				}
				cmd.Env = append(os.Environ(), amp.EnvHome+"="+home)
				cmd.Stdin = strings.NewReader(payload)
				start := time.Now()
				out, err := cmd.Output()
				durations = append(durations, time.Since(start))
				if err != nil || len(out) == 0 {
					b.Fatalf("hook: %v %q", err, out)
				}
			}
			slices.Sort(durations)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(durations[len(durations)/2]), "median-ms")
			b.ReportMetric(ms(durations[len(durations)*9/10]), "p90-ms")
		}
	})
}

// TestHookBinaryAnswersAlike checks the small binary gives the same answers.
func TestHookBinaryAnswersAlike(t *testing.T) {
	needBinaries(t)
	payload := `{"session_id":"alike","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git reset --hard HEAD~1"}}`
	home := t.TempDir()
	var outs []string
	for _, bin := range []string{binary, hookBinary} {
		cmd := exec.Command(bin, "hook", "pre-tool-use")
		cmd.Env = append(os.Environ(), amp.EnvHome+"="+home)
		cmd.Stdin = strings.NewReader(payload)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		outs = append(outs, string(out))
	}
	if outs[0] != outs[1] || !strings.Contains(outs[0], `"permissionDecision":"deny"`) {
		t.Fatalf("answers differ or do not deny:\n%s\n%s", outs[0], outs[1])
	}
}

// TestHookEdgeCasesAnswerEmpty: with no event, or an unknown flag, the
// hook still exits 0 (a host reads exit 2 as "block"); the unknown flag
// does not drop the event.
func TestHookEdgeCasesAnswerEmpty(t *testing.T) {
	s := newSession(t)
	for _, bin := range []string{binary, hookBinary} {
		cmd := exec.Command(bin, "hook")
		cmd.Env = append(os.Environ(), amp.EnvHome+"="+s.home)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.Output()
		if err != nil || string(out) != "{}\n" {
			t.Fatalf("%s hook with no event: %q, %v", filepath.Base(bin), out, err)
		}
	}
	out, stderr, code := s.run(`{"session_id":"e1","tool_name":"Bash","tool_input":{"command":"git reset --har"}}`, "pre-tool-use", "--unknown-flag", "--message", "x")
	if code != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) || !strings.Contains(stderr, "unknown flag") {
		t.Fatalf("unknown flag: %d %s %s", code, out, stderr)
	}
}

// TestHookGuardOnDisk runs the hook on commands whose decision depends on
// the files around them (symlinks, script files), with the working
// directory given in the payload or, when the payload has none, taken
// from the hook process's own.
func TestHookGuardOnDisk(t *testing.T) {
	s := newSession(t)
	repo := t.TempDir()
	for name, body := range map[string]string{".git/HEAD": "ref: refs/heads/main\n", "scripts/evil.sh": "#!/bin/sh\nrm -rf .git\n",
		"scripts/ok.sh": "#!/bin/sh\necho ok\n", "Makefile": "all:\n\techo ok\nnuke:\n\trm -rf .git\n",
		"scripts/evil.py": "import shutil\nshutil.rmtree('.git')\n"} {
		os.MkdirAll(filepath.Join(repo, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".git", filepath.Join(repo, "gl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(repo, ".git", "HEAD"), filepath.Join(repo, "hl")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cmd     string
		withCwd bool
		deny    string // "" = allowed
	}{
		{"rm -rf gl/objects", true, "through a symlink"},
		{"rm -rf gl/objects", false, "through a symlink"},
		{"bash scripts/evil.sh", true, "rm .git is blocked"},
		{"./scripts/evil.sh", false, "rm .git is blocked"},
		{"echo 'rm -rf .git' > x.sh; sh x.sh", false, "which this same command writes first"},
		{"bash scripts/ok.sh", true, ""},
		{"bash scripts/ok.sh", false, ""},
		{"rm gl", false, ""},
		{"make nuke", true, "the recipe of nuke"},
		{"make", false, ""},
		{"python3 scripts/evil.py", false, "in the script scripts/evil.py"},
		{"echo x > hl", true, "hard link"},
		{"rm hl", true, ""},
	}
	for _, tt := range tests {
		cwd := ""
		if tt.withCwd {
			cwd = `"cwd":` + fmt.Sprintf("%q", repo) + `,`
		}
		payload := `{"session_id":"disk",` + cwd + `"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":` + fmt.Sprintf("%q", tt.cmd) + `}}`
		cmd := exec.Command(hookBinary, "pre-tool-use")
		cmd.Dir = filepath.Join(repo, "scripts", "..") // the hook runs in the project
		cmd.Env = append(os.Environ(), amp.EnvHome+"="+s.home, "PUAX_GUARD_MODE=", "CLAUDE_PROJECT_DIR="+repo)
		cmd.Stdin = strings.NewReader(payload)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%q: %v", tt.cmd, err)
		}
		got := string(out)
		switch {
		case tt.deny == "" && strings.TrimSpace(got) != "{}":
			t.Errorf("%q (cwd given: %v): denied, want allowed: %s", tt.cmd, tt.withCwd, got)
		case tt.deny != "" && !strings.Contains(got, tt.deny):
			t.Errorf("%q (cwd given: %v): got %s, want a denial saying %q", tt.cmd, tt.withCwd, got, tt.deny)
		}
	}
}
