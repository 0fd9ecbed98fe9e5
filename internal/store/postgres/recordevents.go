package postgres

import (
	"encoding/json"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Record announcements (core.RecordEvent) travel on the receipt channel
// (ReceiptChannel), in the same payloads and rounds as the receipts, one
// a line: a JSON array ["record", instance, kind, id, index, version],
// instance being the announcing store's (RecordEvents leaves out a
// store's own). ParseReceipts, and the parsers of the versions before
// these announcements, take only lines that are a JSON string or object
// and skip these; RecordEvents takes only these and skips the receipts.

// recordMark is the first element of a record announcement's line.
const recordMark = "record"

var _ core.RecordAnnouncer = (*Store)(nil)

// AnnounceRecord implements core.RecordAnnouncer: ev goes to the other
// instances with the next round of notifications (after notifyGap at
// most). Call it after the write committed.
func (s *Store) AnnounceRecord(ev core.RecordEvent) {
	b, err := json.Marshal([]any{recordMark, s.instance, ev.Kind, ev.ID, ev.Index, ev.Version})
	if err != nil || len(b) > maxPayload {
		return // too long to notify: receivers keep their fallback
	}
	s.mu.Lock()
	s.receipts = append(s.receipts, string(b))
	s.mu.Unlock()
	s.wakeNotifyLoop()
}

// RecordEvents is the record announcements of other instances in a
// ReceiptChannel payload (see ReadReceipts).
func (s *Store) RecordEvents(payload string) []core.RecordEvent {
	var rd ReceiptRead
	for line := range strings.SplitSeq(payload, "\n") {
		if kindOf(line) == lineRecord {
			s.readRecord(line, &rd)
		}
	}
	return rd.Records
}

// readRecord adds a record announcement to rd.Records unless it is this
// instance's; it reports false when the line is not a well-formed
// announcement.
func (s *Store) readRecord(line string, rd *ReceiptRead) bool {
	var mark, instance string
	var ev core.RecordEvent
	v := []any{&mark, &instance, &ev.Kind, &ev.ID, &ev.Index, &ev.Version}
	if json.Unmarshal([]byte(line), &v) != nil || len(v) != 6 || mark != recordMark || ev.Kind == "" || ev.ID == "" {
		return false
	}
	if instance != s.instance {
		rd.Records = append(rd.Records, ev)
	}
	return true
}
