package postgres

import (
	"encoding/json"
	"strings"
)

// Result announcements travel on the receipt channel (ReceiptChannel) like
// record announcements, one a line: a JSON array ["result", instance,
// correlation id], written when this instance accepts a message
// correlated to an earlier one (a reply). The waits for results on the
// other instances (core's result waits: ATP's results, MCP's
// wait_for_reply) wake at once on it instead of at their next poll.
// ParseReceipts and RecordEvents skip these lines, as did the parsers of
// the builds before them; ResultEvents takes only these.

// resultMark is the first element of a result announcement's line.
const resultMark = "result"

// signalResult announces the acceptance of a message correlated to
// correlationID; call it after the write committed.
func (s *Store) signalResult(correlationID string) {
	b, err := json.Marshal([]string{resultMark, s.instance, correlationID})
	if err != nil || len(b) > maxPayload {
		return // too long to notify: the waits' polls find it
	}
	s.mu.Lock()
	s.receipts = append(s.receipts, string(b))
	s.mu.Unlock()
	s.wakeNotifyLoop()
}

// ResultEvents is the correlation ids of the result announcements of
// other instances in a ReceiptChannel payload (see ReadReceipts).
func (s *Store) ResultEvents(payload string) []string {
	var rd ReceiptRead
	for line := range strings.SplitSeq(payload, "\n") {
		if kindOf(line) == lineResult {
			s.readResult(line, &rd)
		}
	}
	return rd.Results
}

// readResult adds a result announcement's correlation id to rd.Results
// unless the announcement is this instance's; it reports false when the
// line is not a well-formed announcement.
func (s *Store) readResult(line string, rd *ReceiptRead) bool {
	var v []string
	if json.Unmarshal([]byte(line), &v) != nil || len(v) != 3 || v[0] != resultMark || v[2] == "" {
		return false
	}
	if v[1] != s.instance {
		rd.Results = append(rd.Results, v[2])
	}
	return true
}
