package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/proto/mamp"
)

// MAMPPart is one part of MAMP content as JSON, for example
// {"type":"text","text":"hi"}. Build parts with MAMPText, MAMPCode,
// MAMPImage and MAMPFile, or write them by hand.
type MAMPPart = json.RawMessage

// MAMPText returns a text part.
func MAMPText(text string) MAMPPart { return mustPart(mamp.TextPart(text)) }

// MAMPCode returns a code part.
func MAMPCode(language, code string) MAMPPart { return mustPart(mamp.CodePart(language, code)) }

// MAMPImage reads an image file into a base64 image part; its media type
// is recognised from the bytes and a file that is not an image is refused.
func MAMPImage(path string) (MAMPPart, error) {
	p, err := mamp.ImagePart(path)
	if err != nil {
		return nil, err
	}
	return encodePart(p)
}

// MAMPFile reads a file into a base64 file part; its media type comes
// from the file name, checked against the bytes.
func MAMPFile(path string) (MAMPPart, error) {
	p, err := mamp.FilePart(path)
	if err != nil {
		return nil, err
	}
	return encodePart(p)
}

func encodePart(p core.Part) (MAMPPart, error) {
	b, err := mamp.EncodeContent([]core.Part{p})
	if err != nil {
		return nil, err
	}
	var one []json.RawMessage
	if err := json.Unmarshal(b, &one); err != nil || len(one) != 1 {
		return nil, fmt.Errorf("encode part: %v", err)
	}
	return one[0], nil
}

func mustPart(p core.Part) MAMPPart {
	b, err := encodePart(p)
	if err != nil {
		panic(err) // text and code parts always encode
	}
	return b
}

// MAMPMessage is a message sent with POST /mamp/v1/messages.
type MAMPMessage struct {
	// MessageID is generated when empty.
	MessageID string
	// From and To are agent://domain/id URIs.
	From, To string
	// ConversationID continues a conversation; empty starts a new one.
	ConversationID string
	// Content is the parts; Text is a shorthand used when Content is empty.
	Content []MAMPPart
	Text    string
	// TraceID is the sender's own trace id for the conversation.
	TraceID string
	// CorrelationID marks this message as the answer to another.
	CorrelationID string
	// CallbackURL receives answers to this message.
	CallbackURL string
	// TTL bounds how long the hub tries to deliver (the hub's default if 0).
	TTL time.Duration
	// Metadata is sent beside the timestamp.
	Metadata map[string]any
}

// MAMPAck is the hub's answer to a MAMP message.
type MAMPAck struct {
	ConversationID string `json:"conversation_id"`
	MessageID      string `json:"message_id"`
	Status         string `json:"status"`
	Delivery       string `json:"delivery,omitempty"`
	Duplicate      bool   `json:"duplicate,omitempty"`
}

// SendMAMP sends a MAMP message through the hub. The answer's
// ConversationID continues the conversation.
func (c *Client) SendMAMP(ctx context.Context, m MAMPMessage) (*MAMPAck, error) {
	if m.MessageID == "" {
		m.MessageID = NewID()
	}
	meta := map[string]any{}
	for k, v := range m.Metadata {
		meta[k] = v
	}
	meta[mamp.MetaTimestamp] = time.Now().UTC().Format(time.RFC3339Nano)
	if m.TraceID != "" {
		meta[mamp.MetaTraceID] = m.TraceID
	}
	var content any = m.Content
	if len(m.Content) == 0 {
		content = m.Text
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("encode content: %w", err)
	}
	env := mamp.Envelope{Protocol: mamp.Protocol, MessageID: m.MessageID, ConversationID: m.ConversationID, From: m.From, To: m.To,
		Content: raw, Metadata: meta, CorrelationID: m.CorrelationID, CallbackURL: m.CallbackURL, TTLMs: m.TTL.Milliseconds()}
	var ack MAMPAck
	if err := c.do(ctx, "POST", "/mamp/v1/messages", env, &ack); err != nil {
		return nil, err
	}
	return &ack, nil
}

// SendToAgent is the MAMP send_to_agent call: it sends content (a string,
// or parts) from one agent URI to another, in conversationID or in a new
// conversation when it is empty, and returns the conversation id to
// continue with.
func (c *Client) SendToAgent(ctx context.Context, from, target string, content any, conversationID string) (*MAMPAck, error) {
	m := MAMPMessage{From: from, To: target, ConversationID: conversationID}
	switch v := content.(type) {
	case string:
		m.Text = v
	case []MAMPPart:
		m.Content = v
	case MAMPPart:
		m.Content = []MAMPPart{v}
	default:
		return nil, fmt.Errorf("content must be a string or MAMP parts, not %T", content)
	}
	return c.SendMAMP(ctx, m)
}

// MAMPConversation returns a conversation as GET
// /mamp/v1/conversations/{id} shows it: its times, participants with their
// trace ids, and its messages as MAMP envelopes.
func (c *Client) MAMPConversation(ctx context.Context, conversationID string) (json.RawMessage, error) {
	var out json.RawMessage
	if err := c.do(ctx, "GET", "/mamp/v1/conversations/"+url.PathEscape(conversationID), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
