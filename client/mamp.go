package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MAMPPart is one part of MAMP content as JSON, for example
// {"type":"text","text":"hi"}. Build parts with MAMPText, MAMPCode,
// MAMPImage and MAMPFile, or write them by hand.
type MAMPPart = json.RawMessage

// mampProtocol is the MAMP version this client speaks.
const mampProtocol = "mamp/1.0"

// mampSource is where an image or file part's bytes are: inline, base64.
type mampSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data"`
}

// mampWirePart is a part in MAMP 1.0's content array.
type mampWirePart struct {
	Type     string      `json:"type"`
	Text     *string     `json:"text,omitempty"`
	Code     *string     `json:"code,omitempty"`
	Language string      `json:"language,omitempty"`
	Name     string      `json:"name,omitempty"`
	MimeType string      `json:"mime_type,omitempty"`
	Source   *mampSource `json:"source,omitempty"`
}

func mustPart(w mampWirePart) MAMPPart {
	b, err := json.Marshal(w)
	if err != nil {
		panic(err) // text and code parts always encode
	}
	return b
}

// MAMPText returns a text part.
func MAMPText(text string) MAMPPart { return mustPart(mampWirePart{Type: "text", Text: &text}) }

// MAMPCode returns a code part.
func MAMPCode(language, code string) MAMPPart {
	return mustPart(mampWirePart{Type: "code", Code: &code, Language: language})
}

// maxMAMPFile bounds the files MAMPImage and MAMPFile read (the hub's
// request limit applies as well).
const maxMAMPFile = 32 << 20

func readPartFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	case st.Size() > maxMAMPFile:
		return nil, fmt.Errorf("%s is %d bytes, more than %d", path, st.Size(), maxMAMPFile)
	case st.Size() == 0:
		return nil, fmt.Errorf("%s is empty", path)
	}
	return os.ReadFile(path)
}

// MAMPImage reads an image file into a base64 image part; its media type
// is recognised from the bytes and a file that is not an image is refused.
func MAMPImage(path string) (MAMPPart, error) {
	b, err := readPartFile(path)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(http.DetectContentType(b))
	if !strings.HasPrefix(mt, "image/") {
		return nil, fmt.Errorf("%s is %s, not a recognised image", path, mt)
	}
	return mustPart(mampWirePart{Type: "image", Name: filepath.Base(path),
		Source: &mampSource{Type: "base64", MediaType: mt, Data: base64.StdEncoding.EncodeToString(b)}}), nil
}

// MAMPFile reads a file into a base64 file part; its media type comes
// from the file name, else from the bytes. (The hub refuses a name that
// contradicts the bytes, report.pdf holding a PNG.)
func MAMPFile(path string) (MAMPPart, error) {
	b, err := readPartFile(path)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(mime.TypeByExtension(filepath.Ext(path)))
	if mt == "" {
		mt, _, _ = mime.ParseMediaType(http.DetectContentType(b))
	}
	return mustPart(mampWirePart{Type: "file", Name: filepath.Base(path), MimeType: mt,
		Source: &mampSource{Type: "base64", Data: base64.StdEncoding.EncodeToString(b)}}), nil
}

// mampEnvelope is a MAMP 1.0 message as POST /mamp/v1/messages takes it.
type mampEnvelope struct {
	Protocol       string          `json:"protocol"`
	MessageID      string          `json:"message_id"`
	ConversationID string          `json:"conversation_id,omitempty"`
	From           string          `json:"from"`
	To             string          `json:"to"`
	Content        json.RawMessage `json:"content"`
	Metadata       map[string]any  `json:"metadata"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	CallbackURL    string          `json:"callback_url,omitempty"`
	TTLMs          int64           `json:"ttl_ms,omitempty"`
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
	meta["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
	if m.TraceID != "" {
		meta["trace_id"] = m.TraceID
	}
	var content any = m.Content
	if len(m.Content) == 0 {
		content = m.Text
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("encode content: %w", err)
	}
	env := mampEnvelope{Protocol: mampProtocol, MessageID: m.MessageID, ConversationID: m.ConversationID, From: m.From, To: m.To,
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
