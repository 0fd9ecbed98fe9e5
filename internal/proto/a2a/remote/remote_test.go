package remote

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
)

func TestParseCard(t *testing.T) {
	tests := []struct {
		name, card string
		url        string
		version    a2a.Version
		bad        bool
	}{
		{"1.0 preferred", `{"name":"x","supportedInterfaces":[{"url":"http://h/old","protocolBinding":"JSONRPC","protocolVersion":"0.3"},{"url":"http://h/new","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`, "http://h/new", a2a.V10, false},
		{"0.3 interface", `{"name":"x","supportedInterfaces":[{"url":"http://h/rpc","protocolBinding":"jsonrpc","protocolVersion":"0.3.0"}]}`, "http://h/rpc", a2a.V03, false},
		{"0.3 card", `{"name":"x","url":"http://h/rpc","protocolVersion":"0.3.0"}`, "http://h/rpc", a2a.V03, false},
		{"0.3 additional", `{"name":"x","url":"http://h/grpc","preferredTransport":"GRPC","additionalInterfaces":[{"url":"http://h/j","transport":"JSONRPC"}]}`, "http://h/j", a2a.V03, false},
		{"no name", `{"supportedInterfaces":[{"url":"http://h/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`, "", "", true},
		{"grpc only", `{"name":"x","supportedInterfaces":[{"url":"http://h/","protocolBinding":"GRPC","protocolVersion":"1.0"}]}`, "", "", true},
		{"relative url", `{"name":"x","supportedInterfaces":[{"url":"/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`, "", "", true},
		{"not json", `<html>`, "", "", true},
		{"array", `[1]`, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := ParseCard([]byte(tt.card))
			if tt.bad {
				if !errors.Is(err, ErrInvalidCard) {
					t.Fatalf("err = %v, want ErrInvalidCard", err)
				}
				return
			}
			if err != nil || info.RPCURL != tt.url || info.Version != tt.version {
				t.Fatalf("got %+v, %v; want %s %s", info, err, tt.url, tt.version)
			}
		})
	}
}

func TestFetchCardErrors(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"name":"` + strings.Repeat("x", 2000) + `"}`))
	}))
	defer big.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	// Answers only once the client has given up on it.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	client := &http.Client{Timeout: 100 * time.Millisecond}
	for name, tc := range map[string]struct {
		url  string
		want error
	}{
		"too large":   {big.URL, ErrInvalidCard},
		"404":         {missing.URL, ErrCardUnreachable},
		"timeout":     {slow.URL, ErrCardUnreachable},
		"refused":     {"http://127.0.0.1:1/", ErrCardUnreachable},
		"not http":    {"file:///etc/passwd", ErrInvalidCard},
		"credentials": {"http://u:p@127.0.0.1/", ErrInvalidCard},
	} {
		if _, err := FetchCard(context.Background(), client, tc.url, 1000); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	task := `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a","parts":[{"text":"hi"}]}]}}}`
	tests := []struct {
		name   string
		v      a2a.Version
		status int
		body   string
		kind   core.OutcomeKind
		reply  string
	}{
		{"1.0 task", a2a.V10, 200, task, core.OutcomeDelivered, `"result":{"text":"hi"}`},
		{"1.0 message", a2a.V10, 200, `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"data":{"x":1}}]}}}`, core.OutcomeDelivered, `"result":{"x":1}`},
		{"0.3 task", a2a.V03, 200, `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","contextId":"c","status":{"state":"failed","message":{"kind":"message","messageId":"s","role":"agent","parts":[{"kind":"text","text":"boom"}]}}}}`, core.OutcomeDelivered, `"status":"failed"`},
		{"rejected task", a2a.V10, 200, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_REJECTED"}}}}`, core.OutcomeRejected, `"status":"rejected"`},
		{"rpc error", a2a.V10, 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`, core.OutcomeRejected, `"code":-32602`},
		{"internal error", a2a.V10, 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"oops"}}`, core.OutcomeRetry, ""},
		{"5xx", a2a.V10, 503, ``, core.OutcomeRetry, ""},
		{"404", a2a.V10, 404, `not found`, core.OutcomeRejected, ""},
		{"garbage 200", a2a.V10, 200, `hello`, core.OutcomeRetry, ""},
		{"bad result", a2a.V10, 200, `{"jsonrpc":"2.0","id":1,"result":{"foo":1}}`, core.OutcomeRejected, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(tt.v, tt.status, []byte(tt.body))
			if d.Kind != tt.kind || !strings.Contains(string(d.Reply), tt.reply) {
				t.Fatalf("got kind %v reply %s (err %v), want %v containing %s", d.Kind, d.Reply, d.Err, tt.kind, tt.reply)
			}
		})
	}
}

func TestEncodeSend(t *testing.T) {
	m := &core.Message{ID: "id1", Sender: "s", ConversationID: "conv", Parts: []core.Part{{Kind: core.PartText, Text: "hi"}}}
	for v, want := range map[a2a.Version]string{a2a.V10: `"method":"SendMessage"`, a2a.V03: `"method":"message/send"`} {
		b, err := EncodeSend(v, m)
		if err != nil || !strings.Contains(string(b), want) || !strings.Contains(string(b), `"contextId":"conv"`) {
			t.Errorf("%s: %s %v", v, b, err)
		}
		var probe map[string]any
		if json.Unmarshal(b, &probe) != nil {
			t.Errorf("%s: not JSON", v)
		}
	}
	if _, err := EncodeSend(a2a.V10, &core.Message{ID: "x"}); err == nil {
		t.Error("encoded a message without parts")
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{"Remote Echo Agent": "remote-echo-agent", "  Weird!!Name  ": "weird-name", "a.b_c": "a.b_c"} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseCard(f *testing.F) {
	f.Add([]byte(`{"name":"x","supportedInterfaces":[{"url":"http://h/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`))
	f.Add([]byte(`{"name":"x","url":"http://h/rpc"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseCard(b)
		if err == nil && (info.RPCURL == "" || info.Name == "") {
			t.Fatalf("accepted card without url or name: %+v", info)
		}
	})
}
