package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParseInput feeds arbitrary bytes to the hook input parser and to a
// whole pre-tool-use run: the parser fails only with ErrBadInput, and the
// run always answers exactly one JSON object, {} or a deny (never a panic,
// never an allow after a fault).
func FuzzParseInput(f *testing.F) {
	f.Add([]byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git reset --hard"}}`))
	f.Add([]byte(`{"session_id":"s","tool_name":"Read","tool_input":{"file_path":"test/hidden/a"}}`))
	f.Add([]byte(`{"session_id":"s","tool_response":{"exit_code":1.5,"error":{"x":1},"isError":true},"is_interrupt":true}`))
	f.Add([]byte(`{"prompt":"建议放弃","stop_hook_active":true,"last_assistant_message":"all tests passed"}`))
	f.Add([]byte(``))
	f.Add([]byte(`[]`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseInput(data)
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("unexpected error kind: %v", err)
			}
		} else {
			in.ToolResult() // must not panic
		}
		var out bytes.Buffer
		if code := Run(context.Background(), "pre-tool-use", bytes.NewReader(data), &out, Options{StateDir: dir, Clock: fixed}); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		s := out.String()
		var obj map[string]any
		if strings.Count(s, "\n") != 1 || json.Unmarshal(out.Bytes(), &obj) != nil {
			t.Fatalf("output %q is not one JSON object line", s)
		}
		if s != "{}\n" && !strings.Contains(s, `"permissionDecision":"deny"`) {
			t.Fatalf("output %q is neither {} nor a deny", s)
		}
		if err != nil && !strings.Contains(s, "deny") {
			t.Fatalf("unparseable input %q was not denied: %s", data, s)
		}
	})
}
