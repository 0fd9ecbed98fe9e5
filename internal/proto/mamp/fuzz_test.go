package mamp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/ssrf"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// FuzzParseContent checks that any content the parser accepts encodes
// back, re-parses to the same parts, and that the encoded form is a fixed
// point.
func FuzzParseContent(f *testing.F) {
	for _, s := range []string{
		`"hi"`, `[{"type":"text","text":"x"}]`, `[{"type":"code","language":"go","code":"x"}]`,
		`[{"type":"image","source":{"type":"url","url":"https://a.b/c.png","media_type":"image/png"}}]`,
		`[{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lGODlhAQABAAAAACw="}}]`,
		`[{"type":"file","name":"a","mime_type":"text/plain","source":{"type":"base64","data":"aGk="}}]`,
		`[{"type":"data","data":{"a":1}}]`, `[{"type":"text","text":"x","extra":[1,{"b":null}]}]`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		parts, err := ParseContent(in)
		if err != nil {
			return
		}
		enc, err := EncodeContent(parts)
		if err != nil {
			t.Fatalf("accepted content does not encode: %v (%s)", err, in)
		}
		again, err := ParseContent(enc)
		if err != nil {
			t.Fatalf("encoded content does not parse: %v (%s)", err, enc)
		}
		if !jsonEqual(t, mustJSON(t, normalise(t, parts)), mustJSON(t, normalise(t, again))) {
			t.Fatalf("round trip changed parts: %s → %s", in, enc)
		}
		enc2, err := EncodeContent(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoded form not stable: %s vs %s (%v)", enc, enc2, err)
		}
	})
}

func mustJSON(t testing.TB, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParseURI checks that an accepted URI renders to one that parses to
// the same address.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"agent://a.com/b", "agent://[::1]:80/x", "agent://h/a%2Fb", "agent://u@h/x", "agent://h/x?y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURI(s)
		if err != nil {
			return
		}
		back, err := ParseURI(u.String())
		if err != nil || back != u {
			t.Fatalf("ParseURI(%q) = %+v renders %q which parses to %+v, %v", s, u, u.String(), back, err)
		}
	})
}

// FuzzEnvelope runs whole envelopes through the adapter's validation: it
// must never panic, and an accepted envelope's content must re-encode.
func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"protocol":"mamp/1.0","message_id":"m1","from":"agent://hub.test/a","to":"agent://hub.test/b","content":"hi","metadata":{"timestamp":"2026-03-04T10:00:00Z"}}`,
		`{"protocol":"mamp/1.0","message_id":"m2","conversation_id":"c","from":"agent://x.example/a","to":"agent://hub.test/b","content":[{"type":"code","code":"1"}],"metadata":{"timestamp":"2026-03-04T10:00:00+08:00","trace_id":"t"},"ttl_ms":5000,"callback_url":"http://127.0.0.1:1/cb"}`,
		`{"protocol":"mamp/2.0"}`, `{"protocol":"mamp/1.0","message_id":"m","from":"agent://h/a","to":"b","content":"x","metadata":{}}`,
		`{"protocol":"mamp/1.0","message_id":"0","from":"agent://0/0","to":"agent://0/0","content":[{"type":"code","code":""}],"metadata":{"timestamp":"0000-01-01T0:00:00+01:00"}}`,
		`{"protocol":"mamp/1.0","message_id":"m3","from":"agent://h/a","to":"agent://h/b","content":"x","metadata":{"timestamp":"9999-12-31T23:00:00-05:00"}}`,
		`{"protocol":"mamp/1.0","message_id":"m4","from":"agent://h/a","to":"agent://h/b","content":"x","metadata":{"timestamp":"0001-01-01T00:00:00Z"}}`,
	} {
		f.Add([]byte(s))
	}
	s := New(core.NewRelay(nil, nil, core.Config{Host: "hub.test"}, nil), Options{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var env Envelope
		if json.Unmarshal(in, &env) != nil {
			return
		}
		p, err := s.parse(&env)
		if err != nil {
			return
		}
		if p.fromID == "" || p.toID == "" || len(p.parts) == 0 {
			t.Fatalf("accepted envelope without addresses or content: %+v", p)
		}
		// 0001-01-01T00:00:00Z is a valid timestamp (Go's zero time), so
		// the check is the range the encoder can render, not IsZero.
		if y := p.sentAt.UTC().Year(); y < 1 || y > 9999 {
			t.Fatalf("accepted timestamp %v outside years 1-9999 in UTC", p.sentAt)
		}
		if _, err := EncodeContent(p.parts); err != nil {
			t.Fatalf("accepted content does not encode: %v", err)
		}
		m := &core.Message{ID: env.MessageID, Sender: p.fromID, Receiver: p.toID, Parts: p.parts, Metadata: p.meta, SentAt: p.sentAt}
		out, err := ToEnvelope(s.Addressing(), m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.parse(out); err != nil {
			t.Fatalf("rendered envelope is refused: %v", err)
		}
	})
}

// FuzzParseRemotes checks that only well-formed remotes come out of the
// configuration parser.
func FuzzParseRemotes(f *testing.F) {
	for _, s := range []string{"a.example=https://a.example", "x=ftp://y, b=http://127.0.0.1:9/", "=,==,a=", "A=http://h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for d, u := range ParseRemotes(s) {
			if d == "" || ssrf.CheckForm("base_url", u) != nil {
				t.Fatalf("ParseRemotes(%q) kept %q=%q", s, d, u)
			}
		}
	})
}

func TestParseRemotes(t *testing.T) {
	got := ParseRemotes(" Other.Example = https://mamp.other.example ,bad=ftp://x,=http://y,lab=http://10.0.0.5:8080")
	want := map[string]string{"other.example": "https://mamp.other.example", "lab": "http://10.0.0.5:8080"}
	if len(got) != len(want) || got["other.example"] != want["other.example"] || got["lab"] != want["lab"] {
		t.Fatalf("ParseRemotes = %v, want %v", got, want)
	}
}
