package postgres

import (
	"slices"
	"strings"
	"testing"
)

// TestResultEventsPayload: result announcements share payloads with
// receipts and record announcements; another instance reads them back in
// order, the announcing one and the receipt parser skip them, and
// malformed or foreign lines give nothing.
func TestResultEventsPayload(t *testing.T) {
	a := &Store{instance: "inst-a", kick: make(chan struct{}, 1)}
	b := &Store{instance: "inst-b", kick: make(chan struct{}, 1)}
	a.signalEnded(ended{id: "m1", rc: receiptFor("m1", "")})
	a.signalResult("q1")
	a.signalResult(`odd"id` + "\n")
	ps := payloadOf(a)
	if len(ps) != 1 {
		t.Fatalf("payloads %q, want one", ps)
	}
	for _, c := range []struct {
		name     string
		payload  string
		reader   *Store
		results  []string
		receipts []string
	}{
		{"another instance", ps[0], b, []string{"q1", `odd"id` + "\n"}, []string{"m1"}},
		{"its own", ps[0], a, nil, []string{"m1"}},
		{"not announcements", `["result","x"]` + "\n" + `["result","x",""]` + "\n" + `["result","x","q",1]` +
			"\n" + `["result","x",2]` + "\n" + `["other","x","q"]` + "\n" + `["result"`, b, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.reader.ResultEvents(c.payload); !slices.Equal(got, c.results) {
				t.Errorf("ResultEvents = %q, want %q", got, c.results)
			}
			if got := ReceiptIDs(c.payload); !slices.Equal(got, c.receipts) {
				t.Errorf("ReceiptIDs = %q, want %q", got, c.receipts)
			}
			if got := c.reader.RecordEvents(c.payload); len(got) != 0 {
				t.Errorf("RecordEvents = %v, want none", got)
			}
		})
	}
	big := &Store{instance: "inst-a", kick: make(chan struct{}, 1)}
	big.signalResult(strings.Repeat("x", maxPayload))
	if ps := payloadOf(big); len(ps) != 0 {
		t.Fatalf("an announcement past the limit went as %d payloads", len(ps))
	}
}
