package atp

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestTextOnly checks that the usual text payloads take the fast path of
// PayloadToParts, and that everything else is left to the general decode.
func TestTextOnly(t *testing.T) {
	for in, want := range map[string]string{
		`{"text":"hello"}`:                 "hello",
		"{\n\t\"text\" :  \"a b\" \r\n}":   "a b",
		`{"text":""}`:                      "",
		`{"text":"caf\u00e9 \"q\" \\ \/"}`: `café "q" \ /`,
		"{\"text\":\"\xff\"}":              "\ufffd",
	} {
		got, ok := textOnly([]byte(in))
		if !ok || got != want {
			t.Errorf("textOnly(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{`{}`, `{"Text":"a"}`, `{"text":"a","n":1}`, `{"text":"a","text":"b"}`, `{"text":1}`,
		`{"text":"a"`, `{"text":"a"}}`, "{\"text\":\"a\x01\"}", `{"text":"\x"}`, `{"t\u0065xt":"a"}`} {
		if got, ok := textOnly([]byte(in)); ok {
			t.Errorf("textOnly(%q) = %q, want the general decode", in, got)
		}
	}
	parts, err := PayloadToParts(json.RawMessage(`{"text":"a","text":"b"}`))
	if err != nil || len(parts) != 1 || parts[0].Kind != core.PartText || parts[0].Text != "b" {
		t.Errorf("duplicate text member: %+v, %v", parts, err)
	}
}
