package postgres

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func receiptFor(id string, reply string) *core.Receipt {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	rc := &core.Receipt{MessageID: id, Sender: "alice", Receiver: "bob", Status: core.StatusDelivered, Attempts: 1, Code: 200,
		History:   []core.ReceiptEvent{{At: at, Status: core.StatusQueued, Detail: "accepted"}, {At: at, Status: core.StatusDelivered}},
		CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(time.Hour)}
	if reply != "" {
		rc.Reply = json.RawMessage(reply)
	}
	return rc
}

// TestReceiptNotes: a receipt that fits goes in the payload whole; one
// that does not (a large reply) or cannot be encoded (a reply that is not
// JSON) goes as its id, as do ids without a receipt, whatever their bytes.
func TestReceiptNotes(t *testing.T) {
	big := `"` + strings.Repeat("x", maxPayload) + `"`
	for _, c := range []struct {
		name        string
		in          ended
		wantReceipt bool
	}{
		{"receipt", ended{id: "m1", rc: receiptFor("m1", `{"ok":true}`)}, true},
		{"receipt without reply", ended{id: "m1", rc: receiptFor("m1", "")}, true},
		{"reply too large", ended{id: "m1", rc: receiptFor("m1", big)}, false},
		{"reply not JSON", ended{id: "m1", rc: receiptFor("m1", "{not json")}, false},
		{"id only", ended{id: "m1"}, false},
		{"id with a newline", ended{id: "a\nb"}, false},
		{"id like JSON", ended{id: `{"message_id":"x"}`}, false},
		{"id with a quote", ended{id: `"q"`}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := receiptPayloads(encodeEnded([]ended{c.in}))
			if len(ps) != 1 || len(ps[0]) > maxPayload {
				t.Fatalf("payloads %q, want one of at most %d bytes", ps, maxPayload)
			}
			notes := ParseReceipts(ps[0])
			if len(notes) != 1 || notes[0].ID != c.in.id {
				t.Fatalf("notes %+v, want one for %q", notes, c.in.id)
			}
			if got := notes[0].Receipt != nil; got != c.wantReceipt {
				t.Fatalf("receipt carried: %v, want %v", got, c.wantReceipt)
			}
			if c.wantReceipt {
				want, _ := json.Marshal(c.in.rc)
				got, _ := json.Marshal(notes[0].Receipt)
				if string(got) != string(want) {
					t.Fatalf("receipt changed on the way:\n got %s\nwant %s", got, want)
				}
			}
		})
	}
}

// TestReceiptPayloadsMixed: receipts and ids share payloads, each within
// the limit, and come back in order.
func TestReceiptPayloadsMixed(t *testing.T) {
	var in []ended
	for i := range 300 {
		id := "m" + strings.Repeat("0", i%7) + string(rune('a'+i%26))
		if i%3 == 0 {
			in = append(in, ended{id: id})
		} else {
			in = append(in, ended{id: id, rc: receiptFor(id, `{"n":1}`)})
		}
	}
	ps := receiptPayloads(encodeEnded(in))
	if len(ps) < 2 {
		t.Fatalf("%d payloads for 300 entries, want several", len(ps))
	}
	var back []ReceiptNote
	for _, p := range ps {
		if len(p) > maxPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		back = append(back, ParseReceipts(p)...)
	}
	if len(back) != len(in) {
		t.Fatalf("%d notes back, want %d", len(back), len(in))
	}
	for i, n := range back {
		if n.ID != in[i].id || (n.Receipt != nil) != (in[i].rc != nil) {
			t.Fatalf("note %d = %+v, want %q (receipt %v)", i, n, in[i].id, in[i].rc != nil)
		}
	}
}

// FuzzParseReceipts: any payload parses without panicking into notes with
// ids, and ids written as a payload come back unchanged.
func FuzzParseReceipts(f *testing.F) {
	f.Add("", "m1")
	f.Add(`"m1"`+"\n"+`{"message_id":"m2","status":"delivered"}`, "a\nb")
	f.Add(`{"message_id":""}`+"\n"+`"`, `{"x":1}`)
	f.Add("m1\nm2", "\"")
	f.Fuzz(func(t *testing.T, payload, id string) {
		for _, n := range ParseReceipts(payload) {
			if n.ID == "" || (n.Receipt != nil && n.Receipt.MessageID != n.ID) {
				t.Fatalf("note %+v from %q", n, payload)
			}
		}
		ps := receiptPayloads(encodeEnded([]ended{{id: id}}))
		var back []string
		for _, p := range ps {
			back = append(back, ReceiptIDs(p)...)
		}
		switch {
		case !utf8.ValidString(id):
			// Never stored (core.CheckStorable): json.Marshal makes it
			// valid, which is all that is asked here.
		case id == "":
			if len(back) != 0 {
				t.Fatalf("empty id came back as %q", back)
			}
		case len(ps) == 0: // too long to notify: never a stored id
			if len(id) <= 200 {
				t.Fatalf("id %q of %d bytes not notified", id, len(id))
			}
		case len(back) != 1 || back[0] != id:
			t.Fatalf("id %q came back as %q", id, back)
		}
	})
}

// TestParseReceiptsFor: only the wanted ids come back, whether a line is
// a receipt or an id, plain or escaped; record lines and junk are skipped.
func TestParseReceiptsFor(t *testing.T) {
	lines := encodeEnded([]ended{
		{id: "m1", rc: receiptFor("m1", "")},
		{id: "m2"},
		{id: `q"uote`, rc: receiptFor(`q"uote`, "")},
		{id: "<html>"},
		{id: "m3", rc: receiptFor("m3", `{"n":1}`)},
	})
	lines = append(lines, `["record","i1","task","t1","owner",1]`, `{"message_id":`, `"`, "")
	payload := strings.Join(lines, "\n")
	for _, c := range []struct {
		name string
		want map[string]bool
		ids  []string
	}{
		{"all", nil, []string{"m1", "m2", `q"uote`, "<html>", "m3"}},
		{"none", map[string]bool{}, nil},
		{"plain receipt and id", map[string]bool{"m1": true, "m2": true}, []string{"m1", "m2"}},
		{"escaped ids", map[string]bool{`q"uote`: true, "<html>": true}, []string{`q"uote`, "<html>"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want func(string) bool
			if c.want != nil {
				want = func(id string) bool { return c.want[id] }
			}
			var got []string
			for _, n := range ParseReceiptsFor(payload, want) {
				got = append(got, n.ID)
				if (n.ID == "m1" || n.ID == "m3") && (n.Receipt == nil || n.Receipt.MessageID != n.ID) {
					t.Errorf("%s: receipt %+v", n.ID, n.Receipt)
				}
			}
			if strings.Join(got, "|") != strings.Join(c.ids, "|") {
				t.Errorf("ids %q, want %q", got, c.ids)
			}
		})
	}
}

// FuzzLineID: whenever lineID reads an id without decoding, it is the id
// the line decodes to.
func FuzzLineID(f *testing.F) {
	for _, l := range encodeEnded([]ended{{id: "m1", rc: receiptFor("m1", "")}, {id: "m2"}, {id: `a\b`}, {id: "é"}}) {
		f.Add(l)
	}
	f.Add(`{"message_id":"x"}`)
	f.Add(`""`)
	f.Fuzz(func(t *testing.T, line string) {
		if strings.Contains(line, "\n") {
			return // a payload's lines never hold one
		}
		id, ok := lineID(line)
		if !ok {
			return
		}
		notes := ParseReceipts(line)
		if len(notes) == 1 && notes[0].ID != id {
			t.Fatalf("lineID(%q) = %q, decoded %q", line, id, notes[0].ID)
		}
	})
}
