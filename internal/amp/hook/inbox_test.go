package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/amp/hook"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// inboxHub is a hub with auth on and the agents "author" (whose inbox the
// hook reads) and "reviewer" (who writes to it), each with its token.
type inboxHub struct {
	t      *testing.T
	h      *hub.Hub
	base   string
	tokens map[string]string
}

func newInboxHub(t *testing.T) *inboxHub {
	t.Helper()
	h, base := hubtest.Start(t, hub.Options{})
	ih := &inboxHub{t: t, h: h, base: base, tokens: map[string]string{}}
	for _, id := range []string{"author", "reviewer"} {
		reg, err := client.New(base).Register(context.Background(), client.Registration{AgentID: id})
		if err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
		ih.tokens[id] = reg.Token
	}
	return ih
}

// send sends a message from reviewer to author (an answer when corr is set).
func (ih *inboxHub) send(id, text, corr string) {
	ih.t.Helper()
	c := client.New(ih.base)
	c.SetToken(ih.tokens["reviewer"])
	m := client.Message{MessageID: id, Sender: "reviewer", Receiver: "author", Type: "task", Payload: map[string]any{"text": text}, ConversationID: "pr-9"}
	if corr != "" {
		m.Type, m.CorrelationID = "task.result", corr
	}
	if _, err := c.Send(context.Background(), m); err != nil {
		ih.t.Fatalf("send %s: %v", id, err)
	}
}

// sendFromAuthor sends a message author → reviewer and returns its id.
func (ih *inboxHub) sendFromAuthor(id string) {
	ih.t.Helper()
	c := client.New(ih.base)
	c.SetToken(ih.tokens["author"])
	if _, err := c.Send(context.Background(), client.Message{MessageID: id, Sender: "author", Receiver: "reviewer", Type: "task", Payload: map[string]any{"text": "review?"}}); err != nil {
		ih.t.Fatalf("send %s: %v", id, err)
	}
}

func (ih *inboxHub) queued() int {
	n, err := ih.h.Store.QueueDepth(context.Background(), "author")
	if err != nil {
		ih.t.Fatal(err)
	}
	return n
}

// run runs the inbox hook for event with a Claude-Code-shaped payload.
func (ih *inboxHub) run(event string, payload map[string]any, dir string) map[string]any {
	ih.t.Helper()
	in, _ := json.Marshal(payload)
	var out bytes.Buffer
	code := hook.RunInbox(context.Background(), event, bytes.NewReader(in), &out, hook.InboxOptions{Hub: ih.base, Token: ih.tokens["author"],
		Agent: "author", StateDir: dir})
	if code != 0 {
		ih.t.Fatalf("%s: exit %d", event, code)
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		ih.t.Fatalf("%s: output %q: %v", event, out.String(), err)
	}
	return v
}

// TestInboxContext: at SessionStart and UserPromptSubmit the unread mail
// is the next turn's additional context, in the hook contract's shape,
// and is acknowledged once shown; with none the answer is {}.
func TestInboxContext(t *testing.T) {
	ih := newInboxHub(t)
	dir := t.TempDir()
	if v := ih.run("session-start", map[string]any{"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup"}, dir); len(v) != 0 {
		t.Fatalf("no mail: %v", v)
	}
	ih.send("m1", "Please look at the retry loop.", "")
	ih.send("m2", "And the tests.", "")
	for _, tc := range []struct{ event, name string }{{"session-start", "SessionStart"}, {"user-prompt", "UserPromptSubmit"}} {
		t.Run(tc.event, func(t *testing.T) {
			if tc.event == "user-prompt" {
				ih.send("m3", "One more thing.", "")
			}
			v := ih.run(tc.event, map[string]any{"hook_event_name": tc.name, "session_id": "s1", "prompt": "go on"}, dir)
			out, _ := v["hookSpecificOutput"].(map[string]any)
			ctxText, _ := out["additionalContext"].(string)
			if out["hookEventName"] != tc.name || !strings.Contains(ctxText, "From reviewer") || !strings.Contains(ctxText, "conversation pr-9") {
				t.Fatalf("reply = %v", v)
			}
			for _, want := range map[string][]string{"session-start": {"retry loop", "And the tests.", "message_id m1"}, "user-prompt": {"One more thing."}}[tc.event] {
				if !strings.Contains(ctxText, want) {
					t.Errorf("context lacks %q:\n%s", want, ctxText)
				}
			}
			if n := ih.queued(); n != 0 {
				t.Fatalf("%d messages still unread after they were shown", n)
			}
		})
	}
}

// failingWriter fails every write, as a host that went away.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestInboxNotShownNotAcknowledged: when the answer cannot be written the
// messages stay unread; when the hub is away the host still gets {} and
// exit 0.
func TestInboxNotShownNotAcknowledged(t *testing.T) {
	ih := newInboxHub(t)
	ih.send("m1", "hello", "")
	code := hook.RunInbox(context.Background(), "user-prompt", strings.NewReader(`{"session_id":"s"}`), failingWriter{},
		hook.InboxOptions{Hub: ih.base, Token: ih.tokens["author"], Agent: "author", StateDir: t.TempDir()})
	if code != 0 || ih.queued() != 1 {
		t.Fatalf("exit %d, %d queued: the message must stay unread", code, ih.queued())
	}
	var out bytes.Buffer
	code = hook.RunInbox(context.Background(), "stop", strings.NewReader(`{}`), &out,
		hook.InboxOptions{Hub: "http://127.0.0.1:1", Agent: "author", StateDir: t.TempDir()})
	if code != 0 || strings.TrimSpace(out.String()) != "{}" {
		t.Fatalf("hub away: exit %d, %q", code, out.String())
	}
}

// TestInboxStop: a Stop with unread mail asking for an answer is blocked
// with the mail as the reason (and the mail acknowledged as shown); mail
// that only answers does not block; at most three Stops in a row are
// blocked.
func TestInboxStop(t *testing.T) {
	ih := newInboxHub(t)
	dir := t.TempDir()
	stop := map[string]any{"hook_event_name": "Stop", "session_id": "s2", "stop_hook_active": false}
	if v := ih.run("stop", stop, dir); len(v) != 0 {
		t.Fatalf("no mail: %v", v)
	}
	ih.send("ask-1", "Can you re-run the benchmark?", "")
	v := ih.run("stop", stop, dir)
	if v["decision"] != "block" || !strings.Contains(v["reason"].(string), "re-run the benchmark") {
		t.Fatalf("stop with a question unread = %v", v)
	}
	if ih.queued() != 0 {
		t.Fatal("the question shown at Stop is still unread")
	}
	// An answer to the author's own message does not keep it from stopping,
	// and stays unread for the next turn.
	ih.sendFromAuthor("mine")
	ih.send("ans-1", "Approved.", "mine")
	if v := ih.run("stop", stop, dir); len(v) != 0 {
		t.Fatalf("stop with only an answer unread = %v", v)
	}
	waitUnread(t, ih, "ans-1")
	// Mail that keeps coming blocks at most three Stops in a row.
	blocked := 0
	for i := 0; i < 5; i++ {
		ih.send("again-"+string(rune('a'+i)), "another question", "")
		if v := ih.run("stop", stop, dir); v["decision"] == "block" {
			blocked++
		} else {
			break
		}
	}
	if blocked != 3 {
		t.Fatalf("%d Stops blocked in a row, want 3", blocked)
	}
}

// waitUnread waits until message id can be read again by the next turn
// (its short Stop lease has passed) and checks that it is shown then.
func waitUnread(t *testing.T, ih *inboxHub, id string) {
	t.Helper()
	waitfor.TrueWithin(t, 20*time.Second, id+" to be readable again", func() bool {
		v := ih.run("user-prompt", map[string]any{"session_id": "s2"}, t.TempDir())
		out, ok := v["hookSpecificOutput"].(map[string]any)
		if !ok {
			return false
		}
		if text, _ := out["additionalContext"].(string); !strings.Contains(text, id) || !strings.Contains(text, "answering your message mine") {
			t.Fatalf("next turn shows %v, not %s", v, id)
		}
		return true
	})
}

// TestInboxInstall: install --inbox writes the three hooks into the
// settings, keeps what was there, replaces its own on a second run, and
// the AMP hooks' install leaves them.
func TestInboxInstall(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"model":"x","hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify-me"}]}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	in := hook.InboxInstall{Hub: "http://127.0.0.1:8080", Agent: "author", TokenFile: "/home/me/.switchboard/author.token"}
	for i := 0; i < 2; i++ {
		if err := hook.WriteInboxSettings(path, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := hook.WriteSettings(path, hook.HostClaudeCode, "switchboard"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var s struct {
		Model string
		Hooks map[string][]struct{ Hooks []struct{ Command string } }
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	count := func(event, needle string) int {
		n := 0
		for _, g := range s.Hooks[event] {
			for _, h := range g.Hooks {
				if strings.Contains(h.Command, needle) {
					n++
				}
			}
		}
		return n
	}
	want := "switchboard hook inbox stop --hub http://127.0.0.1:8080 --agent author --token-file /home/me/.switchboard/author.token"
	if s.Model != "x" || count("Stop", "notify-me") != 1 || count("Stop", want) != 1 || count("Stop", "hook stop") != 1 ||
		count("SessionStart", "hook inbox session-start") != 1 || count("UserPromptSubmit", "hook inbox user-prompt") != 1 {
		t.Fatalf("settings:\n%s", b)
	}
}
