package payload

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestTextOnly checks that the usual text payloads take the fast path of
// ToParts, and that everything else is left to the general decode.
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
	parts, err := ToParts(json.RawMessage(`{"text":"a","text":"b"}`))
	if err != nil || len(parts) != 1 || parts[0].Kind != core.PartText || parts[0].Text != "b" {
		t.Errorf("duplicate text member: %+v, %v", parts, err)
	}
}

// FuzzTextOnly checks the fast path of ToParts against the general
// decode: whatever payload textOnly accepts must be an object whose only
// member is "text", holding the same string.
func FuzzTextOnly(f *testing.F) {
	for _, s := range []string{
		`{"text":"hi"}`, `{ "text" : "a\"b\\c\u00e9\ud83d\ude00" }`, `{"text":"\u0000"}`, "{\"text\":\"\xff\"}",
		"{\"text\":\"a\x01\"}", `{"text":"a"}x`, `{"text":"a","text":"b"}`, `{"Text":"a"}`, `{"text":1}`, `{"text":"a\"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, ok := textOnly(in)
		if !ok {
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(in, &fields); err != nil {
			t.Fatalf("textOnly accepted invalid JSON %q: %v", in, err)
		}
		var want string
		if len(fields) != 1 || json.Unmarshal(fields["text"], &want) != nil {
			t.Fatalf("textOnly accepted %q, not a text payload", in)
		}
		if got != want {
			t.Fatalf("textOnly(%q) = %q, encoding/json says %q", in, got, want)
		}
	})
}
