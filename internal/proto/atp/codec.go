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
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
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

// PayloadToParts maps an ATP payload to canonical parts.
func PayloadToParts(payload json.RawMessage) ([]core.Part, error) {
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 || string(payload) == "null" {
		return []core.Part{{Kind: core.PartData, Data: json.RawMessage("{}")}}, nil
	}
	if payload[0] != '{' {
		return nil, fmt.Errorf("payload must be a JSON object: %w", core.ErrInvalid)
	}
	if s, ok := textOnly(payload); ok {
		return []core.Part{{Kind: core.PartText, Text: s}}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		return nil, fmt.Errorf("payload: %v: %w", err, core.ErrInvalid)
	}
	if raw, ok := fields["parts"]; ok {
		var parts []core.Part
		if err := json.Unmarshal(raw, &parts); err == nil && validParts(parts) {
			return parts, nil
		}
	}
	if raw, ok := fields["text"]; ok && len(fields) == 1 {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []core.Part{{Kind: core.PartText, Text: s}}, nil
		}
	}
	return []core.Part{{Kind: core.PartData, Data: append(json.RawMessage(nil), payload...)}}, nil
}

// textOnly decodes the common payload {"text": "…"} without the general
// decode of PayloadToParts, to the same text. It reports false for any
// other payload, including one that is not valid JSON, which the general
// decode then handles.
func textOnly(payload []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(payload, []byte("{"))
	if !ok {
		return "", false
	}
	if rest, ok = bytes.CutPrefix(skipSpace(rest), []byte(`"text"`)); !ok {
		return "", false
	}
	if rest, ok = bytes.CutPrefix(skipSpace(rest), []byte(":")); !ok {
		return "", false
	}
	rest = skipSpace(rest)
	n := stringLen(rest)
	if n < 0 || string(skipSpace(rest[n:])) != "}" {
		return "", false
	}
	return unquote(rest[:n])
}

// skipSpace drops the JSON white space that starts b.
func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// stringLen returns the length of the JSON string that starts b, quotes
// included, or -1 if b does not start with a whole one. It only finds the
// closing quote: the string may still be invalid.
func stringLen(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return -1
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// unquote decodes the quoted JSON string q as encoding/json does,
// reporting false if it is invalid.
func unquote(q []byte) (string, bool) {
	body := q[1 : len(q)-1]
	plain := true // no escapes, no control characters
	for _, c := range body {
		if c < ' ' || c == '\\' {
			plain = false
			break
		}
	}
	if plain && utf8.Valid(body) {
		return string(body), true
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", false
	}
	return s, true
}

func validParts(ps []core.Part) bool {
	if len(ps) == 0 {
		return false
	}
	for _, p := range ps {
		switch p.Kind {
		case core.PartText, core.PartImage, core.PartFile, core.PartCode, core.PartData:
		default:
			return false
		}
	}
	return true
}

// textPayload is the payload of one text part.
type textPayload struct {
	Text string `json:"text"`
}

// PartsToPayload maps canonical parts to an ATP payload.
func PartsToPayload(parts []core.Part) (json.RawMessage, error) {
	if len(parts) == 1 {
		p := parts[0]
		if p.Kind == core.PartData && len(p.Data) > 0 && bytes.TrimSpace(p.Data)[0] == '{' && len(p.Meta) == 0 {
			return p.Data, nil
		}
		if p.Kind == core.PartText && len(p.Meta) == 0 {
			return json.Marshal(textPayload{Text: p.Text})
		}
	}
	if len(parts) == 0 {
		return json.RawMessage("{}"), nil
	}
	var texts []string
	for _, p := range parts {
		if p.Kind == core.PartText {
			texts = append(texts, p.Text)
		}
	}
	return json.Marshal(struct {
		Text  string      `json:"text"`
		Parts []core.Part `json:"parts"`
	}{strings.Join(texts, "\n"), parts})
}

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
