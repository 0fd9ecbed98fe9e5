package core

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxStoredText is the longest text value, in bytes, that the stores keep
// in a column or an index key (see CheckStorable). PostgreSQL refuses an
// index entry over about 2,700 bytes (a third of a page), so a longer key
// would be refused there and kept by SQLite; with this bound both stores
// answer alike, far below PostgreSQL's limit even for two-column keys.
const MaxStoredText = 1024

// CheckStorable refuses a text value that a store cannot keep as it is: one
// with a NUL character (PostgreSQL's text and JSON types have no room for
// it), that is not valid UTF-8, or that is longer than MaxStoredText bytes.
// Both stores call it on the text fields they index or keep in columns
// (ids, conversation, correlation and trace ids, capabilities, record
// keys), so the answer is the same 400-class ErrInvalid on every protocol
// and backend; message content (payloads, metadata) is stored as encoded
// JSON and keeps its NULs.
func CheckStorable(field, v string) error {
	if err := checkText(field, v); err != nil {
		return err
	}
	if len(v) > MaxStoredText {
		return fmt.Errorf("%s is %d bytes long, over the %d a store keeps: %w", field, len(v), MaxStoredText, ErrInvalid)
	}
	return nil
}

// checkText refuses text with a NUL or invalid UTF-8 (see CheckStorable).
func checkText(field, v string) error {
	if i := strings.IndexByte(v, 0); i >= 0 {
		return fmt.Errorf("%s contains a NUL character (at byte %d): %w", field, i, ErrInvalid)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s is not valid UTF-8: %w", field, ErrInvalid)
	}
	return nil
}

// CheckStorableMessage checks the fields of m that stores keep as text
// (see CheckStorable).
func CheckStorableMessage(m *Message) error {
	for _, f := range [...]struct{ name, v string }{
		{"message_id", m.ID}, {"sender", m.Sender}, {"receiver", m.Receiver},
		{"conversation_id", m.ConversationID}, {"correlation_id", m.CorrelationID},
	} {
		if err := CheckStorable(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// Storable reports whether every value is text a store can hold (no NUL,
// valid UTF-8): a lookup by a value that could never have been stored
// finds nothing. Length is not checked: a longer key may have been stored
// before MaxStoredText, and a lookup by one costs a store nothing.
func Storable(vs ...string) bool {
	for _, v := range vs {
		if checkText("", v) != nil {
			return false
		}
	}
	return true
}

// SanitizeText makes a hub-made text (an error from a receiver, a history
// detail) storable: NULs and invalid UTF-8 become U+FFFD.
func SanitizeText(v string) string {
	if Storable(v) {
		return v
	}
	return strings.ReplaceAll(strings.ToValidUTF8(v, "\uFFFD"), "\x00", "\uFFFD")
}

// CheckStorableAgent checks the fields of a that stores keep as text: its
// id, capabilities and card tools (see CheckStorable).
func CheckStorableAgent(a *Agent) error {
	if err := CheckStorable("agent id", a.ID); err != nil {
		return err
	}
	for _, c := range a.Capabilities {
		if err := CheckStorable("capability", c); err != nil {
			return err
		}
	}
	for _, c := range a.Card.Tools {
		if err := CheckStorable("card tool", c); err != nil {
			return err
		}
	}
	return nil
}

// CheckStorableRecord checks a record's kind, id and index (see
// CheckStorable).
func CheckStorableRecord(r Record) error {
	for _, f := range [...]struct{ name, v string }{{"record kind", r.Kind}, {"record id", r.ID}, {"record index", r.Index}} {
		if err := CheckStorable(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// CheckStorableConversation checks a conversation's id and its
// participants' agent and trace ids (see CheckStorable).
func CheckStorableConversation(c *Conversation) error {
	if err := CheckStorable("conversation id", c.ID); err != nil {
		return err
	}
	for _, p := range c.Participants {
		if err := CheckStorable("agent id", p.AgentID); err != nil {
			return err
		}
		if err := CheckStorable("trace id", p.TraceID); err != nil {
			return err
		}
	}
	return nil
}
