// Package atp is the ATP (agent transfer protocol) adapter: the /atp/* HTTP
// routes of the tutorial relay, wire-compatible with its clients, plus the
// tutorial's "next steps" (heartbeat, deregistration, capability discovery,
// results split from receipts, acknowledged pull), and the encoder that
// pushes messages to ATP agents.
//
// # Translation rules
//
// An ATP payload is a JSON object. Into the core:
//   - {"text": "…"} alone becomes one text part;
//   - an object with a "parts" array of canonical parts (see core.Part) is
//     that content (this is how multimodal content crosses ATP);
//   - any other object becomes one data part holding the object.
//
// Out of the core, the reverse: one data part holding an object is that
// object; one text part is {"text": …}; anything else is
// {"text": <text parts joined by newlines>, "parts": [canonical parts]}.
// Every rule round-trips: ATP → core → ATP gives the same payload.
package atp

import (
	"encoding/json"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/payload"
)

// Version is the ATP envelope version this adapter speaks.
const Version = "1.0"

// Envelope is the ATP message envelope.
type Envelope struct {
	ATPVersion     string          `json:"atp_version"`
	MessageID      string          `json:"message_id"`
	Sender         string          `json:"sender"`
	Receiver       string          `json:"receiver"`
	Type           string          `json:"type"`
	Timestamp      float64         `json:"timestamp"`
	TTLMs          *int64          `json:"ttl_ms,omitempty"`
	CorrelationID  *string         `json:"correlation_id"`
	ConversationID string          `json:"conversation_id,omitempty"`
	Payload        json.RawMessage `json:"payload"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// PayloadToParts maps an ATP payload to canonical parts (package payload
// has the rules).
func PayloadToParts(p json.RawMessage) ([]core.Part, error) { return payload.ToParts(p) }

// PartsToPayload maps canonical parts to an ATP payload.
func PartsToPayload(parts []core.Part) (json.RawMessage, error) { return payload.FromParts(parts) }

// ToEnvelope renders a core message as the ATP envelope pushed to agents.
func ToEnvelope(m *core.Message) (*Envelope, error) {
	payload, err := PartsToPayload(m.Parts)
	if err != nil {
		return nil, err
	}
	ttl := m.TTL.Milliseconds()
	env := &Envelope{
		ATPVersion: Version, MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Type: m.Type,
		TTLMs: &ttl, ConversationID: m.ConversationID, Payload: payload, Metadata: m.Metadata,
	}
	ts := m.SentAt
	if ts.IsZero() {
		ts = m.ReceivedAt
	}
	env.Timestamp = float64(ts.UnixMicro()) / 1e6
	if m.CorrelationID != "" {
		c := m.CorrelationID
		env.CorrelationID = &c
	}
	return env, nil
}

// Encoder renders messages for ATP callbacks.
type Encoder struct{}

// Encode implements webhook.Encoder.
func (Encoder) Encode(_ *core.Agent, m *core.Message) ([]byte, string, error) {
	env, err := ToEnvelope(m)
	if err != nil {
		return nil, "", err
	}
	b, err := json.Marshal(env)
	return b, "application/json", err
}

// secondsToTime converts an ATP float timestamp.
func secondsToTime(s float64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(int64(s * 1e6)).UTC()
}
