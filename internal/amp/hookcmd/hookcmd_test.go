package hookcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestHookCommand(t *testing.T) {
	// git push --force is destructive in both guard modes.
	push := `{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git push --force origin main"}}`
	ls := `{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}`
	cases := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		out, err string // parts of stdout and stderr
	}{
		{"help lists the event flags", []string{"--help"}, "", ExitOK, "--guard-mode MODE", ""},
		{"no event answers {} and exits 0", nil, "", ExitOK, "{}", "Usage:"},
		{"unknown flag skipped, event handled", []string{"pre-tool-use", "--frobnicate", "x"}, push, ExitOK, `"deny"`, `ignoring unknown flag "--frobnicate"`},
		{"reference --message flag", []string{"user-prompt", "--message", "I give up"}, `{"session_id":"m1"}`, ExitOK, "giving-up language", ""},
		{"reference --tool and --tool-args win", []string{"pre-tool-use", "--tool", "Bash", "--tool-args", `{"command":"rm -rf .git"}`}, ls, ExitOK, `"deny"`, ""},
		{"reference --session-id --harness", []string{"user-prompt", "--session-id=s9", "--harness", "claude", "--message", "hello"}, "", ExitOK, "{}", ""},
		{"guard denies", []string{"pre-tool-use"}, push, ExitOK, `"deny"`, ""},
		{"guard allows", []string{"pre-tool-use"}, ls, ExitOK, "{}", ""},
		{"unknown guard mode is reported and guards as dev", []string{"pre-tool-use", "--guard-mode", "strict"}, push, ExitOK, `"deny"`, `--guard-mode "strict": want dev or eval; using dev`},
		{"known guard mode says nothing", []string{"pre-tool-use", "--guard-mode", "eval"}, ls, ExitOK, "{}", ""},
		{"unknown event", []string{"frobnicate"}, "{}", ExitOK, "{}", `unknown event "frobnicate"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := c.args
			if len(args) > 0 && args[0] != "--help" && args[0] != "frobnicate" {
				args = append(args, "--state-dir", t.TempDir())
			}
			code := Main(context.Background(), args, Stdio{In: strings.NewReader(c.stdin), Out: &out, Err: &errb})
			if code != c.code || !strings.Contains(out.String(), c.out) || (c.err != "" && !strings.Contains(errb.String(), c.err)) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, c.code, out.String(), errb.String())
			}
			if c.err == "" && errb.Len() > 0 {
				t.Fatalf("unexpected warning: %s", errb.String())
			}
		})
	}
}
