package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Part is a content part as MCP tools take and return it: the canonical
// part with binary content in base64 and structured content as any JSON.
type Part struct {
	Kind        string         `json:"kind" jsonschema:"text, image, file, code or data"`
	Text        string         `json:"text,omitempty" jsonschema:"the text (text and code parts)"`
	Language    string         `json:"language,omitempty" jsonschema:"the programming language (code parts)"`
	MediaType   string         `json:"media_type,omitempty" jsonschema:"the MIME type (image and file parts)"`
	Name        string         `json:"name,omitempty" jsonschema:"a file name (image and file parts)"`
	URL         string         `json:"url,omitempty" jsonschema:"where the content is (image and file parts given by reference)"`
	BytesBase64 string         `json:"bytes_base64,omitempty" jsonschema:"the content in base64 (image and file parts given inline)"`
	Data        any            `json:"data,omitempty" jsonschema:"any JSON value (data parts)"`
	Meta        map[string]any `json:"meta,omitempty" jsonschema:"protocol-specific part metadata"`
}

// ErrBadPart reports a part that cannot become a canonical part.
var ErrBadPart = errors.New("invalid part")

// maxParts bounds the parts of one message.
const maxParts = 256

// ToParts converts an optional text and MCP parts to canonical parts,
// checking each part's fields for its kind.
func ToParts(text string, in []Part) ([]core.Part, error) {
	if len(in) > maxParts {
		return nil, fmt.Errorf("%w: %d parts, at most %d", ErrBadPart, len(in), maxParts)
	}
	var out []core.Part
	if text != "" {
		out = append(out, core.Part{Kind: core.PartText, Text: text})
	}
	for i, p := range in {
		cp, err := toPart(p)
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out = append(out, cp)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: give text or at least one part", ErrBadPart)
	}
	return out, nil
}

func toPart(p Part) (core.Part, error) {
	cp := core.Part{Kind: core.PartKind(p.Kind), Text: p.Text, Language: p.Language, MediaType: p.MediaType,
		Name: p.Name, URL: p.URL, Meta: p.Meta}
	switch cp.Kind {
	case core.PartText, core.PartCode:
		if p.URL != "" || p.BytesBase64 != "" || p.Data != nil {
			return core.Part{}, fmt.Errorf("%w: a %s part has only text (and language)", ErrBadPart, p.Kind)
		}
	case core.PartImage, core.PartFile:
		if (p.URL == "") == (p.BytesBase64 == "") {
			return core.Part{}, fmt.Errorf("%w: an %s part needs exactly one of url and bytes_base64", ErrBadPart, p.Kind)
		}
		if p.URL != "" {
			u, err := url.Parse(p.URL)
			if err != nil || u.Scheme == "" {
				return core.Part{}, fmt.Errorf("%w: url %q is not an absolute URL", ErrBadPart, p.URL)
			}
		}
		if p.BytesBase64 != "" {
			b, err := base64.StdEncoding.DecodeString(p.BytesBase64)
			if err != nil {
				return core.Part{}, fmt.Errorf("%w: bytes_base64: %v", ErrBadPart, err)
			}
			cp.Bytes = b
		}
		if p.Text != "" || p.Data != nil {
			return core.Part{}, fmt.Errorf("%w: an %s part has no text or data", ErrBadPart, p.Kind)
		}
	case core.PartData:
		if p.Data == nil {
			return core.Part{}, fmt.Errorf("%w: a data part needs data", ErrBadPart)
		}
		b, err := json.Marshal(p.Data)
		if err != nil {
			return core.Part{}, fmt.Errorf("%w: data: %v", ErrBadPart, err)
		}
		cp.Data = b
		if p.Text != "" || p.URL != "" || p.BytesBase64 != "" {
			return core.Part{}, fmt.Errorf("%w: a data part has only data", ErrBadPart)
		}
	default:
		return core.Part{}, fmt.Errorf("%w: kind %q (use text, image, file, code or data)", ErrBadPart, p.Kind)
	}
	return cp, nil
}

// FromParts converts canonical parts to MCP parts.
func FromParts(ps []core.Part) []Part {
	out := make([]Part, 0, len(ps))
	for _, p := range ps {
		mp := Part{Kind: string(p.Kind), Text: p.Text, Language: p.Language, MediaType: p.MediaType, Name: p.Name,
			URL: p.URL, Meta: p.Meta}
		if len(p.Bytes) > 0 {
			mp.BytesBase64 = base64.StdEncoding.EncodeToString(p.Bytes)
		}
		if len(p.Data) > 0 {
			var v any
			if json.Unmarshal(p.Data, &v) == nil {
				mp.Data = v
			}
		}
		out = append(out, mp)
	}
	return out
}

// Contents maps canonical parts to MCP content blocks (see the package
// documentation's translation rules).
func Contents(ps []core.Part) []sdk.Content {
	out := make([]sdk.Content, 0, len(ps))
	for _, p := range ps {
		switch p.Kind {
		case core.PartText:
			out = append(out, &sdk.TextContent{Text: p.Text})
		case core.PartCode:
			out = append(out, &sdk.TextContent{Text: "```" + p.Language + "\n" + p.Text + "\n```"})
		case core.PartData:
			var buf bytes.Buffer
			if json.Indent(&buf, p.Data, "", "  ") != nil {
				buf.Reset()
				buf.Write(p.Data)
			}
			out = append(out, &sdk.TextContent{Text: buf.String()})
		case core.PartImage, core.PartFile:
			switch {
			case p.URL != "":
				out = append(out, &sdk.ResourceLink{URI: p.URL, Name: nonEmpty(p.Name, p.URL), MIMEType: p.MediaType})
			case p.Kind == core.PartImage:
				out = append(out, &sdk.ImageContent{Data: p.Bytes, MIMEType: nonEmpty(p.MediaType, "application/octet-stream")})
			default:
				name := nonEmpty(p.Name, "attachment")
				out = append(out, &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
					URI: "switchboard://attachments/" + url.PathEscape(name), MIMEType: p.MediaType, Blob: p.Bytes}})
			}
		}
	}
	return out
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// AgentView is an agent as the tools and resources show it.
type AgentView struct {
	AgentID      string    `json:"agent_id"`
	URI          string    `json:"uri" jsonschema:"the agent's agent:// URI"`
	Name         string    `json:"name,omitempty"`
	Description  string    `json:"description,omitempty"`
	Capabilities []string  `json:"capabilities"`
	Protocol     string    `json:"protocol,omitempty" jsonschema:"the protocol the agent registered with (atp, mamp, a2a, mcp)"`
	Endpoint     string    `json:"endpoint" jsonschema:"how the hub reaches it: atp, mamp, a2a (push) or pull"`
	Alive        bool      `json:"alive" jsonschema:"whether its lease is current"`
	ExpiresAt    time.Time `json:"expires_at"`
	LastSeen     time.Time `json:"last_seen"`
	Card         *CardView `json:"card,omitempty"`
}

// CardView is an agent's card.
type CardView struct {
	Name           string         `json:"name,omitempty"`
	Description    string         `json:"description,omitempty"`
	Version        string         `json:"version,omitempty"`
	Owner          *core.Owner    `json:"owner,omitempty"`
	Device         *core.Device   `json:"device,omitempty"`
	ContentTypes   []string       `json:"content_types,omitempty" jsonschema:"part kinds the agent accepts; empty means all"`
	MaxMessageSize int64          `json:"max_message_size,omitempty"`
	Streaming      bool           `json:"streaming,omitempty"`
	Async          bool           `json:"async,omitempty"`
	Tools          []string       `json:"tools,omitempty"`
	Access         *core.Access   `json:"access,omitempty"`
	Extra          map[string]any `json:"extra,omitempty" jsonschema:"protocol-specific card fields"`
}

func agentView(r *core.Relay, a *core.Agent, withCard bool) AgentView {
	caps := a.Capabilities
	if caps == nil {
		caps = []string{}
	}
	v := AgentView{AgentID: a.ID, URI: r.URI(a.ID), Name: a.Card.Name, Description: a.Card.Description,
		Capabilities: caps, Protocol: a.Protocol, Endpoint: string(a.Endpoint.Kind), Alive: a.Alive(r.Clock().Now()),
		ExpiresAt: a.ExpiresAt, LastSeen: a.LastSeen}
	if withCard {
		c := a.Card
		cv := &CardView{Name: c.Name, Description: c.Description, Version: c.Version, Owner: c.Owner, Device: c.Device,
			ContentTypes: c.ContentTypes, MaxMessageSize: c.MaxMessageSize, Streaming: c.Streaming, Async: c.Async,
			Tools: c.Tools, Access: c.Access}
		if len(c.Extra) > 0 {
			var m map[string]any
			if json.Unmarshal(c.Extra, &m) == nil {
				cv.Extra = m
			}
		}
		v.Card = cv
	}
	return v
}

// ReceiptView is a message's transport receipt.
type ReceiptView struct {
	MessageID string        `json:"message_id"`
	Sender    string        `json:"sender"`
	Receiver  string        `json:"receiver"`
	Status    string        `json:"status" jsonschema:"queued, delivered, rejected, timeout, expired or unreachable"`
	Terminal  bool          `json:"terminal" jsonschema:"whether the status is final"`
	Attempts  int           `json:"attempts"`
	Code      int           `json:"code,omitempty" jsonschema:"the receiver's refusal code or last HTTP status"`
	LastError string        `json:"last_error,omitempty"`
	Reply     any           `json:"reply,omitempty" jsonschema:"the receiver's acknowledgement body"`
	History   []HistoryView `json:"history"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
	ExpiresAt time.Time     `json:"expires_at"`
}

// HistoryView is one step of a receipt's history.
type HistoryView struct {
	At     time.Time `json:"at"`
	Status string    `json:"status"`
	Detail string    `json:"detail,omitempty"`
}

func receiptView(rc *core.Receipt) ReceiptView {
	v := ReceiptView{MessageID: rc.MessageID, Sender: rc.Sender, Receiver: rc.Receiver, Status: string(rc.Status),
		Terminal: rc.Status.Terminal(), Attempts: rc.Attempts, Code: rc.Code, LastError: rc.LastError,
		History: make([]HistoryView, 0, len(rc.History)), CreatedAt: rc.CreatedAt, UpdatedAt: rc.UpdatedAt, ExpiresAt: rc.ExpiresAt}
	if len(rc.Reply) > 0 {
		var x any
		if json.Unmarshal(rc.Reply, &x) == nil {
			v.Reply = x
		} else {
			v.Reply = string(rc.Reply)
		}
	}
	for _, h := range rc.History {
		v.History = append(v.History, HistoryView{At: h.At, Status: string(h.Status), Detail: h.Detail})
	}
	return v
}

// MessageView is a relayed message.
type MessageView struct {
	MessageID      string         `json:"message_id"`
	Sender         string         `json:"sender"`
	Receiver       string         `json:"receiver"`
	Type           string         `json:"type"`
	ConversationID string         `json:"conversation_id,omitempty"`
	CorrelationID  string         `json:"correlation_id,omitempty" jsonschema:"the id of the message this one answers"`
	Protocol       string         `json:"protocol,omitempty"`
	Parts          []Part         `json:"parts"`
	Text           string         `json:"text,omitempty" jsonschema:"the text parts joined by newlines"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	ReceivedAt     time.Time      `json:"received_at"`
	Seq            int64          `json:"seq,omitempty"`
}

func messageView(m *core.Message) MessageView {
	var texts []string
	for _, p := range m.Parts {
		if p.Kind == core.PartText {
			texts = append(texts, p.Text)
		}
	}
	return MessageView{MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Type: m.Type, ConversationID: m.ConversationID,
		CorrelationID: m.CorrelationID, Protocol: m.Protocol, Parts: FromParts(m.Parts), Text: strings.Join(texts, "\n"),
		Metadata: m.Metadata, ReceivedAt: m.ReceivedAt, Seq: m.Seq}
}

// ConversationView is a conversation.
type ConversationView struct {
	ConversationID string            `json:"conversation_id"`
	CreatedAt      time.Time         `json:"created_at"`
	LastMessageAt  time.Time         `json:"last_message_at"`
	MessageCount   int               `json:"message_count"`
	Participants   []ParticipantView `json:"participants"`
}

// ParticipantView is one agent's part in a conversation.
type ParticipantView struct {
	AgentID string `json:"agent_id"`
	TraceID string `json:"trace_id,omitempty" jsonschema:"the agent's own id for the conversation"`
}

func conversationView(c *core.Conversation) ConversationView {
	v := ConversationView{ConversationID: c.ID, CreatedAt: c.CreatedAt, LastMessageAt: c.LastMessageAt, MessageCount: c.Messages,
		Participants: make([]ParticipantView, 0, len(c.Participants))}
	for _, p := range c.Participants {
		v.Participants = append(v.Participants, ParticipantView{AgentID: p.AgentID, TraceID: p.TraceID})
	}
	return v
}
