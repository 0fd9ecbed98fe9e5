// Package core is Switchboard's protocol-neutral heart: agents, messages,
// receipts and conversations, the relay that accepts and routes messages, and
// the scheduler that delivers them with retries until each reaches exactly one
// terminal status.
//
// Core knows no wire protocol. Ingress adapters (ATP, MAMP, A2A, MCP)
// translate their envelopes into Message values and call Relay; deliverers
// translate Message values back into a receiver's protocol. Persistence is
// behind the Store interface, which the store packages implement.
package core

import (
	"encoding/json"
	"time"

	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

// Status is a message's delivery status as seen in its receipt.
type Status string

// Delivery statuses. Queued is the only non-terminal one.
const (
	StatusQueued      Status = "queued"      // accepted and durable, not yet delivered
	StatusDelivered   Status = "delivered"   // the receiver acknowledged it
	StatusRejected    Status = "rejected"    // the receiver refused it, with a code
	StatusTimeout     Status = "timeout"     // its TTL passed while undelivered (dead letter)
	StatusExpired     Status = "expired"     // it was already past its TTL on arrival
	StatusUnreachable Status = "unreachable" // the receiver is unknown (never stored)
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	switch s {
	case StatusDelivered, StatusRejected, StatusTimeout, StatusExpired, StatusUnreachable:
		return true
	}
	return false
}

// DeadLetter reports whether a message with this status belongs to the dead
// letter queue (it ended without being delivered and can be replayed).
func (s Status) DeadLetter() bool { return s == StatusTimeout || s == StatusRejected }

// EndpointKind names how the hub reaches an agent; it selects the deliverer.
type EndpointKind string

// Endpoint kinds known to the core. Adapters may register deliverers for
// further kinds.
const (
	EndpointATP  EndpointKind = "atp"  // webhook push of the ATP envelope
	EndpointMAMP EndpointKind = "mamp" // webhook push of the MAMP envelope
	EndpointA2A  EndpointKind = "a2a"  // a remote A2A agent reached with an A2A client
	EndpointPull EndpointKind = "pull" // no push: the agent fetches its queue
	// EndpointStream is an agent that holds a live stream open to the hub
	// (server-sent events); the hub instance holding the stream feeds it
	// from the queue.
	EndpointStream EndpointKind = "stream"
)

// Endpoint is where and how an agent receives messages.
type Endpoint struct {
	Kind EndpointKind `json:"kind"`
	URL  string       `json:"url,omitempty"`
}

// Pushable reports whether messages to this endpoint are pushed by the
// scheduler (as opposed to waiting to be pulled).
func (e Endpoint) Pushable() bool {
	return e.Kind != EndpointPull && e.Kind != EndpointStream && e.Kind != ""
}

// Owner identifies who runs an agent.
type Owner struct {
	UserID       string `json:"user_id,omitempty"`
	UserName     string `json:"user_name,omitempty"`
	Organization string `json:"organization,omitempty"`
}

// Device identifies where an agent runs.
type Device struct {
	DeviceID   string `json:"device_id,omitempty"`
	DeviceName string `json:"device_name,omitempty"`
	Location   string `json:"location,omitempty"`
	Platform   string `json:"platform,omitempty"`
}

// Access is an agent's inbound access policy.
type Access struct {
	// Public agents accept messages from any sender.
	Public bool `json:"public"`
	// AllowedAgents lists sender URIs or globs (agent://host/*) that may
	// send when the agent is not public.
	AllowedAgents []string `json:"allowed_agents,omitempty"`
	// RequireAuth refuses senders that did not authenticate.
	RequireAuth bool `json:"require_auth"`
}

// Card is an agent's self-description, shared by every protocol's card.
type Card struct {
	Name        string  `json:"name,omitempty"`
	Description string  `json:"description,omitempty"`
	Version     string  `json:"version,omitempty"`
	Owner       *Owner  `json:"owner,omitempty"`
	Device      *Device `json:"device,omitempty"`
	// ContentTypes lists the part kinds the agent accepts (text, image,
	// file, code, data). Empty means all.
	ContentTypes []string `json:"content_types,omitempty"`
	// MaxMessageSize bounds an inbound message's encoded size in bytes; 0
	// means the hub's limit.
	MaxMessageSize int64    `json:"max_message_size,omitempty"`
	Streaming      bool     `json:"streaming,omitempty"`
	Async          bool     `json:"async,omitempty"`
	Tools          []string `json:"tools,omitempty"`
	// Access is nil for the default policy: public, no auth required.
	Access *Access `json:"access,omitempty"`
	// Extra keeps protocol-specific card fields (for example a remote A2A
	// card) that the core does not interpret.
	Extra json.RawMessage `json:"extra,omitempty"`
}

// Agent is a registered agent.
type Agent struct {
	// ID is the agent's local id, unique on the hub; its URI is
	// agent://<hub host>/<ID>.
	ID           string    `json:"agent_id"`
	Card         Card      `json:"card"`
	Capabilities []string  `json:"capabilities"`
	Endpoint     Endpoint  `json:"endpoint"`
	Protocol     string    `json:"protocol,omitempty"` // the ingress protocol that registered it
	LeaseSeconds int       `json:"lease_seconds"`
	ExpiresAt    time.Time `json:"expires_at"`
	RegisteredAt time.Time `json:"registered_at"`
	LastSeen     time.Time `json:"last_seen"`
	// Generation names the identity: random, set by the relay when the id
	// is registered while free and kept while it stays registered. A
	// deregistration ends it; registering the id again starts another.
	// Credentials, messages and webhook signing secrets are bound to it.
	// Empty for agents registered before generations were kept.
	Generation string `json:"generation,omitempty"`
}

// Alive reports whether the agent's lease is current at now.
func (a *Agent) Alive(now time.Time) bool { return a.ExpiresAt.After(now) }

// HasCapability reports whether the agent lists capability c.
func (a *Agent) HasCapability(c string) bool {
	for _, x := range a.Capabilities {
		if x == c {
			return true
		}
	}
	for _, x := range a.Card.Tools {
		if x == c {
			return true
		}
	}
	return false
}

// PartKind is the kind of a content part.
type PartKind string

// The canonical part kinds every protocol maps to and from.
const (
	PartText  PartKind = "text"
	PartImage PartKind = "image"
	PartFile  PartKind = "file"
	PartCode  PartKind = "code"
	PartData  PartKind = "data"
)

// Part is one piece of message content, in the canonical union that every
// protocol's content maps to. Exactly the fields of its Kind are set:
// text → Text; code → Text and Language; image/file → MediaType, Name and
// either URL or Bytes; data → Data (any JSON value).
type Part struct {
	Kind      PartKind        `json:"kind"`
	Text      string          `json:"text,omitempty"`
	Language  string          `json:"language,omitempty"`
	MediaType string          `json:"media_type,omitempty"`
	Name      string          `json:"name,omitempty"`
	URL       string          `json:"url,omitempty"`
	Bytes     []byte          `json:"bytes,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	// Meta keeps protocol-specific per-part metadata.
	Meta map[string]any `json:"meta,omitempty"`
}

// Message is one message relayed by the hub.
type Message struct {
	ID             string `json:"message_id"`
	Sender         string `json:"sender"`
	Receiver       string `json:"receiver"`
	Type           string `json:"type"`
	ConversationID string `json:"conversation_id,omitempty"`
	CorrelationID  string `json:"correlation_id,omitempty"`
	// Parts is the canonical content.
	Parts []Part `json:"parts,omitempty"`
	// Metadata carries protocol-neutral key/values (for example a sender's
	// trace id or an A2A task id).
	Metadata map[string]any `json:"metadata,omitempty"`
	// Protocol is the ingress protocol (atp, mamp, a2a, mcp).
	Protocol string `json:"protocol,omitempty"`
	// TTL is how long the hub keeps trying, measured from ReceivedAt.
	TTL time.Duration `json:"ttl"`
	// SentAt is the sender's own timestamp, informational only.
	SentAt     time.Time `json:"sent_at,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	// TraceParent is the W3C traceparent of the accepting request.
	TraceParent string `json:"traceparent,omitempty"`
	// Seq orders messages on the hub; set by the store on accept.
	Seq int64 `json:"seq,omitempty"`
	// Attempts counts delivery attempts so far.
	Attempts int `json:"attempts,omitempty"`
	// SenderGeneration and ReceiverGeneration are the identity
	// generations (Agent.Generation) of the sender and the receiver when
	// the relay accepted the message: the message belongs to those
	// identities, not to later registrations of the same ids. Empty when
	// not known (an unregistered sender in dev mode; messages accepted
	// before generations were kept).
	SenderGeneration   string `json:"sender_generation,omitempty"`
	ReceiverGeneration string `json:"receiver_generation,omitempty"`
}

// SameContent reports whether a and b carry the same content: type,
// correlation id and parts, the parts compared as JSON values, so that
// object key order and number spelling (1, 1.0, 1e0) do not matter.
// (Bytes parts compare as their base64 text, that is byte for byte.)
func SameContent(a, b *Message) bool {
	if a.Type != b.Type || a.CorrelationID != b.CorrelationID || len(a.Parts) != len(b.Parts) {
		return false
	}
	ta, errA := jsonTree(a.Parts)
	tb, errB := jsonTree(b.Parts)
	return errA == nil && errB == nil && jsonvalue.Equal(ta, tb)
}

// jsonTree encodes v and decodes it again for jsonvalue.Equal.
func jsonTree(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonvalue.Decode(raw)
}

// ReceiptEvent is one step in a receipt's history.
type ReceiptEvent struct {
	At     time.Time `json:"at"`
	Status Status    `json:"status"`
	Detail string    `json:"detail,omitempty"`
}

// Receipt is the transport receipt of a message: what happened to it, not
// what the receiver computed (results are separate messages that carry the
// original id as CorrelationID).
type Receipt struct {
	MessageID string `json:"message_id"`
	Sender    string `json:"sender"`
	Receiver  string `json:"receiver"`
	Status    Status `json:"status"`
	Attempts  int    `json:"attempts"`
	// Code is the receiver's refusal code for rejected messages, or the last
	// HTTP status seen.
	Code      int    `json:"code,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Reply is the receiver's acknowledgement body, as it sent it.
	Reply       json.RawMessage `json:"reply,omitempty"`
	History     []ReceiptEvent  `json:"history,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	NextAttempt time.Time       `json:"next_attempt,omitempty"`
	ExpiresAt   time.Time       `json:"expires_at"`
}

// Participant is one agent's view of a conversation.
type Participant struct {
	AgentID  string    `json:"agent_id"`
	TraceID  string    `json:"trace_id"`
	JoinedAt time.Time `json:"joined_at"`
}

// Conversation is a conversation shared across agents; each participant
// keeps its own trace id for it.
type Conversation struct {
	ID            string        `json:"conversation_id"`
	CreatedAt     time.Time     `json:"created_at"`
	LastMessageAt time.Time     `json:"last_message_at"`
	Messages      int           `json:"message_count"`
	Participants  []Participant `json:"participants"`
}
