package postgres

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Receipt notifications carry the receipts themselves. A send waiting for
// its message's first delivery attempt (core.Relay.SendAsAwaitAttempt)
// learns from the receipt channel that another instance ended the message;
// with only the id it then read the receipt back (a query per message for
// about half the messages with two hubs). So a payload carries, for each
// ended message, its receipt as the ending write stored it, when the
// writer has it at hand (Complete, CompleteRenew, ExpireDue, EndIdentity)
// and it fits: a receipt whose JSON passes maxPayload (a large reply, a
// long history) goes as its id alone, and so do the messages ended by
// Pull and Ack; a listener reads those.
//
// A payload is one entry a line, each a JSON value: a string (an id) or an
// object (a core.Receipt). JSON escapes newlines, so any id fits on a
// line.

// maxPayload is the most a receipt notification carries (PostgreSQL's
// limit is 8000 bytes).
const maxPayload = 7900

// ReceiptNote is one entry of a ReceiptChannel payload: a message that
// reached a terminal status, with its receipt when the notification
// carried it.
type ReceiptNote struct {
	ID string
	// Receipt is the terminal receipt as stored, or nil when the
	// notification carried only the id: read it.
	Receipt *core.Receipt
}

// ended is a message that reached a terminal status, to notify: its id,
// and its receipt when the write returned it.
type ended struct {
	id string
	rc *core.Receipt
}

func endedIDs(ids []string) []ended {
	out := make([]ended, len(ids))
	for i, id := range ids {
		out[i] = ended{id: id}
	}
	return out
}

func endedReceipts(rcs []*core.Receipt) []ended {
	out := make([]ended, len(rcs))
	for i, rc := range rcs {
		out[i] = ended{id: rc.MessageID, rc: rc}
	}
	return out
}

// encode is e's line in a payload: its receipt when it has one that fits,
// else its id.
func (e ended) encode() string {
	if e.rc != nil {
		if b, err := json.Marshal(e.rc); err == nil && len(b) <= maxPayload {
			return string(b)
		}
	}
	b, _ := json.Marshal(e.id) // a string always encodes
	return string(b)
}

// encodeEnded is the payload lines of es.
func encodeEnded(es []ended) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.encode()
	}
	return out
}

// receiptPayloads joins payload lines into as few payloads as fit.
func receiptPayloads(lines []string) []string {
	var out []string
	var b strings.Builder
	for _, line := range lines {
		if len(line) > maxPayload {
			continue // an id of more than maxPayload bytes: never stored
		}
		if b.Len() > 0 && b.Len()+1+len(line) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// ParseReceipts splits a ReceiptChannel payload into its entries. Lines
// that are neither a JSON string nor a receipt with a message id are
// skipped: a notification is a hint, never worth an error.
func ParseReceipts(payload string) []ReceiptNote { return ParseReceiptsFor(payload, nil) }

// ParseReceiptsFor is ParseReceipts keeping only the entries of message
// ids for which want reports true (all when want is nil). A receipt is
// decoded only when wanted: every instance hears every instance's
// receipts, and most are of messages nobody there waits for.
func ParseReceiptsFor(payload string, want func(id string) bool) []ReceiptNote {
	var out []ReceiptNote
	for line := range strings.SplitSeq(payload, "\n") {
		if want != nil {
			if id, ok := lineID(line); ok && !want(id) {
				continue
			}
		}
		var n ReceiptNote
		switch {
		case strings.HasPrefix(line, `"`):
			if json.Unmarshal([]byte(line), &n.ID) != nil || n.ID == "" {
				continue
			}
		case strings.HasPrefix(line, "{"):
			rc := new(core.Receipt)
			if json.Unmarshal([]byte(line), rc) != nil || rc.MessageID == "" {
				continue
			}
			n = ReceiptNote{ID: rc.MessageID, Receipt: rc}
		default:
			continue
		}
		if want == nil || want(n.ID) {
			out = append(out, n)
		}
	}
	return out
}

// receiptPrefix is how a receipt's line begins (encoding/json writes the
// fields of core.Receipt in order, the message id first).
const receiptPrefix = `{"message_id":"`

// lineID reads the message id of a payload line without decoding it, when
// that is plain: an id line or a receipt line whose id has no escape.
// Otherwise ok is false and the line must be decoded to know.
func lineID(line string) (id string, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(line, receiptPrefix):
		rest = line[len(receiptPrefix):]
	case strings.HasPrefix(line, `"`) && strings.HasSuffix(line, `"`) && len(line) >= 2:
		rest = line[1:]
	default:
		return "", false
	}
	i := strings.IndexByte(rest, '"')
	if i <= 0 || strings.IndexByte(rest[:i], '\\') >= 0 || !utf8.ValidString(rest[:i]) {
		return "", false // decoding would unescape or replace bytes
	}
	return rest[:i], true
}

// ReceiptIDs is the message ids of a ReceiptChannel payload (see
// ParseReceipts).
func ReceiptIDs(payload string) []string {
	var out []string
	for _, n := range ParseReceipts(payload) {
		out = append(out, n.ID)
	}
	return out
}
