package atp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// BenchmarkPayloadToParts maps the usual text payload of a send.
func BenchmarkPayloadToParts(b *testing.B) {
	payload := json.RawMessage(`{"text":"` + strings.Repeat("x", 256) + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := PayloadToParts(payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode renders a text message as the body of a webhook push.
func BenchmarkEncode(b *testing.B) {
	m := &core.Message{ID: "m-1", Sender: "bench-send", Receiver: "bench-recv", Type: "bench",
		Parts: []core.Part{{Kind: core.PartText, Text: strings.Repeat("x", 256)}}, TTL: time.Minute,
		SentAt: time.Unix(1767312000, 500000000)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := (Encoder{}).Encode(nil, m); err != nil {
			b.Fatal(err)
		}
	}
}
