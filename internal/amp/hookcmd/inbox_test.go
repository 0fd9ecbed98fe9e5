package hookcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// TestInboxCommand: "switchboard hook inbox" and "hook install --inbox"
// through the command line: flags, the token file, the host's reply.
func TestInboxCommand(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{})
	ctx := context.Background()
	reg, err := client.New(base).Register(ctx, client.Registration{AgentID: "author"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := client.New(base).Register(ctx, client.Registration{AgentID: "reviewer"})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(base)
	c.SetToken(other.Token)
	if _, err := c.Send(ctx, client.Message{MessageID: "q1", Sender: "reviewer", Receiver: "author", Type: "task", Payload: map[string]any{"text": "ping?"}}); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "author.token")
	if err := os.WriteFile(tokenFile, []byte(reg.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"inbox", "user-prompt", "--hub", base, "--agent", "author", "--token-file", tokenFile, "--state-dir", t.TempDir()},
		Stdio{In: strings.NewReader(`{"session_id":"s","hook_event_name":"UserPromptSubmit","prompt":"hi"}`), Out: &out, Err: &errb})
	var v struct {
		HookSpecificOutput struct{ HookEventName, AdditionalContext string }
	}
	if code != ExitOK || json.Unmarshal(out.Bytes(), &v) != nil || v.HookSpecificOutput.HookEventName != "UserPromptSubmit" ||
		!strings.Contains(v.HookSpecificOutput.AdditionalContext, "ping?") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	// A wrong token: the hub refuses, the host still gets {} and exit 0.
	out.Reset()
	t.Setenv("SWITCHBOARD_TOKEN", "sbk_wrong")
	code = Main(ctx, []string{"inbox", "stop", "--hub", base, "--agent", "author"}, Stdio{In: strings.NewReader(`{}`), Out: &out, Err: &errb})
	if code != ExitOK || strings.TrimSpace(out.String()) != "{}" {
		t.Fatalf("wrong token: exit %d, %q", code, out.String())
	}
	// install --inbox prints the three hooks.
	out.Reset()
	code = Main(ctx, []string{"install", "--host", "claude-code", "--inbox", "--hub", base, "--agent", "author", "--token-file", tokenFile},
		Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	for _, want := range []string{`"SessionStart"`, `"UserPromptSubmit"`, `"Stop"`, "hook inbox stop --hub " + base + " --agent author --token-file " + tokenFile} {
		if code != ExitOK || !strings.Contains(out.String(), want) {
			t.Fatalf("install --inbox lacks %q: exit %d\n%s", want, code, out.String())
		}
	}
}
