// Package hook adapts the AMP engine to host hook processes (Claude Code's
// hook contract): it parses the host's JSON on stdin, runs one tick with a
// file-backed state directory, and writes the host's JSON reply.
package hook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/amp"
)

// Input is a Claude Code hook payload. Fields a given event does not carry
// stay zero.
type Input struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	PermissionMode string `json:"permission_mode"`
	HookEventName  string `json:"hook_event_name"`
	// UserPromptSubmit.
	Prompt string `json:"prompt"`
	// PreToolUse, PostToolUse, PostToolUseFailure.
	ToolName     string          `json:"tool_name"`
	ToolInput    map[string]any  `json:"tool_input"`
	ToolResponse json.RawMessage `json:"tool_response"`
	// PostToolUseFailure.
	Error       string `json:"error"`
	IsInterrupt bool   `json:"is_interrupt"`
	// SessionStart.
	Source string `json:"source"`
	// PreCompact.
	Trigger            string `json:"trigger"`
	CustomInstructions string `json:"custom_instructions"`
	// Stop.
	StopHookActive       bool   `json:"stop_hook_active"`
	LastAssistantMessage string `json:"last_assistant_message"`
}

// ErrBadInput is returned when the hook input is not a JSON object.
var ErrBadInput = errors.New("hook: input is not a JSON object")

// ParseInput decodes a hook payload leniently: unknown fields are ignored
// and a field of the wrong type is left zero rather than failing the whole
// payload. Empty input is an empty payload. Only input that is not a JSON
// object at all is an error.
func ParseInput(data []byte) (Input, error) {
	var in Input
	if len(bytes.TrimSpace(data)) == 0 {
		return in, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return in, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	str := func(key string) string {
		var s string
		if v, ok := raw[key]; ok && json.Unmarshal(v, &s) == nil {
			return s
		}
		return ""
	}
	boolean := func(key string) bool {
		var b bool
		if v, ok := raw[key]; ok && json.Unmarshal(v, &b) == nil {
			return b
		}
		return false
	}
	in.SessionID = str("session_id")
	in.TranscriptPath = str("transcript_path")
	in.Cwd = str("cwd")
	in.PermissionMode = str("permission_mode")
	in.HookEventName = str("hook_event_name")
	in.Prompt = str("prompt")
	in.ToolName = str("tool_name")
	if v, ok := raw["tool_input"]; ok {
		var m map[string]any
		if json.Unmarshal(v, &m) == nil {
			in.ToolInput = m
		}
	}
	if v, ok := raw["tool_response"]; ok && len(v) > 0 && string(v) != "null" {
		in.ToolResponse = v
	}
	in.Error = str("error")
	if in.Error == "" {
		if v, ok := raw["error"]; ok && string(v) != "null" && string(v) != "false" && string(v) != `""` {
			in.Error = string(v) // an error object: keep its JSON
		}
	}
	in.IsInterrupt = boolean("is_interrupt")
	in.Source = str("source")
	in.Trigger = str("trigger")
	in.CustomInstructions = str("custom_instructions")
	in.StopHookActive = boolean("stop_hook_active")
	in.LastAssistantMessage = str("last_assistant_message")
	return in, nil
}

// ToolResult extracts the real failure signals from the tool response and
// the failure fields: exit_code/exitCode, error, interrupted/is_interrupt,
// is_error/isError. A response without any of them is not a failure.
func (in Input) ToolResult() *amp.ToolResult {
	r := &amp.ToolResult{Error: in.Error, Interrupted: in.IsInterrupt}
	var obj map[string]json.RawMessage
	if len(in.ToolResponse) > 0 && json.Unmarshal(in.ToolResponse, &obj) == nil {
		for _, k := range []string{"exit_code", "exitCode"} {
			var code float64
			if v, ok := obj[k]; ok && json.Unmarshal(v, &code) == nil {
				c := int(code)
				if code != float64(c) {
					c = 1 // a fractional exit code is not 0
				}
				r.ExitCode = &c
				break
			}
		}
		var s string
		if v, ok := obj["error"]; ok && r.Error == "" {
			if json.Unmarshal(v, &s) == nil {
				r.Error = s
			} else if string(v) != "null" && string(v) != "false" {
				r.Error = string(v)
			}
		}
		var b bool
		if v, ok := obj["interrupted"]; ok && json.Unmarshal(v, &b) == nil && b {
			r.Interrupted = true
		}
		for _, k := range []string{"is_error", "isError"} {
			if v, ok := obj[k]; ok && json.Unmarshal(v, &b) == nil && b && r.Error == "" {
				r.Error = "tool reported an error"
			}
		}
	}
	return r
}

// transcriptTail is how much of the transcript's end is read for the
// reasoning summary.
const transcriptTail = 256 << 10

// TranscriptSummary returns the last few assistant texts of a Claude Code
// transcript (JSON lines), reading only the file's tail. Errors yield "".
func TranscriptSummary(path string, maxLen int) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	skipFirst := false
	if fi.Size() > transcriptTail {
		if _, err := f.Seek(fi.Size()-transcriptTail, io.SeekStart); err != nil {
			return ""
		}
		skipFirst = true
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), transcriptTail+1)
	var texts []string
	for sc.Scan() {
		if skipFirst {
			skipFirst = false
			continue
		}
		var line struct {
			Type    string `json:"type"`
			Message struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || (line.Type != "assistant" && line.Message.Role != "assistant") {
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		var s string
		switch {
		case json.Unmarshal(line.Message.Content, &s) == nil:
		case json.Unmarshal(line.Message.Content, &parts) == nil:
			var b strings.Builder
			for _, p := range parts {
				if p.Type == "text" && p.Text != "" {
					if b.Len() > 0 {
						b.WriteByte('\n')
					}
					b.WriteString(p.Text)
				}
			}
			s = b.String()
		}
		if s = strings.TrimSpace(s); s != "" {
			texts = append(texts, s)
		}
	}
	if len(texts) > 3 {
		texts = texts[len(texts)-3:]
	}
	out := strings.Join(texts, "\n---\n")
	return amp.TailString(out, maxLen)
}
