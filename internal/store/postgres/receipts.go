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
// A payload is one entry a line, each a JSON value: a string (an id), an
// object (a core.Receipt), or an array whose first element, a string,
// marks an announcement (resultevents.go, recordevents.go). JSON escapes
// newlines, so any id fits on a line.
//
// The formats of a payload's lines, by build (ReadReceipts reads all):
//
//  1. Builds before e978ee0: a plain message id a line (the first builds
//     sent one id a notification). A line that does not begin with '"',
//     '{' or '[' is read as one.
//  2. Since e978ee0: a JSON value a line, as above; announcements marked
//     "record" (since 7ff05ad) and "result" (since df20847) came later,
//     and builds before them skipped these lines.
//
// Format 2 is this build's. A line this build cannot read — an
// array of a mark it does not know, a line that does not decode, an empty
// line — is not dropped: ReadReceipts answers LookNow, and the hub wakes
// every local wait to read the store, at a bounded rate. So a later
// format must keep to this shape: every line a JSON value, new kinds of
// line as arrays of a new mark (a new format's own lines marked
// "v<format>", ["v3", …]), never a line that is not JSON (read here as a
// format 1 id). A change of what existing lines mean must come as lines
// of a new mark, with the old lines still written for as long as builds
// that read only those may share the database.

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

// ParseReceipts splits a ReceiptChannel payload into its entries: the
// lines of message ids and receipts, in every format (see ReadReceipts).
// Other lines are left out: announcements, and lines this build cannot
// read, which ReadReceipts reports.
func ParseReceipts(payload string) []ReceiptNote { return ParseReceiptsFor(payload, nil) }

// ParseReceiptsFor is ParseReceipts keeping only the entries of message
// ids for which want reports true (all when want is nil). A receipt is
// decoded only when wanted: every instance hears every instance's
// receipts, and most are of messages nobody there waits for.
func ParseReceiptsFor(payload string, want func(id string) bool) []ReceiptNote {
	var rd ReceiptRead
	for line := range strings.SplitSeq(payload, "\n") {
		switch kindOf(line) {
		case lineReceipt:
			rd.receipt(line, want)
		case lineLegacy:
			rd.legacy(line, want)
		}
	}
	return rd.Receipts
}

// ReceiptRead is what a ReceiptChannel payload tells an instance
// (Store.ReadReceipts).
type ReceiptRead struct {
	// Receipts are the ended messages wanted, with their receipts when
	// the payload carried them.
	Receipts []ReceiptNote
	// Records are the record announcements of other instances.
	Records []core.RecordEvent
	// Results are the correlation ids of other instances' result
	// announcements.
	Results []string
	// LookNow says that something changed which the payload does not
	// name in a way this build can read: every wait should read the store
	// now (core.Relay.LookNow). It is set for Unknown lines and for the
	// empty payload the notifier sends after its connection came back
	// (notifications may have been missed meanwhile).
	LookNow bool
	// Unknown counts the lines this build cannot read: of a newer format
	// (a peer of a newer build), or garbled.
	Unknown int
	// Legacy counts the lines of format 1 (a peer of a build before
	// format 2), read as message ids.
	Legacy int
}

// ReadReceipts reads a ReceiptChannel payload in one pass: the entries of
// the ended messages for which want reports true (all when want is nil;
// see ParseReceiptsFor), the announcements of other instances (see
// RecordEvents, ResultEvents), and whether to look now. Nothing in a
// payload is dropped silently: what this build cannot read sets LookNow.
func (s *Store) ReadReceipts(payload string, want func(id string) bool) ReceiptRead {
	var rd ReceiptRead
	if payload == "" {
		rd.LookNow = true
		return rd
	}
	for line := range strings.SplitSeq(payload, "\n") {
		ok := true
		switch kindOf(line) {
		case lineReceipt:
			ok = rd.receipt(line, want)
		case lineLegacy:
			rd.legacy(line, want)
		case lineResult:
			ok = s.readResult(line, &rd)
		case lineRecord:
			ok = s.readRecord(line, &rd)
		default:
			ok = false
		}
		if !ok {
			rd.Unknown++
			rd.LookNow = true
		}
	}
	return rd
}

// Lines of a ReceiptChannel payload, by how they begin (kindOf).
type lineKind int

const (
	lineUnknown lineKind = iota // an empty line, an announcement of a mark not known here
	lineReceipt                 // a JSON string (an id) or object (a receipt)
	lineLegacy                  // format 1: a plain id
	lineResult                  // ["result", …]
	lineRecord                  // ["record", …]
)

// kindOf tells a line's kind by its first bytes, without decoding it.
func kindOf(line string) lineKind {
	switch {
	case line == "":
		return lineUnknown
	case line[0] == '"' || line[0] == '{':
		return lineReceipt
	case line[0] != '[':
		return lineLegacy
	case strings.HasPrefix(line, `["`+resultMark+`",`):
		return lineResult
	case strings.HasPrefix(line, `["`+recordMark+`",`):
		return lineRecord
	}
	return lineUnknown
}

// legacy reads a format 1 line, a plain id, into rd.Receipts when want
// wants it.
func (rd *ReceiptRead) legacy(line string, want func(id string) bool) {
	rd.Legacy++
	if want == nil || want(line) {
		rd.Receipts = append(rd.Receipts, ReceiptNote{ID: line})
	}
}

// receipt reads an id or receipt line into rd.Receipts when want wants
// it; it reports false when the line does not decode (a line whose id is
// plain and not wanted is not decoded).
func (rd *ReceiptRead) receipt(line string, want func(id string) bool) bool {
	if want != nil {
		if id, ok := lineID(line); ok && !want(id) {
			return true
		}
	}
	var n ReceiptNote
	if line[0] == '"' {
		if json.Unmarshal([]byte(line), &n.ID) != nil || n.ID == "" {
			return false
		}
	} else {
		rc := new(core.Receipt)
		if json.Unmarshal([]byte(line), rc) != nil || rc.MessageID == "" {
			return false
		}
		n = ReceiptNote{ID: rc.MessageID, Receipt: rc}
	}
	if want == nil || want(n.ID) {
		rd.Receipts = append(rd.Receipts, n)
	}
	return true
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
