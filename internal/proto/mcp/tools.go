package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func ptr[T any](v T) *T { return &v }

func (s *Server) addTools() {
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	tool(s, &sdk.Tool{Name: "list_agents", Title: "List agents",
		Description: "List the agents registered on the hub, optionally only those offering a capability or only those online.",
		Annotations: ro}, s.listAgents)
	tool(s, &sdk.Tool{Name: "get_agent_card", Title: "Get an agent's card",
		Description: "Get one agent's card: what it is, what it accepts, how it is reached.",
		Annotations: ro}, s.getAgentCard)
	tool(s, &sdk.Tool{Name: "send_message", Title: "Send a message",
		Description: "Send a message (text or multimodal parts) to any agent on the hub, whatever protocol it speaks. " +
			"Returns at once with the message id and its receipt; use wait_for_reply with that id for the agent's answer.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)}}, s.sendMessage)
	tool(s, &sdk.Tool{Name: "reply", Title: "Reply to a message",
		Description: "Answer a message you received (a channel event's message_id, or one from check_inbox or wait_for_reply): " +
			"the answer goes to its sender, in its conversation, correlated to it.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)}}, s.reply)
	tool(s, &sdk.Tool{Name: "get_receipt", Title: "Get a message's receipt",
		Description: "Get the delivery receipt of a message: queued, delivered, rejected, timeout or expired, with its history.",
		Annotations: ro}, s.getReceipt)
	tool(s, &sdk.Tool{Name: "wait_for_reply", Title: "Wait for a reply",
		Description: "Wait for the answer to a message you sent — a message whose correlation_id is its id, or the answer " +
			"the receiver gave when the message was delivered — or, without message_id, for the next message addressed to you. " +
			"Reports progress while waiting.",
		Annotations: ro}, s.waitForReply)
	tool(s, &sdk.Tool{Name: "list_conversations", Title: "List conversations",
		Description: "List the conversations you take part in, most recent first.",
		Annotations: ro}, s.listConversations)
	tool(s, &sdk.Tool{Name: "get_conversation", Title: "Get a conversation",
		Description: "Get a conversation you take part in and its messages in order.",
		Annotations: ro}, s.getConversation)
	tool(s, &sdk.Tool{Name: "check_inbox", Title: "Check your inbox",
		Description: "Get the messages addressed to you that you have not read yet, oldest first, optionally waiting for one. " +
			"They count as read unless ack is false; then acknowledge them with ack_messages once handled, or they come back.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}}, s.checkInbox)
	tool(s, &sdk.Tool{Name: "ack_messages", Title: "Acknowledge messages",
		Description: "Acknowledge messages that check_inbox returned with ack false: they will not come back.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)}}, s.ackMessages)
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
		return 0, invalid("limit must not be negative")
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
	out, err := s.agents(ctx, s.callerOf(req.Extra), in.Capability, in.Alive, limit)
	if err != nil {
		return nil, ListAgentsOutput{}, err
	}
	return nil, ListAgentsOutput{Agents: out, Count: len(out)}, nil
}

// agents lists the agents c may see (hidden ones only to the operator).
func (s *Server) agents(ctx context.Context, c caller, capability string, alive bool, limit int) ([]AgentView, error) {
	f := core.AgentFilter{Capability: capability, Limit: limit}
	if alive {
		f.AliveAt = s.relay.Clock().Now()
	}
	list, err := s.relay.ListAgents(ctx, c.p, f)
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
	a, err := s.relay.LookupAgent(ctx, s.callerOf(req.Extra).p, id)
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
			return "", invalid("%q is not an agent of this hub (agent://%s/…)", v, s.relay.Config().Host)
		}
		v = id
	}
	if !core.ValidAgentID(v) {
		return "", invalid("%q is not a valid agent id", v)
	}
	return v, nil
}

// hasScheme reports whether v is a URI (agent://…) rather than an id.
func hasScheme(v string) bool { return strings.Contains(v, "://") }

// SendMessageInput is send_message's input.
type SendMessageInput struct {
	To             string         `json:"to" jsonschema:"the receiving agent's id (or agent:// URI)"`
	Text           string         `json:"text,omitempty" jsonschema:"the message text (one text part)"`
	Parts          []Part         `json:"parts,omitempty" jsonschema:"multimodal content parts, after the text if both are given"`
	Type           string         `json:"type,omitempty" jsonschema:"the message type (default task)"`
	ConversationID string         `json:"conversation_id,omitempty" jsonschema:"the conversation the message belongs to"`
	CorrelationID  string         `json:"correlation_id,omitempty" jsonschema:"the id of a message you received that this one answers"`
	TTLMs          int64          `json:"ttl_ms,omitempty" jsonschema:"how long the hub keeps trying to deliver, in milliseconds (default: the hub's)"`
	MessageID      string         `json:"message_id,omitempty" jsonschema:"an idempotency key: resending the same id returns the first outcome"`
	Metadata       map[string]any `json:"metadata,omitempty" jsonschema:"metadata carried with the message"`
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
	to, err := s.agentID(in.To)
	if err != nil {
		return nil, SendMessageOutput{}, err
	}
	out, err := s.send(ctx, s.callerOf(req.Extra), to, in)
	if err != nil {
		return nil, SendMessageOutput{}, err
	}
	text := fmt.Sprintf("Message %s to %s: %s. Call wait_for_reply with message_id %q for the answer.", out.MessageID, out.Receiver, out.Status, out.MessageID)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, out, nil
}

// send sends in to agent to for c: the core decides whether c may send as
// its agent, to the receiver, in the conversation and as an answer.
func (s *Server) send(ctx context.Context, c caller, to string, in SendMessageInput) (SendMessageOutput, error) {
	m, err := s.toMessage(c, to, in)
	if err != nil {
		return SendMessageOutput{}, err
	}
	if err := s.ensureHost(ctx, c); err != nil {
		return SendMessageOutput{}, err
	}
	res, err := s.relay.SendAs(ctx, c.p, m)
	if err != nil {
		return SendMessageOutput{}, err
	}
	rc := res.Receipt
	return SendMessageOutput{MessageID: m.ID, Status: string(rc.Status), Sender: m.Sender, Receiver: m.Receiver,
		ConversationID: m.ConversationID, Duplicate: res.Duplicate, Receipt: receiptView(&rc)}, nil
}

// toMessage validates send_message's input and builds the core message.
func (s *Server) toMessage(c caller, to string, in SendMessageInput) (*core.Message, error) {
	parts, err := ToParts(in.Text, in.Parts)
	if err != nil {
		return nil, invalid("%v", err)
	}
	if in.TTLMs < 0 {
		return nil, invalid("ttl_ms must be positive")
	}
	if max := s.relay.Config().MaxTTL; in.TTLMs > max.Milliseconds() {
		return nil, invalid("ttl_ms must be at most %d", max.Milliseconds())
	}
	if len(in.MessageID) > 200 {
		return nil, invalid("message_id is longer than 200 characters")
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
	if in.MessageID == "" {
		return nil, ReceiptView{}, invalid("message_id is required")
	}
	rc, err := s.relay.ReceiptFor(ctx, s.callerOf(req.Extra).p, in.MessageID)
	if err != nil {
		return nil, ReceiptView{}, err
	}
	return nil, receiptView(rc), nil
}

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
	switch in.AgentID {
	case "":
	case "*":
		who = ""
	default:
		if who, err = s.agentID(in.AgentID); err != nil {
			return nil, ListConversationsOutput{}, err
		}
	}
	list, err := s.conversations(ctx, c, who, limit)
	return nil, ListConversationsOutput{Conversations: list}, err
}

// conversations lists agent's conversations (all for ""), as the core
// lets c see them.
func (s *Server) conversations(ctx context.Context, c caller, agent string, limit int) ([]ConversationView, error) {
	cs, err := s.relay.Conversations(ctx, c.p, agent, limit)
	if err != nil {
		return nil, err
	}
	out := make([]ConversationView, 0, len(cs))
	for _, cv := range cs {
		out = append(out, conversationView(cv))
	}
	return out, nil
}

// GetConversationInput is get_conversation's input.
type GetConversationInput struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation's id"`
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
		return nil, ConversationOutput{}, invalid("after_seq must not be negative")
	}
	limit, err := limitOf(in.Limit, 100, 1000)
	if err != nil {
		return nil, ConversationOutput{}, err
	}
	out, err := s.conversation(ctx, s.callerOf(req.Extra), in.ConversationID, in.AfterSeq, limit)
	return nil, out, err
}

// conversation returns a conversation with its messages when c is a
// member (or the operator); the core answers a non-member as it answers
// an unknown conversation.
func (s *Server) conversation(ctx context.Context, c caller, id string, after int64, limit int) (ConversationOutput, error) {
	if id == "" {
		return ConversationOutput{}, invalid("conversation_id is required")
	}
	cv, err := s.relay.Conversation(ctx, c.p, id)
	if err != nil {
		return ConversationOutput{}, err
	}
	ms, err := s.relay.ConversationMessages(ctx, c.p, id, after, limit)
	if err != nil {
		return ConversationOutput{}, err
	}
	out := ConversationOutput{Conversation: conversationView(cv), Messages: make([]MessageView, 0, len(ms))}
	for _, m := range ms {
		out.Messages = append(out.Messages, messageView(m))
	}
	return out, nil
}

// ReplyInput is reply's input.
type ReplyInput struct {
	MessageID string `json:"message_id" jsonschema:"the id of the message you answer"`
	Text      string `json:"text,omitempty" jsonschema:"the answer's text"`
	Parts     []Part `json:"parts,omitempty" jsonschema:"multimodal content parts, after the text if both are given"`
	Type      string `json:"type,omitempty" jsonschema:"the answer's type (default task.result)"`
}

func (s *Server) reply(ctx context.Context, req *sdk.CallToolRequest, in ReplyInput) (*sdk.CallToolResult, SendMessageOutput, error) {
	if in.MessageID == "" {
		return nil, SendMessageOutput{}, invalid("message_id is required")
	}
	c := s.callerOf(req.Extra)
	m, err := s.relay.MessageFor(ctx, c.p, in.MessageID)
	if err != nil {
		return nil, SendMessageOutput{}, err
	}
	if m.Receiver != c.agentID {
		return nil, SendMessageOutput{}, invalid("message %q was sent to %s, not to you (%s): reply answers messages you received", m.ID, m.Receiver, c.agentID)
	}
	typ := in.Type
	if typ == "" {
		typ = "task.result"
	}
	out, err := s.send(ctx, c, m.Sender, SendMessageInput{Text: in.Text, Parts: in.Parts, Type: typ,
		ConversationID: m.ConversationID, CorrelationID: m.ID})
	if err != nil {
		return nil, SendMessageOutput{}, err
	}
	text := fmt.Sprintf("Answer %s sent to %s (%s).", out.MessageID, out.Receiver, out.Status)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, out, nil
}
