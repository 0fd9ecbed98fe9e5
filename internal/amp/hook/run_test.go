package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/amp"
)

var fixed = amp.ClockFunc(func() time.Time { return time.Date(2026, 9, 12, 10, 0, 0, 0, time.UTC) })

func runHook(t *testing.T, opts Options, event, payload string) string {
	t.Helper()
	var out bytes.Buffer
	if code := Run(context.Background(), event, strings.NewReader(payload), &out, opts); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	s := out.String()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Fatalf("output is not one line: %q", s)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		t.Fatalf("output is not a JSON object: %q", s)
	}
	return strings.TrimSuffix(s, "\n")
}

func TestRunGuardFailsClosed(t *testing.T) {
	// A state "directory" that is a file: every store operation fails.
	bad := filepath.Join(t.TempDir(), "file")
	os.WriteFile(bad, []byte("x"), 0o600)
	opts := Options{StateDir: bad, Clock: fixed}

	got := runHook(t, opts, "pre-tool-use", `{"session_id":"s","tool_name":"Bash","tool_input":{"command":"git reset --hard"}}`)
	if !strings.Contains(got, `"permissionDecision":"deny"`) || !strings.Contains(got, "GIT_DESTRUCTIVE_BLOCK") {
		t.Fatalf("store failure turned a denial into %s", got)
	}
	if got := runHook(t, opts, "pre-tool-use", `{"session_id":"s","tool_name":"Bash","tool_input":{"command":"ls"}}`); got != "{}" {
		t.Fatalf("allowed call: %s", got)
	}
	// With the envelope requested the store is used; when it fails the
	// guard's verdict still stands (allow stays allow).
	opts.Envelope = &bytes.Buffer{}
	if got := runHook(t, opts, "pre-tool-use", `{"session_id":"s","tool_name":"Bash","tool_input":{"command":"ls"}}`); got != "{}" {
		t.Fatalf("store fault on an allowed call: %s", got)
	}
	opts.Envelope = nil
	for _, ev := range []string{"user-prompt", "post-tool-use", "session-start", "pre-compact", "stop"} {
		if got := runHook(t, opts, ev, `{"session_id":"s","prompt":"I give up"}`); got != "{}" {
			t.Errorf("%s with a broken store: %s", ev, got)
		}
	}
	if got := runHook(t, opts, "pre-tool-use", `{{{`); !strings.Contains(got, `"permissionDecision":"deny"`) {
		t.Fatalf("unparseable pre-tool-use: %s", got)
	}
	if got := runHook(t, opts, "user-prompt", `{{{`); got != "{}" {
		t.Fatalf("unparseable user-prompt: %s", got)
	}
	if got := runHook(t, opts, "bogus", `{}`); got != "{}" {
		t.Fatalf("unknown event: %s", got)
	}
}

func TestRunEnvelopeAndStopGate(t *testing.T) {
	dir := t.TempDir()
	var env bytes.Buffer
	opts := Options{StateDir: dir, Clock: fixed, Envelope: &env}
	claim := `{"session_id":"s","stop_hook_active":false,"last_assistant_message":"All tests passed, ready to merge."}`
	got := runHook(t, opts, "stop", claim)
	if !strings.HasPrefix(got, `{"decision":"block","reason":"AMP confidence gate`) {
		t.Fatalf("stop: %s", got)
	}
	e, err := amp.DecodeEnvelope(env.Bytes())
	if err != nil || e.Gate != amp.GateConfidence {
		t.Fatalf("envelope %s: %v", env.String(), err)
	}
	opts.NoStopGate = true
	if got := runHook(t, opts, "stop", claim); got != "{}" {
		t.Fatalf("--no-stop-gate: %s", got)
	}
}

func TestRunPhrasesFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "phrases.json"), []byte(`{"extend":true,"giving_up":["i surrender"]}`), 0o600)
	got := runHook(t, Options{StateDir: dir, Clock: fixed}, "user-prompt", `{"session_id":"p","prompt":"OK I surrender"}`)
	if !strings.Contains(got, "giving-up language: “i surrender”") {
		t.Fatalf("phrases.json not used: %s", got)
	}
	// A broken phrase file falls back to the defaults.
	os.WriteFile(filepath.Join(dir, "phrases.json"), []byte(`{`), 0o600)
	var log bytes.Buffer
	got = runHook(t, Options{StateDir: dir, Clock: fixed, Log: &log}, "user-prompt", `{"session_id":"q","prompt":"I give up"}`)
	if !strings.Contains(got, "giving-up language: “give up”") || !strings.Contains(log.String(), "built-in phrases") {
		t.Fatalf("fallback: %s / %s", got, log.String())
	}
}

func TestConfigAndMerge(t *testing.T) {
	cfg, err := Config(HostClaudeCode, "")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(cfg, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"SessionStart": "switchboard hook session-start", "UserPromptSubmit": "switchboard hook user-prompt",
		"PreToolUse": "switchboard hook pre-tool-use", "PostToolUse": "switchboard hook post-tool-use",
		"PostToolUseFailure": "switchboard hook post-tool-use-failure", "PreCompact": "switchboard hook pre-compact",
		"Stop": "switchboard hook stop",
	}
	if len(doc.Hooks) != len(want) {
		t.Fatalf("events %v", doc.Hooks)
	}
	for ev, cmd := range want {
		g := doc.Hooks[ev]
		if len(g) != 1 || len(g[0].Hooks) != 1 || g[0].Hooks[0].Command != cmd || g[0].Hooks[0].Type != "command" {
			t.Errorf("%s: %+v", ev, g)
		}
	}
	if doc.Hooks["PreToolUse"][0].Matcher == "" || doc.Hooks["Stop"][0].Matcher != "" {
		t.Error("matchers wrong")
	}
	if _, err := Config("cursor", ""); err == nil {
		t.Error("unknown host accepted")
	}

	existing := `{"model":"x","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"./mine.sh"}]},
		{"matcher":"Bash","hooks":[{"type":"command","command":"/old/switchboard hook pre-tool-use"}]}]}}`
	merged, err := MergeSettings([]byte(existing), HostClaudeCode, "/opt/my tools/switchboard")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(merged, &m)
	if m["model"] != "x" {
		t.Fatal("other settings lost")
	}
	pre := m["hooks"].(map[string]any)["PreToolUse"].([]any)
	if len(pre) != 2 || !strings.Contains(string(merged), "./mine.sh") || strings.Contains(string(merged), "/old/switchboard") ||
		!strings.Contains(string(merged), `'/opt/my tools/switchboard' hook pre-tool-use`) {
		t.Fatalf("merge: %s", merged)
	}
	// Installing twice is idempotent.
	again, _ := MergeSettings(merged, HostClaudeCode, "/opt/my tools/switchboard")
	if string(again) != string(merged) {
		t.Fatalf("second install changed the file:\n%s\n%s", merged, again)
	}

	path := filepath.Join(t.TempDir(), ".claude", "settings.json")
	if err := WriteSettings(path, HostClaudeCode, "switchboard"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "switchboard hook stop") {
		t.Fatalf("written: %s", data)
	}
}
