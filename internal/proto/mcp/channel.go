package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// A stdio session bound to an agent (Options.Agent, RemoteOptions.Agent:
// `switchboard mcp --agent ID`) is a Claude Code channel: the server
// declares the experimental capability claude/channel, and every message
// addressed to the agent is pushed into the session as a
// notifications/claude/channel notification, which the host shows the
// model as an event it can act on. The shapes follow Claude Code's
// channels reference (research preview, Claude Code 2.1.80 and later):
//
//	{"method": "notifications/claude/channel",
//	 "params": {"content": "<the message as text>",
//	            "meta": {"sender": "…", "message_id": "…", …}}}
//
// content is the message's text parts, code in fences, data as JSON, and a
// short note for each image or file; meta holds string attributes only
// (keys of letters, digits and underscores, as the host requires): sender,
// sender_uri, message_id, type, and conversation_id and correlation_id
// when the message has them.
//
// Nothing is lost and nothing is shown twice. The messages are pulled
// with a lease and acknowledged to the relay only after their
// notification was written to the host, so a host or hub that stops in
// between gets them again; a message pushed already (its acknowledgement
// was lost) is dropped by its id and acknowledged. The gate is the
// agent's card: the relay refuses a sender the card does not allow when
// the message is sent, and the channel checks the card again before a
// push, so a sender removed from the card since cannot push either (its
// message is left unacknowledged and ends as a timeout). The session
// answers with the reply tool (tools.go), in the message's conversation,
// correlated to it.

// Channel wire names.
const (
	ChannelCapability = "claude/channel"
	ChannelMethod     = "notifications/claude/channel"
)

// channelInstructions tells the model how the channel's events look and
// how to answer them.
func channelInstructions(agent string) string {
	return fmt.Sprintf(`This session is the agent %q on the Switchboard hub. Messages other agents send to it arrive as
<channel source="switchboard" sender="…" message_id="…" conversation_id="…"> events. The sender does not read this
session: answer a message with the reply tool (message_id = the event's message_id), which sends your answer to the
sender in the same conversation. Use send_message to start a new exchange with any agent.`, agent)
}

// ChannelParams are the params of a channel notification.
type ChannelParams struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// channelParams renders m as a channel notification.
func channelParams(m inboxMessage) ChannelParams {
	meta := map[string]string{"sender": m.Sender, "message_id": m.ID, "type": m.Type}
	if m.SenderURI != "" {
		meta["sender_uri"] = m.SenderURI
	}
	if m.ConversationID != "" {
		meta["conversation_id"] = m.ConversationID
	}
	if m.CorrelationID != "" {
		meta["correlation_id"] = m.CorrelationID
	}
	content := m.Text
	if content == "" {
		content = "(empty message)"
	}
	return ChannelParams{Content: content, Meta: meta}
}

// inboxMessage is a message of the bound agent as the channel sees it.
type inboxMessage struct {
	ID, Sender, SenderURI, Type, ConversationID, CorrelationID string
	// Text is the content as text (renderText).
	Text string
}

// inboxSource is where a channel takes its agent's messages from: the
// relay in this process, or a hub's MCP tools.
type inboxSource interface {
	// prepare makes the agent exist before the host connects.
	prepare(ctx context.Context) error
	// pull returns the agent's unread messages, leased (not
	// acknowledged), waiting up to wait for one.
	pull(ctx context.Context, wait time.Duration) ([]inboxMessage, error)
	// ack acknowledges messages pushed to the host.
	ack(ctx context.Context, ids []string) error
}

// notifier writes a notification to the host (the stdio router).
type notifier interface {
	Notify(ctx context.Context, method string, params any) error
}

// channel pushes an agent's messages into a host.
type channel struct {
	inbox  inboxSource
	notify notifier
	log    *slog.Logger
	// allowed, when set, checks a message against the agent's card
	// before it is pushed.
	allowed func(ctx context.Context, m inboxMessage) bool
	// pollWait is how long one pull waits for a message [25s].
	pollWait time.Duration
	seen     *idSet
}

// run pushes messages from the time the host has initialized until ctx
// ends. Failures (a hub away for a while) are logged and retried.
func (ch *channel) run(ctx context.Context, initialized <-chan struct{}) {
	if ch.pollWait <= 0 {
		ch.pollWait = 25 * time.Second
	}
	if ch.seen == nil {
		ch.seen = newIDSet(10000)
	}
	backoff := newBackoff()
	for {
		if err := ch.inbox.prepare(ctx); err == nil {
			break
		} else if ctx.Err() == nil {
			ch.log.Warn("mcp channel: agent not ready", "err", err)
		}
		if !backoff.sleep(ctx) {
			return
		}
	}
	select {
	case <-initialized:
	case <-ctx.Done():
		return
	}
	backoff.reset()
	for ctx.Err() == nil {
		ms, err := ch.inbox.pull(ctx, ch.pollWait)
		if err == nil {
			err = ch.push(ctx, ms)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			ch.log.Warn("mcp channel: pull or push failed; retrying", "err", err)
			if !backoff.sleep(ctx) {
				return
			}
			continue
		}
		backoff.reset()
	}
}

// push writes each message's notification, then acknowledges it.
func (ch *channel) push(ctx context.Context, ms []inboxMessage) error {
	for _, m := range ms {
		if ch.seen.has(m.ID) {
			// Pushed before, its acknowledgement lost: not again.
			if err := ch.inbox.ack(ctx, []string{m.ID}); err != nil {
				return err
			}
			continue
		}
		if ch.allowed != nil && !ch.allowed(ctx, m) {
			ch.log.Warn("mcp channel: sender no longer allowed by the agent's card; message left undelivered",
				"message_id", m.ID, "sender", m.Sender)
			continue
		}
		if err := ch.notify.Notify(ctx, ChannelMethod, channelParams(m)); err != nil {
			return fmt.Errorf("write channel notification: %w", err)
		}
		ch.seen.add(m.ID)
		if err := ch.inbox.ack(ctx, []string{m.ID}); err != nil {
			return err
		}
	}
	return nil
}

// localInbox is the inbox of c's agent on a relay in this process.
type localInbox struct {
	s *Server
	c caller
}

func (in *localInbox) prepare(ctx context.Context) error { return in.s.ensureHost(ctx, in.c) }

func (in *localInbox) pull(ctx context.Context, wait time.Duration) ([]inboxMessage, error) {
	if err := in.s.ensureHost(ctx, in.c); err != nil { // renews the lease
		return nil, err
	}
	ms, err := in.s.inbox(ctx, nil, in.c, 16, wait, time.Minute, false)
	if err != nil {
		return nil, err
	}
	out := make([]inboxMessage, 0, len(ms))
	for _, m := range ms {
		out = append(out, inboxMessage{ID: m.ID, Sender: m.Sender, SenderURI: in.s.relay.URI(m.Sender), Type: m.Type,
			ConversationID: m.ConversationID, CorrelationID: m.CorrelationID, Text: renderText(m.Parts)})
	}
	return out, nil
}

func (in *localInbox) ack(ctx context.Context, ids []string) error {
	_, err := in.s.relay.AckAs(ctx, in.c.p, in.c.agentID, ids)
	return err
}

// allowedSender checks a message against the card of c's agent, as it is
// now: the relay checked the card when the message was sent, and this
// catches a sender the card has refused since.
func (s *Server) allowedSender(c caller) func(ctx context.Context, m inboxMessage) bool {
	return func(ctx context.Context, m inboxMessage) bool {
		a, err := s.relay.LookupAgent(ctx, hubPrincipal, c.agentID)
		if err != nil {
			return false
		}
		return core.CheckAccess(a, s.relay.URI(m.Sender), true) == nil
	}
}

// remoteInbox is the inbox of the bridge's agent on a hub, through the
// hub's check_inbox and ack_messages tools.
type remoteInbox struct {
	cs    *sdk.ClientSession
	agent string
}

// prepare has nothing to do: the hub registers the agent at its first
// check_inbox.
func (in *remoteInbox) prepare(context.Context) error { return nil }

func (in *remoteInbox) pull(ctx context.Context, wait time.Duration) ([]inboxMessage, error) {
	var out CheckInboxOutput
	args := map[string]any{"max": 16, "ack": false, "lease_ms": 60000, "timeout_ms": wait.Milliseconds()}
	if err := callRemote(ctx, in.cs, "check_inbox", args, &out); err != nil {
		return nil, err
	}
	if out.AgentID != in.agent {
		// Not pushed: the messages come back to the right session.
		return nil, fmt.Errorf("the hub says this session is agent %q, not %q: %w", out.AgentID, in.agent, core.ErrNotPermitted)
	}
	ms := make([]inboxMessage, 0, len(out.Messages))
	for _, m := range out.Messages {
		parts, err := ToParts("", m.Parts)
		if err != nil {
			parts = nil
		}
		ms = append(ms, inboxMessage{ID: m.MessageID, Sender: m.Sender, Type: m.Type, ConversationID: m.ConversationID,
			CorrelationID: m.CorrelationID, Text: renderText(parts)})
	}
	return ms, nil
}

func (in *remoteInbox) ack(ctx context.Context, ids []string) error {
	return callRemote(ctx, in.cs, "ack_messages", map[string]any{"message_ids": ids}, nil)
}

// callRemote calls a tool of the hub and decodes its structured output;
// a tool error is an error.
func callRemote(ctx context.Context, cs *sdk.ClientSession, name string, args, out any) error {
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		var text string
		for _, c := range res.Content {
			if t, ok := c.(*sdk.TextContent); ok {
				text += t.Text
			}
		}
		return fmt.Errorf("%s: %s", name, text)
	}
	if out == nil {
		return nil
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// idSet is a bounded set of ids: the oldest fall out past its size.
type idSet struct {
	max  int
	ids  map[string]struct{}
	ring []string
	next int
}

func newIDSet(max int) *idSet { return &idSet{max: max, ids: map[string]struct{}{}} }

func (s *idSet) has(id string) bool { _, ok := s.ids[id]; return ok }

func (s *idSet) add(id string) {
	if s.has(id) {
		return
	}
	if len(s.ring) < s.max {
		s.ring = append(s.ring, id)
	} else {
		delete(s.ids, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % s.max
	}
	s.ids[id] = struct{}{}
}

// backoff waits 250 ms, then twice as long each time up to 10 s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 250 * time.Millisecond} }
func (b *backoff) reset()  { b.d = 250 * time.Millisecond }
func (b *backoff) sleep(ctx context.Context) bool {
	t := time.NewTimer(b.d)
	defer t.Stop()
	b.d = min(2*b.d, 10*time.Second)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
