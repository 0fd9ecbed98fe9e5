// Package payload maps between canonical content parts (core.Part) and a
// payload: the JSON object that ATP carries in its envelopes and that the
// hub's protocols use wherever an answer is one JSON value (an ATP
// worker's result, the "result" of a remote A2A agent's receipt). It is
// neutral ground: ATP speaks it on the wire, A2A reads and writes it in
// receipts, and neither imports the other.
//
// Into parts:
//   - {"text": "…"} alone becomes one text part;
//   - an object with a "parts" array of canonical parts (see core.Part) is
//     that content (this is how multimodal content crosses ATP);
//   - any other object becomes one data part holding the object;
//   - an empty or null payload is one data part holding {}.
//
// Out of parts, the reverse: one data part holding an object is that
// object; one text part is {"text": …}; anything else is
// {"text": <text parts joined by newlines>, "parts": [canonical parts]}.
// Every rule round-trips: payload → parts → payload gives the same
// payload.
package payload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// ToParts maps a payload to canonical parts (see the package
// documentation).
func ToParts(payload json.RawMessage) ([]core.Part, error) {
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
		if err := json.Unmarshal(raw, &parts); err == nil && Valid(parts) {
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
// decode of ToParts, to the same text. It reports false for any
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

// Valid reports whether ps is non-empty and each part is of a known kind.
func Valid(ps []core.Part) bool {
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

// FromParts maps canonical parts to a payload, the inverse of ToParts.
func FromParts(parts []core.Part) (json.RawMessage, error) {
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
