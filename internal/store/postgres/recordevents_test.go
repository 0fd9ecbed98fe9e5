package postgres

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// payloadOf is the receipt channel payloads of what s queued.
func payloadOf(s *Store) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return receiptPayloads(s.receipts)
}

// TestRecordEventsPayload: a record announcement shares the receipt
// channel's payloads with receipts and ids. Another instance's store
// reads it back whole, the announcing store leaves its own out; the
// receipts parser (as the versions before announcements parse) skips
// announcements and the record parser skips receipts, so instances of
// both versions can share a database.
func TestRecordEventsPayload(t *testing.T) {
	a := &Store{instance: "inst-a", kick: make(chan struct{}, 1)}
	b := &Store{instance: "inst-b", kick: make(chan struct{}, 1)}
	ev := core.RecordEvent{Kind: "mcp_task", ID: "t1", Index: "agent:alice/alice", Version: 2}
	odd := core.RecordEvent{Kind: "k\n\"x", ID: "[id]", Index: "", Version: 1}
	a.signalEnded(ended{id: "m1", rc: receiptFor("m1", `{"ok":true}`)})
	a.AnnounceRecord(ev)
	a.signalEnded(ended{id: "m2"})
	a.AnnounceRecord(odd)
	ps := payloadOf(a)
	if len(ps) != 1 {
		t.Fatalf("payloads %q, want one", ps)
	}
	old := `{"message_id":"m0","status":"delivered"}` + "\n" + `"m9"` // a payload of the versions before
	for _, c := range []struct {
		name     string
		payload  string
		reader   *Store
		records  []core.RecordEvent
		receipts []string
	}{
		{"another instance", ps[0], b, []core.RecordEvent{ev, odd}, []string{"m1", "m2"}},
		{"its own", ps[0], a, nil, []string{"m1", "m2"}},
		{"old payload", old, b, nil, []string{"m0", "m9"}},
		{"not announcements", `["record","x","k"]` + "\n" + `["other","x","k","i","",1]` + "\n" + `["record","x","","i","",1]` +
			"\n" + `["record","x","k","i","",1,"more"]` + "\n" + `["record","x","k","i","","one"]` + "\n[", b, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.reader.RecordEvents(c.payload); !slices.Equal(got, c.records) {
				t.Errorf("RecordEvents = %v, want %v", got, c.records)
			}
			if got := ReceiptIDs(c.payload); !slices.Equal(got, c.receipts) {
				t.Errorf("ReceiptIDs = %q, want %q", got, c.receipts)
			}
		})
	}
	big := &Store{instance: "inst-a", kick: make(chan struct{}, 1)}
	big.AnnounceRecord(core.RecordEvent{Kind: "k", ID: strings.Repeat("x", maxPayload)})
	if ps := payloadOf(big); len(ps) != 0 {
		t.Fatalf("an announcement past the limit went as %d payloads", len(ps))
	}
}

// FuzzRecordEvents: any payload parses without panicking into complete
// events, and an announcement that fits comes back unchanged.
func FuzzRecordEvents(f *testing.F) {
	f.Add(`["record","x","k","i","o",1]`, "mcp_task", "t1", "owner", int64(1))
	f.Add(`"m1"`+"\n"+`{"message_id":"m2"}`, "k", "a\nb", "", int64(0))
	f.Add("[\n[[", "[", "]", "\"", int64(-1))
	b := &Store{instance: "reader"}
	f.Fuzz(func(t *testing.T, payload, kind, id, index string, version int64) {
		for _, ev := range b.RecordEvents(payload) {
			if ev.Kind == "" || ev.ID == "" {
				t.Fatalf("event %+v from %q", ev, payload)
			}
		}
		a := &Store{instance: "writer", kick: make(chan struct{}, 1)}
		ev := core.RecordEvent{Kind: kind, ID: id, Index: index, Version: version}
		a.AnnounceRecord(ev)
		var back []core.RecordEvent
		for _, p := range payloadOf(a) {
			back = append(back, b.RecordEvents(p)...)
		}
		switch {
		case kind == "" || id == "":
			if len(back) != 0 {
				t.Fatalf("an incomplete event came back as %v", back)
			}
		case !utf8.ValidString(kind) || !utf8.ValidString(id) || !utf8.ValidString(index), len(payloadOf(a)) == 0:
			// Never stored (core.CheckStorableRecord), or too long to notify.
		case len(back) != 1 || back[0] != ev:
			t.Fatalf("event %+v came back as %+v", ev, back)
		}
	})
}
