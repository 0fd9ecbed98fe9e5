package core_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

func TestSameContent(t *testing.T) {
	text := func(s string) []core.Part { return []core.Part{{Kind: core.PartText, Text: s}} }
	data := func(raw string) []core.Part { return []core.Part{{Kind: core.PartData, Data: json.RawMessage(raw)}} }
	base := core.Message{ID: "m", Sender: "a", Receiver: "b", Type: "task", CorrelationID: "c", Parts: text("hi")}
	with := func(edit func(m *core.Message)) core.Message {
		m := base
		m.Parts = append([]core.Part(nil), base.Parts...)
		edit(&m)
		return m
	}
	cases := []struct {
		name string
		a, b core.Message
		same bool
	}{
		{"identical", base, base, true},
		{"other text", base, with(func(m *core.Message) { m.Parts = text("ho") }), false},
		{"other type", base, with(func(m *core.Message) { m.Type = "note" }), false},
		{"other correlation id", base, with(func(m *core.Message) { m.CorrelationID = "d" }), false},
		{"extra part", base, with(func(m *core.Message) { m.Parts = append(m.Parts, core.Part{Kind: core.PartText, Text: "x"}) }), false},
		{"other part kind", base, with(func(m *core.Message) { m.Parts[0].Kind = core.PartData; m.Parts[0].Data = json.RawMessage(`"hi"`) }), false},
		{"other media type", base, with(func(m *core.Message) { m.Parts[0].MediaType = "text/markdown" }), false},
		{"other bytes", with(func(m *core.Message) { m.Parts[0].Bytes = []byte{1} }), with(func(m *core.Message) { m.Parts[0].Bytes = []byte{2} }), false},
		// What may differ between attempts of one message.
		{"other conversation, ttl, metadata, timestamp", base, with(func(m *core.Message) {
			m.ConversationID, m.TTL, m.Metadata = "conv", 5, map[string]any{"trace_id": "t2"}
			m.SentAt, m.ReceivedAt = time.Unix(1, 0), time.Unix(2, 0)
		}), true},
		// Data compares as JSON values.
		{"key order and spacing", core.Message{Parts: data(`{"a":1,"b":[1,2]}`)}, core.Message{Parts: data(` { "b" : [1, 2], "a" : 1 } `)}, true},
		{"number spelling", core.Message{Parts: data(`{"a":1,"b":0.5}`)}, core.Message{Parts: data(`{"a":1.0,"b":5e-1}`)}, true},
		{"other number", core.Message{Parts: data(`{"a":1}`)}, core.Message{Parts: data(`{"a":2}`)}, false},
		{"number and string", core.Message{Parts: data(`{"a":1}`)}, core.Message{Parts: data(`{"a":"1"}`)}, false},
		{"extra key", core.Message{Parts: data(`{"a":1}`)}, core.Message{Parts: data(`{"a":1,"b":null}`)}, false},
		{"array order", core.Message{Parts: data(`[1,2]`)}, core.Message{Parts: data(`[2,1]`)}, false},
		{"nested", core.Message{Parts: data(`{"a":{"b":[{"c":true}]}}`)}, core.Message{Parts: data(`{"a":{"b":[{"c":false}]}}`)}, false},
		{"part meta compared too", core.Message{Parts: []core.Part{{Kind: core.PartText, Meta: map[string]any{"n": 1}}}},
			core.Message{Parts: []core.Part{{Kind: core.PartText, Meta: map[string]any{"n": 1.0}}}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := core.SameContent(&c.a, &c.b); got != c.same {
				t.Fatalf("SameContent = %v, want %v", got, c.same)
			}
			if got := core.SameContent(&c.b, &c.a); got != c.same {
				t.Fatalf("SameContent (swapped) = %v, want %v", got, c.same)
			}
		})
	}
}

// FuzzSameContent checks that content comparison is reflexive, symmetric
// and blind to re-encoding (key order, spacing) for any JSON data part.
func FuzzSameContent(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1.0}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`[0.5,1e3,-0]`, `[5e-1,1000,0]`},
		{`"x"`, `null`},
		{`{"a":{"b":{"c":[true,false,null]}}}`, `{"a":{"b":{"c":[true,false]}}}`},
		{`123456789012345678901234567890`, `123456789012345678901234567891`},
	} {
		f.Add(seed[0], seed[1])
	}
	msg := func(raw string) *core.Message {
		return &core.Message{Type: "t", Parts: []core.Part{{Kind: core.PartData, Data: json.RawMessage(raw)}}}
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !json.Valid([]byte(a)) || !json.Valid([]byte(b)) {
			return
		}
		if !core.SameContent(msg(a), msg(a)) {
			t.Fatalf("%s is not the same as itself", a)
		}
		if core.SameContent(msg(a), msg(b)) != core.SameContent(msg(b), msg(a)) {
			t.Fatalf("not symmetric for %s and %s", a, b)
		}
		v, err := jsonvalue.Decode([]byte(a))
		if err != nil {
			t.Fatal(err)
		}
		again, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if !core.SameContent(msg(a), msg(string(again))) {
			t.Fatalf("%s re-encoded as %s compares as other content", a, again)
		}
	})
}
