package postgres

import (
	"crypto/rand"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Payloads of the receipt channel as each earlier build wrote them (see
// receipts.go), byte for byte, and of formats this build does not know.
const (
	// Format 1, builds 628f797 to 68534fb: one NOTIFY an id.
	fmt1Single = "msg-1"
	// Format 1, builds 4586415 to 0718043: ids joined, one a line.
	fmt1Lines = "msg-1\nagent:alice/m 2\nmsg-3"
	// Format 2, since e978ee0: JSON ids and receipts.
	fmt2 = `"msg-1"` + "\n" +
		`{"message_id":"msg-2","sender":"alice","receiver":"bob","status":"delivered","attempts":1,"code":200,` +
		`"reply":{"ok":true},"created_at":"2030-01-02T03:04:05Z","updated_at":"2030-01-02T03:04:05Z","expires_at":"2030-01-02T04:04:05Z"}`
	// Format 2 with the record (7ff05ad) and result (df20847)
	// announcements of instance PEER.
	fmt2Announce = `["record","PEER","mcp_task","t1","agent:alice/alice",2]` + "\n" + `["result","PEER","q1"]`
	// A newer format's line (format 3, as receipts.go asks it to look).
	fmt3 = `["v3","PEER",{"ended":["msg-9"]}]`
)

// TestReadReceiptsFormats: a payload of every format written so far reads
// as what it says; what this build cannot read (a newer format, garbled
// lines, the notifier's empty payload after a reconnect) asks to look now
// instead of being dropped.
func TestReadReceiptsFormats(t *testing.T) {
	s := &Store{instance: "SELF"}
	for _, c := range []struct {
		name     string
		payload  string
		receipts []string // ids, "+" after those that carried the receipt
		records  []string // record ids
		results  []string
		unknown  int
		legacy   int
		lookNow  bool
	}{
		{"format 1, one id", fmt1Single, []string{"msg-1"}, nil, nil, 0, 1, false},
		{"format 1, lines", fmt1Lines, []string{"msg-1", "agent:alice/m 2", "msg-3"}, nil, nil, 0, 3, false},
		{"format 2", fmt2, []string{"msg-1", "msg-2+"}, nil, nil, 0, 0, false},
		{"format 2 announcements", fmt2Announce, nil, []string{"t1"}, []string{"q1"}, 0, 0, false},
		{"own announcements", `["record","SELF","mcp_task","t1","x",2]` + "\n" + `["result","SELF","q1"]`, nil, nil, nil, 0, 0, false},
		{"all formats mixed", strings.Join([]string{fmt1Lines, fmt2, fmt2Announce, fmt3}, "\n"),
			[]string{"msg-1", "agent:alice/m 2", "msg-3", "msg-1", "msg-2+"}, []string{"t1"}, []string{"q1"}, 1, 3, true},
		{"newer format", fmt3, nil, nil, nil, 1, 0, true},
		{"newer format among known lines", `"msg-1"` + "\n" + fmt3, []string{"msg-1"}, nil, nil, 1, 0, true},
		{"reconnect", "", nil, nil, nil, 0, 0, true},
		{"garbled", strings.Join([]string{`{"message_id":`, `"unterminated`, `{"message_id":""}`, `""`,
			`["result","PEER"]`, `["record","PEER","k"]`, `["result",1,2]`, `[`, ""}, "\n"), nil, nil, nil, 9, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rd := s.ReadReceipts(c.payload, nil)
			var receipts, records []string
			for _, n := range rd.Receipts {
				id := n.ID
				if n.Receipt != nil {
					if n.Receipt.MessageID != n.ID || n.Receipt.Status != core.StatusDelivered {
						t.Errorf("receipt of %s: %+v", n.ID, n.Receipt)
					}
					id += "+"
				}
				receipts = append(receipts, id)
			}
			for _, ev := range rd.Records {
				records = append(records, ev.ID)
			}
			if !slices.Equal(receipts, c.receipts) || !slices.Equal(records, c.records) || !slices.Equal(rd.Results, c.results) {
				t.Errorf("read receipts %q, records %q, results %q; want %q, %q, %q",
					receipts, records, rd.Results, c.receipts, c.records, c.results)
			}
			if rd.Unknown != c.unknown || rd.Legacy != c.legacy || rd.LookNow != c.lookNow {
				t.Errorf("unknown %d, legacy %d, look now %v; want %d, %d, %v",
					rd.Unknown, rd.Legacy, rd.LookNow, c.unknown, c.legacy, c.lookNow)
			}
			// The separate parsers agree with the one pass.
			if got := ReceiptIDs(c.payload); len(got) != len(c.receipts) {
				t.Errorf("ReceiptIDs = %q, want %d ids", got, len(c.receipts))
			}
			if got := s.ResultEvents(c.payload); !slices.Equal(got, c.results) {
				t.Errorf("ResultEvents = %q, want %q", got, c.results)
			}
			if got := s.RecordEvents(c.payload); len(got) != len(c.records) {
				t.Errorf("RecordEvents = %v, want %d", got, len(c.records))
			}
		})
	}
}

// TestReadReceiptsWant: with a filter, only the wanted entries of every
// format come back, and an unwanted line is read, not unknown.
func TestReadReceiptsWant(t *testing.T) {
	s := &Store{instance: "SELF"}
	payload := strings.Join([]string{fmt1Lines, fmt2}, "\n")
	want := func(id string) bool { return id == "msg-3" || id == "msg-2" }
	rd := s.ReadReceipts(payload, want)
	var got []string
	for _, n := range rd.Receipts {
		got = append(got, n.ID)
	}
	if !slices.Equal(got, []string{"msg-3", "msg-2"}) || rd.LookNow || rd.Unknown != 0 || rd.Legacy != 3 {
		t.Fatalf("read %q, look now %v, unknown %d, legacy %d; want [msg-3 msg-2], false, 0, 3", got, rd.LookNow, rd.Unknown, rd.Legacy)
	}
}

// FuzzReadReceipts: any payload reads without panicking, and no line is
// dropped silently: each is an entry, an announcement, or unknown (which
// asks to look now). Lines written by this build read back as written.
func FuzzReadReceipts(f *testing.F) {
	for _, p := range []string{fmt1Single, fmt1Lines, fmt2, fmt2Announce, fmt3, "", "\n", `["record"`, `"a"b"`} {
		f.Add(p, "m1")
	}
	f.Fuzz(func(t *testing.T, payload, id string) {
		s := &Store{instance: "FUZZ-SELF"}
		rd := s.ReadReceipts(payload, nil)
		for _, n := range rd.Receipts {
			if n.ID == "" || (n.Receipt != nil && n.Receipt.MessageID != n.ID) {
				t.Fatalf("note %+v from %q", n, payload)
			}
		}
		if rd.Unknown > 0 && !rd.LookNow {
			t.Fatalf("%d unknown lines in %q without look now", rd.Unknown, payload)
		}
		if payload != "" && !strings.Contains(payload, s.instance) {
			lines := strings.Count(payload, "\n") + 1
			if n := len(rd.Receipts) + len(rd.Records) + len(rd.Results) + rd.Unknown; n != lines {
				t.Fatalf("%d lines of %q read as %d things: %+v", lines, payload, n, rd)
			}
		}
		// What this build writes, another reads back, whatever the id
		// (never empty: no message has an empty id).
		if id == "" {
			return
		}
		w := &Store{instance: "WRITER", kick: make(chan struct{}, 1)}
		w.signalEnded(ended{id: id})
		w.signalResult(id)
		for _, p := range payloadOf(w) {
			if rd := s.ReadReceipts(p, nil); rd.LookNow || rd.Legacy != 0 {
				t.Fatalf("payload %q of this build read as %+v", p, rd)
			}
		}
	})
}

// TestDueWakeFormats: the due channel's payloads of every build, and of
// formats this build does not know, which it answers by looking now.
func TestDueWakeFormats(t *testing.T) {
	self, peer := rand.Text(), rand.Text()
	s := &Store{instance: self}
	for _, c := range []struct {
		name, payload string
		want          DueWake
	}{
		{"empty (builds before e978ee0; any instance; reconnect)", "", WakeAll},
		{"own release (since e978ee0)", self, WakeAll},
		{"own accept (since 40afff4)", self + acceptedMark, WakeNone},
		{"peer release", peer, WakeStreams},
		{"peer accept", peer + acceptedMark, WakeStreams},
		{"peer of a later Go (longer id)", peer + "ABCDEF", WakeStreams},
		{"newer format", "v3:" + peer, WakeUnknown},
		{"lower case", strings.ToLower(peer), WakeUnknown},
		{"short", "ABC", WakeUnknown},
		{"garbled", `{"x":1}`, WakeUnknown},
		{"two marks", peer + acceptedMark + acceptedMark, WakeUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := s.DueWake(c.payload); got != c.want {
				t.Fatalf("DueWake(%q) = %v, want %v", c.payload, got, c.want)
			}
		})
	}
}
