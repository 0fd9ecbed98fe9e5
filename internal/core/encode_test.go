package core_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// checkEncoding requires m.AppendJSON to write what json.Marshal writes:
// the same bytes when every Part.Data is compact and free of characters
// that json.Marshal escapes inside raw JSON, else the same message once
// decoded; and an error exactly when json.Marshal fails.
func checkEncoding(t *testing.T, m *core.Message) {
	t.Helper()
	want, wantErr := json.Marshal(m)
	got, err := m.AppendJSON([]byte("prefix"))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("AppendJSON error %v, json.Marshal error %v", err, wantErr)
	}
	if err != nil {
		if string(got) != "prefix" {
			t.Fatalf("a failed AppendJSON returned %q, want dst unchanged", got)
		}
		return
	}
	got, ok := bytes.CutPrefix(got, []byte("prefix"))
	if !ok {
		t.Fatalf("AppendJSON dropped dst: %q", got)
	}
	if rawVerbatim(m) {
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON wrote\n%s\njson.Marshal writes\n%s", got, want)
		}
		return
	}
	var a, b core.Message
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("AppendJSON wrote invalid JSON %q: %v", got, err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	// RawMessage keeps the spelling; compare data parts as JSON values.
	if len(a.Parts) != len(b.Parts) {
		t.Fatalf("AppendJSON's message has %d parts, json.Marshal's %d", len(a.Parts), len(b.Parts))
	}
	for i := range a.Parts {
		var va, vb any
		if len(a.Parts[i].Data) > 0 || len(b.Parts[i].Data) > 0 {
			if json.Unmarshal(a.Parts[i].Data, &va) != nil || json.Unmarshal(b.Parts[i].Data, &vb) != nil || !reflect.DeepEqual(va, vb) {
				t.Fatalf("part %d: AppendJSON's data %s, json.Marshal's %s", i, a.Parts[i].Data, b.Parts[i].Data)
			}
		}
		a.Parts[i].Data, b.Parts[i].Data = nil, nil
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("AppendJSON's message decodes to\n%+v\njson.Marshal's to\n%+v", a, b)
	}
}

// rawVerbatim reports whether json.Marshal copies every Part.Data of m as
// it is.
func rawVerbatim(m *core.Message) bool {
	for _, p := range m.Parts {
		if len(p.Data) == 0 {
			continue
		}
		var buf bytes.Buffer
		if json.Compact(&buf, p.Data) != nil || !bytes.Equal(buf.Bytes(), p.Data) ||
			bytes.ContainsAny(p.Data, "<>&\u2028\u2029") {
			return false
		}
	}
	return true
}

func TestMessageAppendJSON(t *testing.T) {
	at := time.Date(2026, 12, 5, 1, 2, 3, 456789000, time.UTC)
	full := core.Message{
		ID: "m-1", Sender: "agent://hub/a", Receiver: "b", Type: "task",
		ConversationID: "conv", CorrelationID: "corr",
		Parts: []core.Part{
			{Kind: core.PartText, Text: "hello", Language: "en", MediaType: "text/plain", Name: "n", URL: "https://example.com/x?a=1&b=<2>"},
			{Kind: core.PartData, Data: json.RawMessage(`{"a":[1,2.5e3,null,true],"b":"\u00e9"}`)},
			{Kind: core.PartFile, Bytes: []byte{0, 1, 2, 250, 251, 252, 253, 254, 255}, Meta: map[string]any{"z": 1, "a": []any{"x"}}},
		},
		Metadata: map[string]any{"trace_id": "t", "n": 3.5, "nested": map[string]any{"k": "<v>"}},
		Protocol: "atp", TTL: 90 * time.Second,
		SentAt: at.Add(-time.Second), ReceivedAt: at, ExpiresAt: at.Add(90 * time.Second),
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Seq: 42, Attempts: 3, SenderGeneration: "g-s", ReceiverGeneration: "g-r",
	}
	zone := time.FixedZone("x", -(3*3600 + 30*60))
	cases := []struct {
		name string
		edit func(m *core.Message)
	}{
		{"every field", func(*core.Message) {}},
		{"only the required fields", func(m *core.Message) { *m = core.Message{ID: "m", Sender: "a", Receiver: "b", Type: "t"} }},
		{"escapes", func(m *core.Message) {
			m.Parts[0].Text = "quote \" backslash \\ nl \n cr \r tab \t bs \b ff \f nul \x00 us \x1f del \x7f <a>&amp; \u2028\u2029 é 日本 🎉"
		}},
		{"invalid UTF-8", func(m *core.Message) { m.Type = "bad \xff\xfe end \xe2\x82"; m.Parts[0].Text = "\xc3" }},
		{"times in other zones and whole seconds", func(m *core.Message) {
			m.SentAt, m.ReceivedAt, m.ExpiresAt = time.Time{}, at.In(zone), at.Truncate(time.Second)
		}},
		{"negative ttl and seq", func(m *core.Message) { m.TTL, m.Seq, m.Attempts = -5, -1, -2 }},
		{"data with spaces", func(m *core.Message) { m.Parts[1].Data = json.RawMessage(" { \"a\" : [ 1 , 2 ] } ") }},
		{"data with characters Marshal escapes", func(m *core.Message) { m.Parts[1].Data = json.RawMessage(`"<b>&\u2028"`) }},
		{"invalid data", func(m *core.Message) { m.Parts[1].Data = json.RawMessage(`{"a":`) }},
		{"year past 9999", func(m *core.Message) { m.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"year before 0", func(m *core.Message) { m.SentAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"metadata JSON cannot encode", func(m *core.Message) { m.Metadata = map[string]any{"f": func() {}} }},
		{"part meta JSON cannot encode", func(m *core.Message) { m.Parts[2].Meta = map[string]any{"c": make(chan int)} }},
		{"empty slices and maps", func(m *core.Message) {
			m.Parts, m.Metadata = []core.Part{}, map[string]any{}
		}},
		{"empty part", func(m *core.Message) { m.Parts = []core.Part{{}} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := full
			m.Parts = append([]core.Part(nil), full.Parts...)
			tc.edit(&m)
			checkEncoding(t, &m)
		})
	}
}

func TestHistoryAppendJSON(t *testing.T) {
	at := time.Date(2026, 12, 5, 1, 2, 3, 4, time.UTC)
	cases := []struct {
		name   string
		events []core.ReceiptEvent
		want   string // "" means json.Marshal's bytes
	}{
		{"none", nil, "[]"},
		{"empty", []core.ReceiptEvent{}, ""},
		{"one", []core.ReceiptEvent{{At: at, Status: core.StatusQueued}}, ""},
		{"with details", []core.ReceiptEvent{
			{At: at, Status: core.StatusQueued, Detail: "accepted"},
			{At: at.Add(time.Second), Status: core.StatusDelivered, Detail: "HTTP 200 <ok> \"fine\"\n"},
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := core.AppendHistoryJSON(nil, tc.events)
			if err != nil {
				t.Fatal(err)
			}
			want := []byte(tc.want)
			if tc.want == "" {
				if want, err = json.Marshal(tc.events); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
	bad := []core.ReceiptEvent{{At: at}, {At: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	if got, err := core.AppendHistoryJSON([]byte("x"), bad); err == nil || string(got) != "x" {
		t.Fatalf("a year past 9999: got %q, %v; want dst unchanged and an error", got, err)
	}
}

func FuzzMessageAppendJSON(f *testing.F) {
	f.Add("m-1", "hello <world> & \"you\"\n", []byte(`{"a":1}`), []byte{1, 2, 3}, int64(1700000000123456789), int64(5000))
	f.Add("\xff", "\u2028\x00", []byte(` [1, 2] `), []byte(nil), int64(-62135596800000000), int64(-1))
	f.Add("", "", []byte(`{`), []byte{}, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, id, text string, data, raw []byte, unixNano, ttl int64) {
		at := time.Unix(0, unixNano).UTC()
		m := &core.Message{
			ID: id, Sender: text, Receiver: strings.ToUpper(id), Type: text + id,
			Parts:      []core.Part{{Kind: core.PartText, Text: text}, {Kind: core.PartData, Data: data}, {Kind: core.PartFile, Bytes: raw, Name: id}},
			Metadata:   map[string]any{id: text},
			TTL:        time.Duration(ttl),
			ReceivedAt: at, ExpiresAt: at.Add(time.Duration(ttl)), SentAt: at.In(time.FixedZone("z", int(ttl%50000))),
			Seq: ttl,
		}
		checkEncoding(t, m)
	})
}

// BenchmarkEncodeMessage compares AppendJSON with json.Marshal for a message
// as the ATP adapter makes it from a small JSON payload.
func BenchmarkEncodeMessage(b *testing.B) {
	at := time.Date(2026, 12, 5, 1, 2, 3, 456789123, time.UTC)
	m := &core.Message{
		ID: "bench-s12-000123", Sender: "bench-s12", Receiver: "bench-r0", Type: "task",
		Parts:    []core.Part{{Kind: core.PartData, Data: json.RawMessage(`{"seq":123,"sent_ns":1764900000000000000,"text":"payload of a benchmark message"}`)}},
		Protocol: "atp", TTL: time.Minute, SentAt: at, ReceivedAt: at, ExpiresAt: at.Add(time.Minute),
	}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.AppendJSON(make([]byte, 0, 512)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
