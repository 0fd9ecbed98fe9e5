package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Tool errors (results with isError), matched with errors.Is in tests.
var (
	ErrNotFound  = errors.New("not found")
	ErrForbidden = errors.New("forbidden")
	ErrInvalid   = errors.New("invalid argument")
)

func ptr[T any](v T) *T { return &v }

func (s *Server) addTools() {
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	sdk.AddTool(s.srv, &sdk.Tool{Name: "list_agents", Title: "List agents",
		Description: "List the agents registered on the hub, optionally only those offering a capability or only those online.",
		Annotations: ro}, s.listAgents)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "get_agent_card", Title: "Get an agent's card",
		Description: "Get one agent's card: what it is, what it accepts, how it is reached.",
		Annotations: ro}, s.getAgentCard)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "send_message", Title: "Send a message",
		Description: "Send a message (text or multimodal parts) to any agent on the hub, whatever protocol it speaks. " +
			"Returns at once with the message id and its receipt; use wait_for_reply with that id for the agent's answer.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)}}, s.sendMessage)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "get_receipt", Title: "Get a message's receipt",
		Description: "Get the delivery receipt of a message: queued, delivered, rejected, timeout or expired, with its history.",
		Annotations: ro}, s.getReceipt)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "wait_for_reply", Title: "Wait for a reply",
		Description: "Wait for the reply to a message you sent (a message whose correlation_id is its id), " +
			"or, without message_id, for the next message addressed to you. Reports progress while waiting.",
		Annotations: ro}, s.waitForReply)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "list_conversations", Title: "List conversations",
		Description: "List the conversations you take part in, most recent first.",
		Annotations: ro}, s.listConversations)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "get_conversation", Title: "Get a conversation",
		Description: "Get a conversation and its messages in order.",
		Annotations: ro}, s.getConversation)
}

// ListAgentsInput is list_agents' input.
type ListAgentsInput struct {
	Capability string `json:"capability,omitempty" jsonschema:"only agents offering this capability"`
	Alive      bool   `json:"alive,omitempty" jsonschema:"only agents whose lease is current"`
	Limit      int    `json:"limit,omitempty" jsonschema:"at most this many agents (default 100, at most 1000)"`
}

// ListAgentsOutput is list_agents' output.
type ListAgentsOutput struct {
	Agents []AgentView `json:"agents"`
	Count  int         `json:"count"`
}

func limitOf(n, def, max int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("%w: limit must not be negative", ErrInvalid)
	case n == 0:
		return def, nil
	case n > max:
		return max, nil
	}
	return n, nil
}

func (s *Server) listAgents(ctx context.Context, req *sdk.CallToolRequest, in ListAgentsInput) (*sdk.CallToolResult, ListAgentsOutput, error) {
	limit, err := limitOf(in.Limit, 100, 1000)
	if err != nil {
		return nil, ListAgentsOutput{}, err
	}
	out, err := s.agents(ctx, in.Capability, in.Alive, limit)
	if err != nil {
		return nil, ListAgentsOutput{}, err
	}
	return nil, ListAgentsOutput{Agents: out, Count: len(out)}, nil
}

func (s *Server) agents(ctx context.Context, capability string, alive bool, limit int) ([]AgentView, error) {
	f := core.AgentFilter{Capability: capability, Limit: limit}
	if alive {
		f.AliveAt = s.relay.Clock().Now()
	}
	list, err := s.relay.Store().ListAgents(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]AgentView, 0, len(list))
	for _, a := range list {
		out = append(out, agentView(s.relay, a, false))
	}
	return out, nil
}

// AgentIDInput names an agent.
type AgentIDInput struct {
	AgentID string `json:"agent_id" jsonschema:"the agent's id (or its agent:// URI)"`
}

func (s *Server) getAgentCard(ctx context.Context, req *sdk.CallToolRequest, in AgentIDInput) (*sdk.CallToolResult, AgentView, error) {
	id, err := s.agentID(in.AgentID)
	if err != nil {
		return nil, AgentView{}, err
	}
	a, err := s.relay.Store().GetAgent(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, AgentView{}, fmt.Errorf("agent %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, AgentView{}, err
	}
	return nil, agentView(s.relay, a, true), nil
}

// agentID accepts an agent id or an agent:// URI on this hub.
func (s *Server) agentID(v string) (string, error) {
	v = strings.TrimSpace(v)
	if rest, ok := strings.CutPrefix(v, "agent://"); ok {
		host, id, found := strings.Cut(rest, "/")
		if !found || host != s.relay.Config().Host {
			return "", fmt.Errorf("%w: %q is not an agent of this hub (agent://%s/…)", ErrInvalid, v, s.relay.Config().Host)
		}
		v = id
	}
	if !core.ValidAgentID(v) {
		return "", fmt.Errorf("%w: %q is not a valid agent id", ErrInvalid, v)
	}
	return v, nil
}

// SendMessageInput is send_message's input.
type SendMessageInput struct {
	To             string         `json:"to" jsonschema:"the receiving agent's id (or agent:// URI)"`
	Text           string         `json:"text,omitempty" jsonschema:"the message text (one text part)"`
	Parts          []Part         `json:"parts,omitempty" jsonschema:"multimodal content parts, after the text if both are given"`
	Type           string         `json:"type,omitempty" jsonschema:"the message type (default task)"`
	ConversationID string         `json:"conversation_id,omitempty" jsonschema:"the conversation the message belongs to"`
	CorrelationID  string         `json:"correlation_id,omitempty" jsonschema:"the id of a message this one answers"`
	TTLMs          int64          `json:"ttl_ms,omitempty" jsonschema:"how long the hub keeps trying to deliver, in milliseconds (default: the hub's)"`
	MessageID      string         `json:"message_id,omitempty" jsonschema:"an idempotency key: resending the same id returns the first outcome"`
	Metadata       map[string]any `json:"metadata,omitempty"`
}

// SendMessageOutput is send_message's output.
type SendMessageOutput struct {
	MessageID      string      `json:"message_id" jsonschema:"pass it to wait_for_reply or get_receipt"`
	Status         string      `json:"status"`
	Sender         string      `json:"sender" jsonschema:"your agent id on the hub"`
	Receiver       string      `json:"receiver"`
	ConversationID string      `json:"conversation_id,omitempty"`
	Duplicate      bool        `json:"duplicate,omitempty" jsonschema:"the message id was sent before; this is the first outcome"`
	Receipt        ReceiptView `json:"receipt"`
}

func (s *Server) sendMessage(ctx context.Context, req *sdk.CallToolRequest, in SendMessageInput) (*sdk.CallToolResult, SendMessageOutput, error) {
	c := s.callerOf(req.Extra)
	m, err := s.toMessage(c, in)
	if err != nil {
		return nil, SendMessageOutput{}, err
	}
	recv, err := s.relay.Store().GetAgent(ctx, m.Receiver)
	if errors.Is(err, core.ErrNotFound) {
		return nil, SendMessageOutput{}, fmt.Errorf("receiver %q is not registered on this hub (status unreachable): %w", m.Receiver, ErrNotFound)
	}
	if err != nil {
		return nil, SendMessageOutput{}, err
	}
	if err := core.CheckAccess(recv, s.relay.URI(c.agentID), c.authenticated || c.admin); err != nil {
		return nil, SendMessageOutput{}, err
	}
	if err := s.ensureHost(ctx, c); err != nil {
		return nil, SendMessageOutput{}, err
	}
	res, err := s.relay.Send(ctx, m)
	if err != nil {
		return nil, SendMessageOutput{}, err
	}
	rc := res.Receipt
	out := SendMessageOutput{MessageID: m.ID, Status: string(rc.Status), Sender: m.Sender, Receiver: m.Receiver,
		ConversationID: m.ConversationID, Duplicate: res.Duplicate, Receipt: receiptView(&rc)}
	text := fmt.Sprintf("Message %s to %s: %s. Call wait_for_reply with message_id %q for the answer.", m.ID, m.Receiver, rc.Status, m.ID)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, out, nil
}

// toMessage validates send_message's input and builds the core message.
func (s *Server) toMessage(c caller, in SendMessageInput) (*core.Message, error) {
	to, err := s.agentID(in.To)
	if err != nil {
		return nil, err
	}
	parts, err := ToParts(in.Text, in.Parts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if in.TTLMs < 0 {
		return nil, fmt.Errorf("%w: ttl_ms must be positive", ErrInvalid)
	}
	if max := s.relay.Config().MaxTTL; time.Duration(in.TTLMs)*time.Millisecond > max || in.TTLMs > max.Milliseconds() {
		return nil, fmt.Errorf("%w: ttl_ms must be at most %d", ErrInvalid, max.Milliseconds())
	}
	if len(in.MessageID) > 200 {
		return nil, fmt.Errorf("%w: message_id is longer than 200 characters", ErrInvalid)
	}
	id := in.MessageID
	if id == "" {
		id = core.NewID()
	}
	typ := strings.TrimSpace(in.Type)
	if typ == "" {
		typ = "task"
	}
	return &core.Message{ID: id, Sender: c.agentID, Receiver: to, Type: typ, ConversationID: in.ConversationID,
		CorrelationID: in.CorrelationID, Parts: parts, Metadata: in.Metadata, Protocol: Protocol,
		TTL: time.Duration(in.TTLMs) * time.Millisecond}, nil
}

// MessageIDInput names a message.
type MessageIDInput struct {
	MessageID string `json:"message_id" jsonschema:"the message's id"`
}

func (s *Server) getReceipt(ctx context.Context, req *sdk.CallToolRequest, in MessageIDInput) (*sdk.CallToolResult, ReceiptView, error) {
	rc, err := s.readableReceipt(ctx, s.callerOf(req.Extra), in.MessageID)
	if err != nil {
		return nil, ReceiptView{}, err
	}
	return nil, receiptView(rc), nil
}

// readableReceipt returns a receipt the caller may read: its sender's or
// receiver's, or any for admin callers.
func (s *Server) readableReceipt(ctx context.Context, c caller, id string) (*core.Receipt, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: message_id is required", ErrInvalid)
	}
	rc, err := s.relay.Receipt(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, fmt.Errorf("message %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if !c.admin && rc.Sender != c.agentID && rc.Receiver != c.agentID {
		return nil, fmt.Errorf("message %q is neither from nor to %q: %w", id, c.agentID, ErrForbidden)
	}
	return rc, nil
}

// WaitInput is wait_for_reply's input.
type WaitInput struct {
	MessageID string `json:"message_id,omitempty" jsonschema:"the id of a message you sent; without it, wait for the next message addressed to you"`
	TimeoutMs int64  `json:"timeout_ms,omitempty" jsonschema:"how long to wait in milliseconds (default 30000)"`
}

// Outcomes of wait_for_reply.
const (
	OutcomeReply         = "reply"         // a reply (or, without message_id, a message) arrived
	OutcomeTimeout       = "timeout"       // nothing arrived within timeout_ms; call again to keep waiting
	OutcomeUndeliverable = "undeliverable" // the message ended rejected, timeout or expired: no reply will come
)

// WaitOutput is wait_for_reply's output.
type WaitOutput struct {
	Outcome  string       `json:"outcome" jsonschema:"reply, timeout (call again to keep waiting) or undeliverable"`
	Reply    *MessageView `json:"reply,omitempty" jsonschema:"the message that arrived"`
	Receipt  *ReceiptView `json:"receipt,omitempty" jsonschema:"the receipt of the message waited on"`
	WaitedMs int64        `json:"waited_ms"`
}

func (s *Server) waitForReply(ctx context.Context, req *sdk.CallToolRequest, in WaitInput) (*sdk.CallToolResult, WaitOutput, error) {
	c := s.callerOf(req.Extra)
	if in.TimeoutMs < 0 {
		return nil, WaitOutput{}, fmt.Errorf("%w: timeout_ms must not be negative", ErrInvalid)
	}
	timeout := time.Duration(in.TimeoutMs) * time.Millisecond
	if in.TimeoutMs == 0 {
		timeout = s.opt.DefaultWait
	}
	if timeout > s.opt.MaxWait || in.TimeoutMs > s.opt.MaxWait.Milliseconds() {
		timeout = s.opt.MaxWait
	}
	var w waiter
	if in.MessageID != "" {
		rc, err := s.readableReceipt(ctx, c, in.MessageID)
		if err != nil {
			return nil, WaitOutput{}, err
		}
		w = &resultWaiter{s: s, c: c, id: rc.MessageID}
	} else {
		if err := s.ensureHost(ctx, c); err != nil {
			return nil, WaitOutput{}, err
		}
		w = &queueWaiter{s: s, c: c}
	}
	start := time.Now()
	out, err := s.wait(ctx, req, w, timeout)
	if err != nil {
		return nil, WaitOutput{}, err
	}
	out.WaitedMs = time.Since(start).Milliseconds()
	res := &sdk.CallToolResult{}
	switch {
	case out.Reply != nil:
		m := out.reply
		head := fmt.Sprintf("Message %s from %s (type %s):", m.ID, m.Sender, m.Type)
		res.Content = append([]sdk.Content{&sdk.TextContent{Text: head}}, Contents(m.Parts)...)
	case out.Outcome == OutcomeUndeliverable:
		res.Content = []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("Message %s ended %s: no reply will come (%s).",
			out.Receipt.MessageID, out.Receipt.Status, out.Receipt.LastError)}}
	default:
		res.Content = []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("No reply after %d ms; call wait_for_reply again to keep waiting.", out.WaitedMs)}}
	}
	return res, out.WaitOutput, nil
}

// waitResult is a wait's outcome and the message behind it.
type waitResult struct {
	WaitOutput
	reply *core.Message
}

// waiter is one kind of wait: poll checks whether it is over.
type waiter interface {
	// poll returns a result when the wait is over, nil otherwise.
	poll(ctx context.Context) (*waitResult, error)
	// wakes reports whether an event may end the wait.
	wakes(e core.Event) bool
	// describe is the progress message.
	describe() string
}

// wait polls w whenever a relevant relay event arrives (and at least every
// ProgressEvery), sending a progress notification each interval when the
// request asked for progress, until w is done, timeout passes or the
// request is cancelled.
func (s *Server) wait(ctx context.Context, req *sdk.CallToolRequest, w waiter, timeout time.Duration) (*waitResult, error) {
	events, stop := s.relay.Events().Subscribe(64)
	defer stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(s.opt.ProgressEvery)
	defer tick.Stop()
	token := req.Params.GetProgressToken()
	start := time.Now()
	for {
		r, err := w.poll(ctx)
		if err != nil || r != nil {
			return r, err
		}
	idle:
		for {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-deadline.C:
				return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeTimeout}}, nil
			case e := <-events:
				if w.wakes(e) {
					break idle
				}
			case <-tick.C:
				if token != nil && req.Session != nil {
					el := time.Since(start)
					_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token,
						Progress: el.Seconds(), Total: timeout.Seconds(),
						Message: fmt.Sprintf("%s (%.0fs of %.0fs)", w.describe(), el.Seconds(), timeout.Seconds())})
				}
				break idle
			}
		}
	}
}

// resultWaiter waits for a message correlated to id.
type resultWaiter struct {
	s  *Server
	c  caller
	id string
}

func (w *resultWaiter) poll(ctx context.Context) (*waitResult, error) {
	ms, err := w.s.relay.Store().Results(ctx, w.id, 1)
	if err != nil {
		return nil, err
	}
	rc, err := w.s.relay.Receipt(ctx, w.id)
	if err != nil {
		return nil, err
	}
	rv := receiptView(rc)
	if len(ms) > 0 {
		m := ms[0]
		if m.Receiver == w.c.agentID {
			// The reply is in the host's queue: it is delivered now.
			if _, err := w.s.relay.Ack(ctx, w.c.agentID, []string{m.ID}); err != nil {
				return nil, err
			}
		}
		mv := messageView(m)
		return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeReply, Reply: &mv, Receipt: &rv}, reply: m}, nil
	}
	if rc.Status.Terminal() && rc.Status != core.StatusDelivered {
		return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeUndeliverable, Receipt: &rv}}, nil
	}
	return nil, nil
}

func (w *resultWaiter) wakes(e core.Event) bool {
	return e.CorrelationID == w.id || e.MessageID == w.id
}

func (w *resultWaiter) describe() string { return "waiting for the reply to " + w.id }

// queueWaiter waits for the next message queued for the host agent.
type queueWaiter struct {
	s *Server
	c caller
}

func (w *queueWaiter) poll(ctx context.Context) (*waitResult, error) {
	ms, err := w.s.relay.Pull(ctx, w.c.agentID, 1, 0, true)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	m := ms[0]
	mv := messageView(m)
	return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeReply, Reply: &mv}, reply: m}, nil
}

func (w *queueWaiter) wakes(e core.Event) bool {
	return e.Receiver == w.c.agentID && (e.Type == core.EventAccepted || e.Type == core.EventReplayed)
}

func (w *queueWaiter) describe() string { return "waiting for a message to " + w.c.agentID }

// ListConversationsInput is list_conversations' input.
type ListConversationsInput struct {
	AgentID string `json:"agent_id,omitempty" jsonschema:"whose conversations (default: yours; another agent's or * for all needs operator rights)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 500)"`
}

// ListConversationsOutput is list_conversations' output.
type ListConversationsOutput struct {
	Conversations []ConversationView `json:"conversations"`
}

func (s *Server) listConversations(ctx context.Context, req *sdk.CallToolRequest, in ListConversationsInput) (*sdk.CallToolResult, ListConversationsOutput, error) {
	c := s.callerOf(req.Extra)
	limit, err := limitOf(in.Limit, 50, 500)
	if err != nil {
		return nil, ListConversationsOutput{}, err
	}
	who := c.agentID
	switch {
	case in.AgentID == "*" && c.admin:
		who = ""
	case in.AgentID == "" || in.AgentID == c.agentID:
	case c.admin:
		if who, err = s.agentID(in.AgentID); err != nil {
			return nil, ListConversationsOutput{}, err
		}
	default:
		return nil, ListConversationsOutput{}, fmt.Errorf("listing another agent's conversations needs operator rights: %w", ErrForbidden)
	}
	cs, err := s.relay.Store().ListConversations(ctx, who, limit)
	if err != nil {
		return nil, ListConversationsOutput{}, err
	}
	out := ListConversationsOutput{Conversations: make([]ConversationView, 0, len(cs))}
	for _, cv := range cs {
		out.Conversations = append(out.Conversations, conversationView(cv))
	}
	return nil, out, nil
}

// GetConversationInput is get_conversation's input.
type GetConversationInput struct {
	ConversationID string `json:"conversation_id"`
	AfterSeq       int64  `json:"after_seq,omitempty" jsonschema:"only messages after this sequence number (for paging)"`
	Limit          int    `json:"limit,omitempty" jsonschema:"at most this many messages (default 100, at most 1000)"`
}

// ConversationOutput is a conversation with its messages.
type ConversationOutput struct {
	Conversation ConversationView `json:"conversation"`
	Messages     []MessageView    `json:"messages"`
}

func (s *Server) getConversation(ctx context.Context, req *sdk.CallToolRequest, in GetConversationInput) (*sdk.CallToolResult, ConversationOutput, error) {
	if in.AfterSeq < 0 {
		return nil, ConversationOutput{}, fmt.Errorf("%w: after_seq must not be negative", ErrInvalid)
	}
	limit, err := limitOf(in.Limit, 100, 1000)
	if err != nil {
		return nil, ConversationOutput{}, err
	}
	out, err := s.conversation(ctx, s.callerOf(req.Extra), in.ConversationID, in.AfterSeq, limit)
	return nil, out, err
}

// conversation returns a conversation the caller takes part in (any for
// admin callers) with its messages.
func (s *Server) conversation(ctx context.Context, c caller, id string, after int64, limit int) (ConversationOutput, error) {
	if id == "" {
		return ConversationOutput{}, fmt.Errorf("%w: conversation_id is required", ErrInvalid)
	}
	cv, err := s.relay.Store().GetConversation(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return ConversationOutput{}, fmt.Errorf("conversation %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return ConversationOutput{}, err
	}
	if !c.admin && !participant(cv, c.agentID) {
		return ConversationOutput{}, fmt.Errorf("%q does not take part in conversation %q: %w", c.agentID, id, ErrForbidden)
	}
	ms, err := s.relay.Store().ConversationMessages(ctx, id, after, limit)
	if err != nil {
		return ConversationOutput{}, err
	}
	out := ConversationOutput{Conversation: conversationView(cv), Messages: make([]MessageView, 0, len(ms))}
	for _, m := range ms {
		out.Messages = append(out.Messages, messageView(m))
	}
	return out, nil
}

func participant(c *core.Conversation, agentID string) bool {
	for _, p := range c.Participants {
		if p.AgentID == agentID {
			return true
		}
	}
	return false
}
