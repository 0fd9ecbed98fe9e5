package atp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	sbpayload "github.com/switchboard-hub/switchboard/internal/payload"
)

// decodeEnvelope decodes a send body the way POST /atp/send does: one JSON
// value, nothing after it.
func decodeEnvelope(in []byte) (*Envelope, bool) {
	var env Envelope
	dec := json.NewDecoder(bytes.NewReader(in))
	if dec.Decode(&env) != nil || dec.More() {
		return nil, false
	}
	return &env, true
}

// FuzzEnvelope decodes arbitrary send bodies and runs the send validation
// (toMessage, which maps the payload with PayloadToParts). Whatever it
// accepts must be a well-formed core message whose parts render back to a
// payload the adapter accepts again.
func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"atp_version":"1.0","message_id":"m1","sender":"a","receiver":"b","type":"task.request","ttl_ms":1000,"correlation_id":null,"payload":{"text":"hi"}}`,
		`{"sender":"a","receiver":"b","type":"t","payload":{"parts":[{"kind":"image","url":"https://x/y.png","media_type":"image/png"},{"kind":"code","text":"x","language":"go"}]}}`,
		`{"sender":"a","receiver":"b","type":"t","payload":{"n":1,"nested":{"a":[1,2]}},"metadata":{"k":"v"},"timestamp":1767312000.5}`,
		`{"sender":"a","receiver":"b","type":"t","ttl_ms":-1,"payload":[1]}`,
		`{"atp_version":"9","sender":" ","receiver":"b","type":"t"}`,
		`{"sender":"a","receiver":"b","type":"t","payload":null,"correlation_id":"c"} {}`,
		`{"sender":"a","receiver":"b","type":"t","timestamp":253402300800}`,
		`{"sender":"a","receiver":"b","type":"t","timestamp":1e300,"message_id":"a\u0000b"}`,
	} {
		f.Add([]byte(s))
	}
	s := New(core.NewRelay(nil, nil, core.Config{}, nil), Options{})
	maxTTL := s.relay.Config().MaxTTL
	f.Fuzz(func(t *testing.T, in []byte) {
		env, ok := decodeEnvelope(in)
		if !ok {
			return
		}
		m, status, code, msg := s.toMessage(env)
		if m == nil {
			if status != 400 || code == "" || msg == "" {
				t.Fatalf("refusal without a typed error: %d %q %q", status, code, msg)
			}
			return
		}
		switch {
		case strings.TrimSpace(m.Sender) == "", strings.TrimSpace(m.Receiver) == "", strings.TrimSpace(m.Type) == "":
			t.Fatalf("accepted a message without sender, receiver or type: %+v", m)
		case m.ID == "" || len(m.ID) > 200:
			t.Fatalf("accepted message id %q", m.ID)
		case m.TTL < 0 || m.TTL > maxTTL:
			t.Fatalf("accepted ttl %v", m.TTL)
		case len(m.Parts) == 0:
			t.Fatalf("accepted a message without parts: %s", in)
		}
		checkParts(t, m.Parts)
		// The stores keep the message as JSON: what is accepted must
		// encode, with the times a hub would give it.
		m.ReceivedAt = time.Now()
		m.ExpiresAt = m.ReceivedAt.Add(m.TTL)
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("accepted a message the store cannot encode: %v (%s)", err, in)
		}
	})
}

// FuzzPayload maps arbitrary payloads to parts and back: the adapter must
// never fail to render parts it produced, and must accept what it renders.
func FuzzPayload(f *testing.F) {
	for _, s := range []string{
		`{"text":"hi"}`, `{"text":1}`, `{}`, `null`, `"str"`, `{"parts":[]}`,
		`{"parts":[{"kind":"text","text":"a"},{"kind":"data","data":{"x":1}}]}`,
		`{"parts":[{"kind":"nope"}]}`, `{"text":"a","parts":[{"kind":"file","name":"f","bytes":"aGk="}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		parts, err := PayloadToParts(in)
		if err != nil {
			return
		}
		if len(parts) == 0 {
			t.Fatalf("no parts for %s", in)
		}
		checkParts(t, parts)
	})
}

// checkParts renders parts as an ATP payload (as the webhook encoder does)
// and maps that back: both steps must succeed and give valid parts.
func checkParts(t *testing.T, parts []core.Part) {
	t.Helper()
	payload, err := PartsToPayload(parts)
	if err != nil {
		t.Fatalf("parts do not render: %v (%+v)", err, parts)
	}
	if !json.Valid(payload) {
		t.Fatalf("rendered payload is not JSON: %s", payload)
	}
	again, err := PayloadToParts(payload)
	if err != nil || !sbpayload.Valid(again) {
		t.Fatalf("rendered payload %s does not map back: %v %+v", payload, err, again)
	}
	env, err := ToEnvelope(&core.Message{ID: "x", Sender: "a", Receiver: "b", Type: "t", Parts: parts, TTL: time.Second})
	if err != nil {
		t.Fatalf("envelope: %v", err)
	}
	if _, err := json.Marshal(env); err != nil {
		t.Fatalf("envelope does not marshal: %v", err)
	}
}
