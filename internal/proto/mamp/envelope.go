package mamp

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Protocol is the envelope's protocol identifier.
const Protocol = "mamp/1.0"

// Envelope is the MAMP message envelope.
//
// CorrelationID, CallbackURL and TTLMs are Switchboard extensions: the id
// of the message this one answers, a URL the hub pushes answers to this
// message to, and how long the hub keeps trying to deliver it.
type Envelope struct {
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

// Metadata keys the adapter interprets. Other keys travel unchanged in the
// core message's metadata.
const (
	// MetaTimestamp is the sender's RFC 3339 timestamp (required).
	MetaTimestamp = "timestamp"
	// MetaTraceID is the sender's own trace id for the conversation; the
	// hub maps the conversation to it for that participant.
	MetaTraceID = "trace_id"
	// MetaType is the message type (default "message").
	MetaType = "type"
)

// Metadata keys of callback copies (see callback.go): the original
// conversation and correlation, carried in metadata because the copy
// itself is neither part of the conversation nor a result.
const (
	metaCallbackCorrelation  = "mamp_callback_correlation_id"
	metaCallbackConversation = "mamp_callback_conversation_id"
)

// Ack is the answer to POST /mamp/v1/messages.
type Ack struct {
	ConversationID string `json:"conversation_id"`
	MessageID      string `json:"message_id"`
	Status         string `json:"status"`
	// Delivery is the hub's transport status of the message (queued,
	// delivered, …), a Switchboard extension.
	Delivery core.Status `json:"delivery,omitempty"`
	// Duplicate is set when the message id was seen before from the same
	// sender; the answer is the first one.
	Duplicate bool `json:"duplicate,omitempty"`
}

// ToEnvelope renders a core message as a MAMP envelope addressed with ad.
func ToEnvelope(ad Addressing, m *core.Message) (*Envelope, error) {
	content, err := EncodeContent(m.Parts)
	if err != nil {
		return nil, err
	}
	env := &Envelope{Protocol: Protocol, MessageID: m.ID, ConversationID: m.ConversationID,
		From: ad.URIOf(m.Sender), To: ad.URIOf(m.Receiver), Content: content, CorrelationID: m.CorrelationID,
		Metadata: map[string]any{}}
	// Only a callback copy, which only the hub sends and only to a
	// callback agent (an internal id), carries the answer's correlation
	// and conversation in these keys; anyone else's are dropped, or a
	// sender of another protocol could dress a message up as an answer
	// the relay never let it give.
	callback := core.Hidden(m.Receiver)
	for k, v := range m.Metadata {
		switch k {
		case metaCallbackCorrelation:
			if s, ok := v.(string); ok && callback && env.CorrelationID == "" {
				env.CorrelationID = s
			}
		case metaCallbackConversation:
			if s, ok := v.(string); ok && callback && env.ConversationID == "" {
				env.ConversationID = s
			}
		default:
			env.Metadata[k] = v
		}
	}
	ts := m.SentAt
	if ts.IsZero() {
		ts = m.ReceivedAt
	}
	if ts.IsZero() {
		ts = time.Now().UTC()
	}
	env.Metadata[MetaTimestamp] = ts.UTC().Format(time.RFC3339Nano)
	if m.Type != "" && m.Type != "message" {
		env.Metadata[MetaType] = m.Type
	}
	return env, nil
}

// Encoder renders messages for MAMP agents' webhooks: the hub POSTs the
// MAMP envelope to the agent's endpoint URL, and the agent answers like a
// MAMP receiver ({"status": "received"} or any 2xx; {"status":
// "rejected"} or a 4xx refuses the message; a 5xx is retried).
type Encoder struct {
	// Host is the hub's own domain in agent:// URIs.
	Host string
}

// Encode implements webhook.Encoder.
func (e Encoder) Encode(_ *core.Agent, m *core.Message) ([]byte, string, error) {
	env, err := ToEnvelope(Addressing(e), m)
	if err != nil {
		return nil, "", err
	}
	b, err := json.Marshal(env)
	return b, "application/json", err
}

// Card is a MAMP agent card.
type Card struct {
	Protocol     string        `json:"protocol"`
	AgentID      string        `json:"agent_id"`
	Name         string        `json:"name,omitempty"`
	Description  string        `json:"description,omitempty"`
	Owner        *core.Owner   `json:"owner,omitempty"`
	Device       *core.Device  `json:"device,omitempty"`
	Capabilities Capabilities  `json:"capabilities"`
	Access       *core.Access  `json:"access,omitempty"`
	Endpoints    *CardEndpoint `json:"endpoints,omitempty"`
}

// Capabilities is the capabilities object of a card.
type Capabilities struct {
	ContentTypes   []string `json:"content_types"`
	MaxMessageSize int64    `json:"max_message_size,omitempty"`
	Streaming      bool     `json:"streaming"`
	Async          bool     `json:"async"`
	Tools          []string `json:"tools"`
}

// CardEndpoint lists where to reach the hub (a Switchboard extension of
// the hub's own card).
type CardEndpoint struct {
	Messages      string `json:"messages"`
	Agents        string `json:"agents"`
	Conversations string `json:"conversations"`
}

// AllContentTypes are the part kinds a card may list.
var AllContentTypes = []string{TypeText, TypeImage, TypeCode, TypeFile, TypeData}

// CardOf renders an agent's core card as its MAMP card. An agent without
// an access policy is public; one without content types accepts all.
func CardOf(ad Addressing, a *core.Agent) Card {
	c := Card{Protocol: Protocol, AgentID: ad.URIOf(a.ID), Name: a.Card.Name, Description: a.Card.Description,
		Owner: a.Card.Owner, Device: a.Card.Device,
		Capabilities: Capabilities{ContentTypes: a.Card.ContentTypes, MaxMessageSize: a.Card.MaxMessageSize,
			Streaming: a.Card.Streaming, Async: a.Card.Async, Tools: a.Card.Tools},
		Access: &core.Access{Public: true}}
	if len(c.Capabilities.ContentTypes) == 0 {
		c.Capabilities.ContentTypes = AllContentTypes
	}
	if c.Capabilities.Tools == nil {
		c.Capabilities.Tools = []string{}
	}
	if a.Card.Access != nil {
		acc := *a.Card.Access
		c.Access = &acc
	}
	return c
}

// CoreCard maps a MAMP card to the core card, validating it.
func (c *Card) CoreCard() (core.Card, error) {
	out := core.Card{Name: c.Name, Description: c.Description, Owner: c.Owner, Device: c.Device,
		MaxMessageSize: c.Capabilities.MaxMessageSize, Streaming: c.Capabilities.Streaming,
		Async: c.Capabilities.Async, Tools: c.Capabilities.Tools}
	for _, t := range c.Capabilities.ContentTypes {
		ok := t == "*"
		for _, k := range AllContentTypes {
			ok = ok || t == k
		}
		if !ok {
			return out, fmt.Errorf("capabilities.content_types: %q is not one of %s or *: %w", t, strings.Join(AllContentTypes, ", "), core.ErrInvalid)
		}
	}
	out.ContentTypes = c.Capabilities.ContentTypes
	if c.Capabilities.MaxMessageSize < 0 {
		return out, fmt.Errorf("capabilities.max_message_size must not be negative: %w", core.ErrInvalid)
	}
	if c.Access == nil {
		return out, nil // the default policy: public, no auth required
	}
	for _, g := range c.Access.AllowedAgents {
		if err := validGlob(g); err != nil {
			return out, err
		}
	}
	acc := *c.Access
	out.Access = &acc
	return out, nil
}

func validGlob(g string) error {
	if !strings.HasPrefix(g, "agent://") {
		return fmt.Errorf("access.allowed_agents: %q must be an agent:// URI or glob: %w", g, core.ErrInvalid)
	}
	if _, err := path.Match(g, "agent://x/y"); err != nil {
		return fmt.Errorf("access.allowed_agents: %q is a malformed glob: %w", g, core.ErrInvalid)
	}
	return nil
}
