package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HostClaudeCode is the only host install knows.
const HostClaudeCode = "claude-code"

// claudeHook is one event's wiring: Claude Code event, matcher, subcommand.
type claudeHook struct {
	event, matcher, sub string
	timeout             int
}

var claudeHooks = []claudeHook{
	{"SessionStart", "", "session-start", 10},
	{"UserPromptSubmit", "", "user-prompt", 10},
	{"PreToolUse", "Bash|Read|Write|Edit|MultiEdit|NotebookEdit|Grep|Glob", "pre-tool-use", 10},
	{"PostToolUse", "Bash", "post-tool-use", 10},
	{"PostToolUseFailure", "*", "post-tool-use-failure", 10},
	{"PreCompact", "", "pre-compact", 10},
	{"Stop", "", "stop", 10},
}

// ownMarker identifies hook commands written by install (so a re-install
// replaces them instead of adding duplicates).
const ownMarker = " hook "

// Config returns the hooks configuration for host, with command as the
// switchboard executable (e.g. "switchboard" or an absolute path), as a
// settings.json fragment: {"hooks": {...}}.
func Config(host, command string) ([]byte, error) {
	hooks, err := hooksFor(host, command)
	if err != nil {
		return nil, err
	}
	return marshalIndent(map[string]any{"hooks": hooks})
}

func hooksFor(host, command string) (map[string]any, error) {
	if host != HostClaudeCode {
		return nil, fmt.Errorf("%w %q (supported: %s)", ErrUnknownHost, host, HostClaudeCode)
	}
	if command == "" {
		command = "switchboard"
	}
	hooks := map[string]any{}
	for _, h := range claudeHooks {
		group := map[string]any{
			"hooks": []any{map[string]any{"type": "command", "command": shellQuote(command) + " hook " + h.sub, "timeout": h.timeout}},
		}
		if h.matcher != "" {
			group["matcher"] = h.matcher
		}
		hooks[h.event] = []any{group}
	}
	return hooks, nil
}

// MergeSettings merges the hooks for host into an existing settings.json
// document (empty means none): other settings and other hooks are kept,
// hook groups previously installed by switchboard are replaced.
func MergeSettings(existing []byte, host, command string) ([]byte, error) {
	ours, err := hooksFor(host, command)
	if err != nil {
		return nil, err
	}
	settings := map[string]any{}
	if len(bytes.TrimSpace(existing)) > 0 {
		if err := json.Unmarshal(existing, &settings); err != nil {
			return nil, fmt.Errorf("hook: existing settings: %w", err)
		}
		if settings == nil {
			settings = map[string]any{}
		}
	}
	all, _ := settings["hooks"].(map[string]any)
	if all == nil {
		all = map[string]any{}
	}
	for event, groups := range ours {
		var kept []any
		if old, ok := all[event].([]any); ok {
			for _, g := range old {
				if !installedByUs(g) {
					kept = append(kept, g)
				}
			}
		}
		all[event] = append(kept, groups.([]any)...)
	}
	settings["hooks"] = all
	return marshalIndent(settings)
}

// installedByUs reports whether a hook group runs "<…>switchboard hook …"
// (but the inbox's hooks, which install_inbox.go keeps).
func installedByUs(group any) bool {
	g, ok := group.(map[string]any)
	if !ok {
		return false
	}
	hs, _ := g["hooks"].([]any)
	for _, h := range hs {
		m, _ := h.(map[string]any)
		cmd, _ := m["command"].(string)
		if strings.Contains(cmd, "switchboard") && strings.Contains(cmd, ownMarker) && !strings.Contains(cmd, inboxMarker) {
			return true
		}
	}
	return false
}

// WriteSettings merges the hooks into the settings file at path (created
// with its directory if missing), writing through a temporary file.
func WriteSettings(path, host, command string) error {
	existing, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("hook: read settings: %w", err)
	}
	merged, err := MergeSettings(existing, host, command)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("hook: settings directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".settings-*")
	if err != nil {
		return fmt.Errorf("hook: write settings: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(merged); err != nil {
		tmp.Close()
		return fmt.Errorf("hook: write settings: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("hook: write settings: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("hook: write settings: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("hook: write settings: %w", err)
	}
	return nil
}

func marshalIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("hook: encode settings: %w", err)
	}
	return buf.Bytes(), nil
}

// shellQuote quotes a command path containing whitespace. A command that
// already has quotes or a $ (e.g. "$CLAUDE_PROJECT_DIR"/bin/switchboard)
// is used as written.
func shellQuote(s string) string {
	if strings.ContainsAny(s, "'\"$") || !strings.ContainsAny(s, " \t") {
		return s
	}
	return "'" + s + "'"
}
