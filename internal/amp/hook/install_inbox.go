package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// inboxMarker identifies the inbox's hook commands (install replaces
// them; the AMP hooks' install leaves them).
const inboxMarker = " hook inbox "

// InboxInstall says how the inbox hooks run.
type InboxInstall struct {
	// Command runs switchboard ("switchboard", or a path).
	Command string
	// Hub, Agent: the hub and the agent whose inbox it is.
	Hub, Agent string
	// TokenFile, when set, is a file holding the agent's token (the token
	// itself is never written into settings; without a file the hook reads
	// SWITCHBOARD_TOKEN from the host's environment).
	TokenFile string
}

// inboxHooks are the Claude Code hooks of the inbox: context at
// SessionStart and UserPromptSubmit, the unanswered-mail check at Stop.
func inboxHooks(i InboxInstall) (map[string]any, error) {
	if i.Hub == "" || i.Agent == "" {
		return nil, fmt.Errorf("hook inbox: the hub and the agent are required")
	}
	cmd := i.Command
	if cmd == "" {
		cmd = "switchboard"
	}
	hooks := map[string]any{}
	for _, h := range []struct{ event, sub string }{{"SessionStart", InboxSessionStart}, {"UserPromptSubmit", InboxUserPrompt}, {"Stop", InboxStop}} {
		line := shellQuote(cmd) + inboxMarker + h.sub + " --hub " + shellQuote(i.Hub) + " --agent " + shellQuote(i.Agent)
		if i.TokenFile != "" {
			line += " --token-file " + shellQuote(i.TokenFile)
		}
		hooks[h.event] = []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": line, "timeout": 15}}}}
	}
	return hooks, nil
}

// InboxConfig returns the inbox's hooks as a settings.json fragment.
func InboxConfig(i InboxInstall) ([]byte, error) {
	hooks, err := inboxHooks(i)
	if err != nil {
		return nil, err
	}
	return marshalIndent(map[string]any{"hooks": hooks})
}

// WriteInboxSettings merges the inbox's hooks into the settings file at
// path: other settings and hooks are kept, inbox hooks installed before
// are replaced.
func WriteInboxSettings(path string, i InboxInstall) error {
	ours, err := inboxHooks(i)
	if err != nil {
		return err
	}
	existing, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("hook: read settings: %w", err)
	}
	settings := map[string]any{}
	if len(bytes.TrimSpace(existing)) > 0 {
		if err := json.Unmarshal(existing, &settings); err != nil {
			return fmt.Errorf("hook: existing settings: %w", err)
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
				if !groupRuns(g, inboxMarker) {
					kept = append(kept, g)
				}
			}
		}
		all[event] = append(kept, groups.([]any)...)
	}
	settings["hooks"] = all
	merged, err := marshalIndent(settings)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("hook: settings directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, merged, 0o644); err != nil {
		return fmt.Errorf("hook: write settings: %w", err)
	}
	return os.Rename(tmp, path)
}

// groupRuns reports whether a hook group runs a switchboard command
// containing marker.
func groupRuns(group any, marker string) bool {
	g, _ := group.(map[string]any)
	hs, _ := g["hooks"].([]any)
	for _, h := range hs {
		m, _ := h.(map[string]any)
		cmd, _ := m["command"].(string)
		if strings.Contains(cmd, "switchboard") && strings.Contains(cmd, marker) {
			return true
		}
	}
	return false
}
