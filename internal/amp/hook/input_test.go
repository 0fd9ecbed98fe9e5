package hook

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseInput(t *testing.T) {
	in, err := ParseInput([]byte(`{"session_id":"abc","transcript_path":"/t.jsonl","cwd":"/repo","permission_mode":"default",
		"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls","timeout":5},
		"tool_response":{"stdout":"x","stderr":"","interrupted":false,"isImage":false},"tool_use_id":"t1","unknown":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.SessionID != "abc" || in.Cwd != "/repo" || in.ToolName != "Bash" || in.ToolInput["command"] != "ls" ||
		in.HookEventName != "PostToolUse" || len(in.ToolResponse) == 0 {
		t.Fatalf("%+v", in)
	}
	// Wrong types leave fields zero instead of failing the payload.
	in, err = ParseInput([]byte(`{"session_id":42,"prompt":"hi","tool_input":"oops","stop_hook_active":"yes"}`))
	if err != nil || in.SessionID != "" || in.Prompt != "hi" || in.ToolInput != nil || in.StopHookActive {
		t.Fatalf("%+v %v", in, err)
	}
	if in, err := ParseInput(nil); err != nil || in.SessionID != "" {
		t.Fatalf("empty input: %+v %v", in, err)
	}
	for _, bad := range []string{"not json", "[1,2]", `"str"`, "{"} {
		if _, err := ParseInput([]byte(bad)); !errors.Is(err, ErrBadInput) {
			t.Errorf("ParseInput(%q) = %v, want ErrBadInput", bad, err)
		}
	}
}

func TestToolResult(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		failed  bool
	}{
		{"claude bash success (no exit code)", `{"tool_response":{"stdout":"ok","stderr":"","interrupted":false,"isImage":false}}`, false},
		{"exit_code 0", `{"tool_response":{"exit_code":0}}`, false},
		{"exit_code 2", `{"tool_response":{"exit_code":2}}`, true},
		{"exitCode 1", `{"tool_response":{"exitCode":1}}`, true},
		{"interrupted", `{"tool_response":{"stdout":"","interrupted":true}}`, true},
		{"error string in response", `{"tool_response":{"error":"File does not exist."}}`, true},
		{"error null", `{"tool_response":{"error":null,"exit_code":0}}`, false},
		{"MCP isError", `{"tool_response":{"content":[],"isError":true}}`, true},
		{"string response mentioning failure", `{"tool_response":"FAILED: 3 tests, Traceback, panic:"}`, false},
		{"PostToolUseFailure error", `{"error":"Command failed with exit code 1","is_interrupt":false}`, true},
		{"PostToolUseFailure interrupt", `{"error":"","is_interrupt":true}`, true},
		{"stderr only", `{"tool_response":{"stdout":"","stderr":"warning: x"}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := ParseInput([]byte(tc.payload))
			if err != nil {
				t.Fatal(err)
			}
			if got := in.ToolResult().Failed(); got != tc.failed {
				t.Fatalf("Failed() = %v, want %v (%+v)", got, tc.failed, in.ToolResult())
			}
		})
	}
}

func TestTranscriptSummary(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.jsonl")
	lines := []any{
		map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": "fix the bug"}},
		map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "First thought."},
		}}},
		map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "tool_use", "name": "Bash"},
		}}},
		map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "Second: the cache key ignores the locale."},
			map[string]any{"type": "text", "text": "Next I test it."},
		}}},
		map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": "Third, as a string."}},
		map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": "Fourth."}},
	}
	var b strings.Builder
	for _, l := range lines {
		data, _ := json.Marshal(l)
		b.Write(data)
		b.WriteByte('\n')
	}
	b.WriteString("{broken line\n")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := TranscriptSummary(p, 0)
	want := "Second: the cache key ignores the locale.\nNext I test it.\n---\nThird, as a string.\n---\nFourth."
	if got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
	if got := TranscriptSummary(p, 7); got != "Fourth." {
		t.Fatalf("bounded summary %q", got)
	}
	if TranscriptSummary(filepath.Join(dir, "missing"), 100) != "" || TranscriptSummary("", 100) != "" {
		t.Fatal("missing transcript gave a summary")
	}
}
