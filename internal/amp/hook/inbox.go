package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/client"
)

// The inbox hook gives a coding-agent host without channels a durable
// inbox on a Switchboard hub, through the hooks every host of that family
// has (Claude Code's hook contract, 2026 form):
//
//   - SessionStart and UserPromptSubmit: the agent's unread messages are
//     added to the next turn's context,
//     {"hookSpecificOutput": {"hookEventName": "SessionStart" |
//     "UserPromptSubmit", "additionalContext": "…"}}, and acknowledged to
//     the hub once that answer is written;
//   - Stop: while messages that ask for an answer (no correlation id:
//     they answer nothing themselves) are unread, the session is kept
//     going, {"decision": "block", "reason": "<the messages>"}, and they
//     are acknowledged as shown. At most MaxStopBlocks Stops in a row are
//     blocked (a counter per session in the state directory), so mail
//     that keeps coming cannot keep the session from ever stopping; a Stop
//     that passes resets it.
//
// Messages are pulled with a lease and acknowledged only after they were
// shown: a hook that fails or times out leaves them unread for the next
// event. Any failure (the hub away, a bad payload) answers {} and exit 0:
// the host is never broken by its inbox.

// Inbox events.
const (
	InboxSessionStart = "session-start"
	InboxUserPrompt   = "user-prompt"
	InboxStop         = "stop"
)

// InboxOptions configure RunInbox.
type InboxOptions struct {
	// Hub is the hub's base URL (http://127.0.0.1:8080).
	Hub string
	// Token is the agent's token (empty on a hub with auth off).
	Token string
	// Agent is the agent whose inbox this is.
	Agent string
	// StateDir keeps the Stop counters [amp.DefaultStateDir()/inbox].
	StateDir string
	// MaxStopBlocks bounds the Stops blocked in a row [3].
	MaxStopBlocks int
	// Max bounds the messages shown at once [10].
	Max int
	// Log receives diagnostics [discarded].
	Log io.Writer
}

func (o *InboxOptions) defaults() {
	if o.MaxStopBlocks <= 0 {
		o.MaxStopBlocks = 3
	}
	if o.Max <= 0 {
		o.Max = 10
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.StateDir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			o.StateDir = filepath.Join(home, ".switchboard", "inbox")
		} else {
			o.StateDir = filepath.Join(os.TempDir(), "switchboard-inbox")
		}
	}
}

// ErrInboxEvent is an event the inbox does not handle.
var ErrInboxEvent = errors.New("hook inbox: unknown event (session-start, user-prompt, stop)")

// RunInbox handles one host event for the inbox: it reads the host's
// payload from in and writes the host's reply to out. It returns the exit
// code, which is 0 in every case but a usage error.
func RunInbox(ctx context.Context, event string, in io.Reader, out io.Writer, opt InboxOptions) int {
	opt.defaults()
	event = inboxEvent(event)
	if event == "" || opt.Hub == "" || opt.Agent == "" {
		fmt.Fprintf(opt.Log, "switchboard hook inbox: %v; --hub and --agent are required\n", ErrInboxEvent)
		fmt.Fprintln(out, "{}")
		return 2
	}
	data, _ := io.ReadAll(io.LimitReader(in, MaxInput))
	payload, err := ParseInput(data)
	if err != nil {
		fmt.Fprintf(opt.Log, "switchboard hook inbox: %v\n", err)
	}
	reply, ack, err := inboxReply(ctx, event, payload, opt)
	if err != nil {
		fmt.Fprintf(opt.Log, "switchboard hook inbox: %v\n", err)
		reply = []byte("{}")
	}
	if _, err := out.Write(append(reply, '\n')); err != nil {
		return 0 // not shown: not acknowledged, they come back
	}
	if f, ok := out.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
	if len(ack) > 0 {
		if _, err := newInboxClient(opt).Ack(ctx, opt.Agent, ack...); err != nil {
			fmt.Fprintf(opt.Log, "switchboard hook inbox: acknowledge: %v (the messages will be shown again)\n", err)
		}
	}
	return 0
}

// inboxEvent names an event in the inbox's terms ("" if unknown).
func inboxEvent(e string) string {
	switch e {
	case "session-start", "SessionStart":
		return InboxSessionStart
	case "user-prompt", "user-prompt-submit", "UserPromptSubmit":
		return InboxUserPrompt
	case "stop", "Stop":
		return InboxStop
	}
	return ""
}

func newInboxClient(opt InboxOptions) *client.Client {
	c := client.New(opt.Hub)
	if opt.Token != "" {
		c.SetToken(opt.Token)
	}
	return c
}

// inboxReply computes the host's reply and the messages it shows.
func inboxReply(ctx context.Context, event string, in Input, opt InboxOptions) (reply []byte, shown []string, err error) {
	c := newInboxClient(opt)
	if event == InboxStop {
		return stopReply(ctx, c, in, opt)
	}
	ms, err := c.Pull(ctx, opt.Agent, opt.Max, true, time.Minute)
	if err != nil {
		return nil, nil, fmt.Errorf("read the inbox of %s: %w", opt.Agent, err)
	}
	if len(ms) == 0 {
		return []byte("{}"), nil, nil
	}
	name := "SessionStart"
	if event == InboxUserPrompt {
		name = "UserPromptSubmit"
	}
	reply, err = json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": name, "additionalContext": renderInbox(opt.Agent, ms)}})
	return reply, ids(ms), err
}

// stopReply blocks the Stop while mail that asks for an answer is unread,
// at most MaxStopBlocks times in a row.
func stopReply(ctx context.Context, c *client.Client, in Input, opt InboxOptions) ([]byte, []string, error) {
	counter := stopCounter{dir: opt.StateDir, session: in.SessionID}
	n := counter.get()
	if n >= opt.MaxStopBlocks {
		fmt.Fprintf(opt.Log, "switchboard hook inbox: %d Stops blocked in a row; letting this one pass\n", n)
		counter.set(0)
		return []byte("{}"), nil, nil
	}
	// A short lease: what is not shown now is readable again at once.
	ms, err := c.Pull(ctx, opt.Agent, opt.Max, true, time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("read the inbox of %s: %w", opt.Agent, err)
	}
	asks := false
	for _, m := range ms {
		asks = asks || m.CorrelationID == nil || *m.CorrelationID == ""
	}
	if !asks {
		counter.set(0)
		return []byte("{}"), nil, nil
	}
	counter.set(n + 1)
	reason := renderInbox(opt.Agent, ms) + "\nAnswer the messages that ask for an answer before you stop."
	reply, err := json.Marshal(map[string]any{"decision": "block", "reason": reason})
	return reply, ids(ms), err
}

func ids(ms []client.Envelope) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.MessageID)
	}
	return out
}

// renderInbox is the messages as the model reads them.
func renderInbox(agent string, ms []client.Envelope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You (agent %q on the Switchboard hub) have %d unread message(s):\n", agent, len(ms))
	for i, m := range ms {
		fmt.Fprintf(&b, "\n[%d] From %s — message_id %s, type %s", i+1, m.Sender, m.MessageID, m.Type)
		if m.ConversationID != "" {
			fmt.Fprintf(&b, ", conversation %s", m.ConversationID)
		}
		if m.CorrelationID != nil && *m.CorrelationID != "" {
			fmt.Fprintf(&b, ", answering your message %s", *m.CorrelationID)
		}
		b.WriteString(":\n")
		b.WriteString(payloadText(m.Payload))
		b.WriteString("\n")
	}
	b.WriteString("\nTo answer a message, call the Switchboard MCP server's reply tool with its message_id.")
	return b.String()
}

// payloadText is an ATP payload as text: {"text": …} is the text; with
// "parts", each text part and a short note for each other part; any other
// object its JSON.
func payloadText(p json.RawMessage) string {
	var v struct {
		Text  *string `json:"text"`
		Parts []struct {
			Kind      string `json:"kind"`
			Text      string `json:"text"`
			Name      string `json:"name"`
			MediaType string `json:"media_type"`
			URL       string `json:"url"`
			Language  string `json:"language"`
		} `json:"parts"`
	}
	if json.Unmarshal(p, &v) != nil || (v.Text == nil && v.Parts == nil) {
		return string(bytes.TrimSpace(p))
	}
	if len(v.Parts) == 0 {
		return *v.Text
	}
	var lines []string
	for _, part := range v.Parts {
		switch part.Kind {
		case "text":
			lines = append(lines, part.Text)
		case "code":
			lines = append(lines, "```"+part.Language+"\n"+part.Text+"\n```")
		default:
			var attrs []string
			for _, a := range []string{part.Name, part.MediaType, part.URL} {
				if a != "" {
					attrs = append(attrs, a)
				}
			}
			lines = append(lines, fmt.Sprintf("[%s attached: %s]", part.Kind, strings.Join(attrs, ", ")))
		}
	}
	return strings.Join(lines, "\n")
}

// stopCounter is the number of Stops of a session blocked in a row, kept
// in a file of the state directory.
type stopCounter struct{ dir, session string }

func (c stopCounter) path() string {
	s := c.session
	if s == "" {
		s = DefaultSessionID
	}
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
	return filepath.Join(c.dir, "stop-"+s+".json")
}

func (c stopCounter) get() int {
	b, err := os.ReadFile(c.path())
	if err != nil {
		return 0
	}
	var v struct{ Blocked int }
	_ = json.Unmarshal(b, &v)
	return v.Blocked
}

func (c stopCounter) set(n int) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return
	}
	b, _ := json.Marshal(struct{ Blocked int }{n})
	tmp := c.path() + ".tmp"
	if os.WriteFile(tmp, b, 0o600) == nil {
		_ = os.Rename(tmp, c.path())
	}
}
