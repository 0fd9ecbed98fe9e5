package core_test

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
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
