package core

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The stores encode every message they accept, and receipt histories with
// it. encoding/json does that by reflection and then re-scans what each
// time.Time and json.RawMessage wrote; these encoders write the same JSON
// directly. They produce what json.Marshal produces for the same value
// (only maps — Metadata and Part.Meta — are handed to json.Marshal), so
// whatever reads a stored body with encoding/json reads the same message.

// AppendJSON appends the JSON encoding of m to dst, the same bytes
// json.Marshal(m) returns when every Part.Data is compact JSON (Marshal
// compacts raw JSON; AppendJSON copies it after checking that it is
// valid). It fails where json.Marshal fails: a time outside years 0-9999,
// invalid Part.Data, a map value JSON cannot encode.
func (m *Message) AppendJSON(dst []byte) ([]byte, error) {
	b := append(dst, `{"message_id":`...)
	b = appendString(b, m.ID)
	b = append(b, `,"sender":`...)
	b = appendString(b, m.Sender)
	b = append(b, `,"receiver":`...)
	b = appendString(b, m.Receiver)
	b = append(b, `,"type":`...)
	b = appendString(b, m.Type)
	if m.ConversationID != "" {
		b = append(b, `,"conversation_id":`...)
		b = appendString(b, m.ConversationID)
	}
	if m.CorrelationID != "" {
		b = append(b, `,"correlation_id":`...)
		b = appendString(b, m.CorrelationID)
	}
	if len(m.Parts) > 0 {
		b = append(b, `,"parts":[`...)
		for i := range m.Parts {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = m.Parts[i].appendJSON(b); err != nil {
				return dst, fmt.Errorf("part %d: %w", i, err)
			}
		}
		b = append(b, ']')
	}
	if len(m.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		var err error
		if b, err = appendMarshal(b, m.Metadata); err != nil {
			return dst, fmt.Errorf("metadata: %w", err)
		}
	}
	if m.Protocol != "" {
		b = append(b, `,"protocol":`...)
		b = appendString(b, m.Protocol)
	}
	b = append(b, `,"ttl":`...)
	b = strconv.AppendInt(b, int64(m.TTL), 10)
	var err error
	for _, t := range []struct {
		key string
		at  time.Time
	}{{`,"sent_at":`, m.SentAt}, {`,"received_at":`, m.ReceivedAt}, {`,"expires_at":`, m.ExpiresAt}} {
		b = append(b, t.key...)
		if b, err = appendTime(b, t.at); err != nil {
			return dst, err
		}
	}
	if m.TraceParent != "" {
		b = append(b, `,"traceparent":`...)
		b = appendString(b, m.TraceParent)
	}
	if m.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, m.Seq, 10)
	}
	if m.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(m.Attempts), 10)
	}
	if m.SenderGeneration != "" {
		b = append(b, `,"sender_generation":`...)
		b = appendString(b, m.SenderGeneration)
	}
	if m.ReceiverGeneration != "" {
		b = append(b, `,"receiver_generation":`...)
		b = appendString(b, m.ReceiverGeneration)
	}
	return append(b, '}'), nil
}

// appendJSON appends the JSON encoding of p to b.
func (p *Part) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"kind":`...)
	b = appendString(b, string(p.Kind))
	for _, f := range []struct{ key, v string }{
		{`,"text":`, p.Text}, {`,"language":`, p.Language}, {`,"media_type":`, p.MediaType},
		{`,"name":`, p.Name}, {`,"url":`, p.URL},
	} {
		if f.v != "" {
			b = append(b, f.key...)
			b = appendString(b, f.v)
		}
	}
	if len(p.Bytes) > 0 {
		b = append(b, `,"bytes":"`...)
		b = base64.StdEncoding.AppendEncode(b, p.Bytes)
		b = append(b, '"')
	}
	if len(p.Data) > 0 {
		if !json.Valid(p.Data) {
			return b, errors.New("data is not valid JSON")
		}
		b = append(b, `,"data":`...)
		b = append(b, p.Data...)
	}
	if len(p.Meta) > 0 {
		b = append(b, `,"meta":`...)
		var err error
		if b, err = appendMarshal(b, p.Meta); err != nil {
			return b, fmt.Errorf("meta: %w", err)
		}
	}
	return append(b, '}'), nil
}

// AppendHistoryJSON appends the JSON array of events to dst, the same bytes
// json.Marshal(events) returns, but "[]" for no events (never "null").
func AppendHistoryJSON(dst []byte, events []ReceiptEvent) ([]byte, error) {
	b := append(dst, '[')
	for i := range events {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = events[i].AppendJSON(b); err != nil {
			return dst, err
		}
	}
	return append(b, ']'), nil
}

// AppendJSON appends the JSON encoding of e to dst, the same bytes
// json.Marshal(e) returns.
func (e *ReceiptEvent) AppendJSON(dst []byte) ([]byte, error) {
	b := append(dst, `{"at":`...)
	b, err := appendTime(b, e.At)
	if err != nil {
		return dst, err
	}
	b = append(b, `,"status":`...)
	b = appendString(b, string(e.Status))
	if e.Detail != "" {
		b = append(b, `,"detail":`...)
		b = appendString(b, e.Detail)
	}
	return append(b, '}'), nil
}

// appendMarshal appends json.Marshal(v) to b.
func appendMarshal(b []byte, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, raw...), nil
}

// appendTime appends t as time.Time's MarshalJSON writes it.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("time %v: year outside of range [0,9999]", y)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json writes it:
// control characters, <, > and & escaped as \u00XX (or \n, \r, \t, \b,
// \f), U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
