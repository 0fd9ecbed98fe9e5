package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/clocktest"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

func TestToolsHaveSchemas(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	want := []string{"ack_messages", "check_inbox", "get_agent_card", "get_conversation", "get_receipt", "list_agents", "list_conversations",
		"reply", "send_message", "wait_for_reply"}
	var got []string
	for tool, err := range e.cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tool.Name)
		if tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s: input schema %v, output schema %v", tool.Name, tool.InputSchema != nil, tool.OutputSchema != nil)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tools = %v, want %v", got, want)
	}
}

func TestListAgents(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnv(t, hub.Options{Clock: clock}, mcpadapter.Options{})
	ctx := context.Background()
	for _, a := range []struct {
		id    string
		caps  []string
		lease time.Duration
	}{{"translator", []string{"translate"}, 300 * time.Second}, {"summarizer", []string{"summarize"}, 300 * time.Second},
		{"old-translator", []string{"translate"}, 10 * time.Second}} {
		if _, _, err := e.hub.Relay.RegisterAs(ctx, core.AdminPrincipal(), &core.Agent{ID: a.id, Capabilities: a.caps, Protocol: "atp"}, a.lease); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute) // old-translator's lease has passed
	tests := []struct {
		name string
		args map[string]any
		want []string
	}{
		{"all", map[string]any{}, []string{"old-translator", "summarizer", "translator"}},
		{"capability", map[string]any{"capability": "translate"}, []string{"old-translator", "translator"}},
		{"alive", map[string]any{"alive": true}, []string{"summarizer", "translator"}},
		{"capability and alive", map[string]any{"capability": "translate", "alive": true}, []string{"translator"}},
		{"unknown capability", map[string]any{"capability": "fly"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out mcpadapter.ListAgentsOutput
			if res := e.call("list_agents", tc.args, &out); res.IsError {
				t.Fatalf("isError: %s", resultText(res))
			}
			var ids []string
			for _, a := range out.Agents {
				ids = append(ids, a.AgentID)
				if a.URI != "agent://127.0.0.1/"+a.AgentID {
					t.Errorf("uri = %q", a.URI)
				}
			}
			if strings.Join(sorted(ids), ",") != strings.Join(tc.want, ",") || out.Count != len(tc.want) {
				t.Fatalf("agents = %v (count %d), want %v", ids, out.Count, tc.want)
			}
		})
	}
	if res := e.call("list_agents", map[string]any{"limit": -1}, nil); !res.IsError {
		t.Fatal("negative limit: want isError")
	}
	if res := e.call("list_agents", map[string]any{"bogus": 1}, nil); !res.IsError {
		t.Fatal("unknown argument: want isError")
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestGetAgentCard(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	startWorker(t, e.base, "painter", []string{"paint"}, map[string]any{"name": "Painter", "description": "paints",
		"content_types": []string{"text"}, "extra": map[string]any{"style": "oil"}}, nil, 0)
	var v mcpadapter.AgentView
	if res := e.call("get_agent_card", map[string]any{"agent_id": "painter"}, &v); res.IsError {
		t.Fatalf("isError: %s", resultText(res))
	}
	if v.Card == nil || v.Card.Name != "Painter" || v.Card.Extra["style"] != "oil" || v.Endpoint != "atp" || !v.Alive ||
		len(v.Card.ContentTypes) != 1 {
		t.Fatalf("card = %+v / %+v", v, v.Card)
	}
	if res := e.call("get_agent_card", map[string]any{"agent_id": "agent://127.0.0.1/painter"}, &v); res.IsError {
		t.Fatalf("by URI: %s", resultText(res))
	}
	for _, id := range []string{"nobody", "agent://elsewhere/painter", "bad id!", ""} {
		if res := e.call("get_agent_card", map[string]any{"agent_id": id}, nil); !res.IsError {
			t.Errorf("%q: want isError", id)
		}
	}
}

func TestSendMessageAndWaitForReply(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	release := make(chan struct{})
	w := startWorker(t, e.base, "worker", []string{"echo"}, nil, release, 0)
	var sent mcpadapter.SendMessageOutput
	res := e.call("send_message", map[string]any{"to": "worker", "text": "hello", "ttl_ms": 30000, "conversation_id": "conv-1"}, &sent)
	if res.IsError {
		t.Fatalf("send: %s", resultText(res))
	}
	if sent.Sender != mcpadapter.DefaultHostAgentID || sent.Receiver != "worker" || sent.MessageID == "" {
		t.Fatalf("sent = %+v", sent)
	}
	got := <-w.received
	if got["sender"] != "mcp-host" || got["payload"].(map[string]any)["text"] != "hello" || got["conversation_id"] != "conv-1" {
		t.Fatalf("worker got %v", got)
	}
	// The host agent was registered as a pull agent for the replies.
	host, err := e.hub.Store.GetAgent(context.Background(), "mcp-host")
	if err != nil || host.Endpoint.Kind != core.EndpointPull || host.Protocol != "mcp" {
		t.Fatalf("host agent = %+v, %v", host, err)
	}

	// The worker holds its reply until the waiting call has reported
	// progress at least once.
	go func() {
		<-e.progress
		close(release)
	}()
	var out mcpadapter.WaitOutput
	res, err = e.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "wait_for_reply",
		Arguments: map[string]any{"message_id": sent.MessageID, "timeout_ms": 60000},
		Meta:      sdk.Meta{"progressToken": "tok-1"}})
	if err != nil || res.IsError {
		t.Fatalf("wait: %v %s", err, resultText(res))
	}
	decode(t, res, &out)
	if out.Outcome != mcpadapter.OutcomeReply || out.Reply == nil || out.Reply.Text != "done: hello" ||
		out.Reply.CorrelationID != sent.MessageID || out.Reply.Sender != "worker" || out.Receipt == nil || out.Receipt.Status != "delivered" {
		t.Fatalf("wait = %+v", out)
	}
	if !strings.Contains(resultText(res), "done: hello") {
		t.Fatalf("content = %q", resultText(res))
	}
	// The reply was taken off the host's queue.
	if n, _ := e.hub.Store.QueueDepth(context.Background(), "mcp-host"); n != 0 {
		t.Fatalf("host queue depth = %d", n)
	}
	var rc mcpadapter.ReceiptView
	if res := e.call("get_receipt", map[string]any{"message_id": out.Reply.MessageID}, &rc); res.IsError || rc.Status != "delivered" {
		t.Fatalf("reply receipt = %+v %s", rc, resultText(res))
	}
}

// TestWaitForReplyInline: an answer the receiver gave in its response to
// the delivery (the ATP tutorial's worker) is the reply.
func TestWaitForReplyInline(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	startInlineWorker(t, e.base, "reverser")
	var sent mcpadapter.SendMessageOutput
	if res := e.call("send_message", map[string]any{"to": "reverser", "text": "abc"}, &sent); res.IsError {
		t.Fatal(resultText(res))
	}
	var out mcpadapter.WaitOutput
	res := e.call("wait_for_reply", map[string]any{"message_id": sent.MessageID, "timeout_ms": 30000}, &out)
	if res.IsError {
		t.Fatal(resultText(res))
	}
	if out.Outcome != mcpadapter.OutcomeReply || out.Source != mcpadapter.SourceInline || out.Reply == nil ||
		out.Reply.Text != "inline: abc" || out.Reply.Sender != "reverser" || out.Reply.CorrelationID != sent.MessageID {
		t.Fatalf("wait = %+v reply %+v", out, out.Reply)
	}
	if !strings.Contains(resultText(res), "inline: abc") {
		t.Fatalf("content = %q", resultText(res))
	}
}

func decode(t *testing.T, res *sdk.CallToolResult, out any) {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

func TestSendMultimodal(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	w := startWorker(t, e.base, "viewer", nil, nil, nil, 0)
	png := []byte("\x89PNG\r\n\x1a\nfake")
	var sent mcpadapter.SendMessageOutput
	res := e.call("send_message", map[string]any{"to": "viewer", "text": "look", "parts": []any{
		map[string]any{"kind": "image", "media_type": "image/png", "name": "a.png", "bytes_base64": base64.StdEncoding.EncodeToString(png)},
		map[string]any{"kind": "data", "data": map[string]any{"n": 1}},
		map[string]any{"kind": "file", "url": "https://example.com/r.pdf", "media_type": "application/pdf"},
	}}, &sent)
	if res.IsError {
		t.Fatalf("send: %s", resultText(res))
	}
	got := <-w.received
	parts := got["payload"].(map[string]any)["parts"].([]any)
	if len(parts) != 4 {
		t.Fatalf("parts = %v", parts)
	}
	img := parts[1].(map[string]any)
	if img["kind"] != "image" || img["bytes"] != base64.StdEncoding.EncodeToString(png) || img["media_type"] != "image/png" {
		t.Fatalf("image part = %v", img)
	}
	m, err := e.hub.Store.GetMessage(context.Background(), sent.MessageID)
	if err != nil || m.Protocol != "mcp" || m.Type != "task" || string(m.Parts[2].Data) != `{"n":1}` {
		t.Fatalf("stored = %+v, %v", m, err)
	}
}

func TestSendMessageErrors(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	startWorker(t, e.base, "texter", nil, map[string]any{"content_types": []string{"text"}, "max_message_size": 10}, nil, 0)
	img := base64.StdEncoding.EncodeToString([]byte("x"))
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"unknown receiver", map[string]any{"to": "ghost", "text": "hi"}, "not_found: receiver \"ghost\": unknown receiver"},
		{"no content", map[string]any{"to": "texter"}, "give text or at least one part"},
		{"bad kind", map[string]any{"to": "texter", "parts": []any{map[string]any{"kind": "video"}}}, "kind"},
		{"image with url and bytes", map[string]any{"to": "texter", "parts": []any{map[string]any{"kind": "image", "url": "https://x/y.png", "bytes_base64": img}}}, "exactly one"},
		{"bad base64", map[string]any{"to": "texter", "parts": []any{map[string]any{"kind": "file", "bytes_base64": "!!"}}}, "bytes_base64"},
		{"relative url", map[string]any{"to": "texter", "parts": []any{map[string]any{"kind": "file", "url": "r.pdf"}}}, "absolute"},
		{"data without data", map[string]any{"to": "texter", "parts": []any{map[string]any{"kind": "data"}}}, "needs data"},
		{"negative ttl", map[string]any{"to": "texter", "text": "hi", "ttl_ms": -5}, "ttl_ms"},
		{"ttl too long", map[string]any{"to": "texter", "text": "hi", "ttl_ms": int64(30 * 24 * time.Hour / time.Millisecond)}, "ttl_ms"},
		{"content type refused", map[string]any{"to": "texter", "parts": []any{map[string]any{"kind": "image", "url": "https://x/y.png"}}}, "does not accept"},
		{"too large", map[string]any{"to": "texter", "text": "far more than ten bytes"}, "at most 10"},
		{"bad receiver id", map[string]any{"to": "no such/agent", "text": "hi"}, "not a valid agent id"},
		{"missing to", map[string]any{"text": "hi"}, "to"},
		{"conversation id with a NUL", map[string]any{"to": "texter", "text": "hi", "conversation_id": "c\x00"}, "invalid: conversation_id contains a NUL character"},
		{"conversation id too long", map[string]any{"to": "texter", "text": "hi", "conversation_id": strings.Repeat("c", core.MaxStoredText+1)}, "over the 1024 a store keeps"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := "m-" + strings.ReplaceAll(tc.name, " ", "-")
			tc.args["message_id"] = id
			res := e.call("send_message", tc.args, nil)
			if !res.IsError || !strings.Contains(resultText(res), tc.want) {
				t.Fatalf("isError=%v text=%q, want error containing %q", res.IsError, resultText(res), tc.want)
			}
			if strings.HasSuffix(resultText(res), ": invalid") {
				t.Errorf("text %q names its kind twice", resultText(res))
			}
			if _, err := e.hub.Store.GetReceipt(context.Background(), id); !errors.Is(err, core.ErrNotFound) {
				t.Fatalf("a refused message was stored: %v", err)
			}
		})
	}
}

func TestSendMessageIdempotent(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	w := startWorker(t, e.base, "once", nil, nil, nil, 0)
	var a, b mcpadapter.SendMessageOutput
	e.call("send_message", map[string]any{"to": "once", "text": "x", "message_id": "same-id"}, &a)
	e.call("send_message", map[string]any{"to": "once", "text": "x", "message_id": "same-id"}, &b)
	if a.Duplicate || !b.Duplicate || b.MessageID != "same-id" {
		t.Fatalf("first %+v second %+v", a, b)
	}
	waitfor.Recv(t, "the worker to receive same-id", w.received)
	if rc, err := e.hub.Relay.WaitReceiptFor(ctxTimeout(t), core.AdminPrincipal(), "same-id"); err != nil || rc.Attempts != 1 {
		t.Fatalf("receipt of same-id: %+v %v, want delivered in one attempt", rc, err)
	}
	select {
	case m := <-w.received:
		if m["type"] != "task.result" {
			t.Fatalf("delivered twice: %v", m)
		}
	default:
	}
}

func TestGetReceipt(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	startWorker(t, e.base, "w", nil, nil, nil, 0)
	var sent mcpadapter.SendMessageOutput
	e.call("send_message", map[string]any{"to": "w", "text": "x"}, &sent)
	rc, err := e.hub.Relay.WaitReceiptFor(ctxTimeout(t), core.AdminPrincipal(), sent.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	var v mcpadapter.ReceiptView
	if res := e.call("get_receipt", map[string]any{"message_id": sent.MessageID}, &v); res.IsError {
		t.Fatal(resultText(res))
	}
	if v.Status != string(rc.Status) || v.Status != "delivered" || !v.Terminal || len(v.History) < 2 || v.Attempts != 1 {
		t.Fatalf("receipt = %+v", v)
	}
	if reply, _ := v.Reply.(map[string]any); reply["status"] != "accepted" || reply["handled_by"] != "w" {
		t.Fatalf("reply = %v", v.Reply)
	}
	for _, id := range []string{"", "unknown"} {
		if res := e.call("get_receipt", map[string]any{"message_id": id}, nil); !res.IsError {
			t.Errorf("%q: want isError", id)
		}
	}
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestWaitForReplyOutcomes(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	never := make(chan struct{}) // this worker never replies
	t.Cleanup(func() { close(never) })
	startWorker(t, e.base, "silent", nil, nil, never, 0)
	startWorker(t, e.base, "grumpy", nil, nil, nil, http.StatusBadRequest)

	t.Run("timeout", func(t *testing.T) {
		var sent mcpadapter.SendMessageOutput
		e.call("send_message", map[string]any{"to": "silent", "text": "x"}, &sent)
		var out mcpadapter.WaitOutput
		if res := e.call("wait_for_reply", map[string]any{"message_id": sent.MessageID, "timeout_ms": 50}, &out); res.IsError {
			t.Fatal(resultText(res))
		}
		if out.Outcome != mcpadapter.OutcomeTimeout || out.Reply != nil {
			t.Fatalf("out = %+v", out)
		}
	})
	t.Run("undeliverable", func(t *testing.T) {
		var sent mcpadapter.SendMessageOutput
		e.call("send_message", map[string]any{"to": "grumpy", "text": "x"}, &sent)
		var out mcpadapter.WaitOutput
		if res := e.call("wait_for_reply", map[string]any{"message_id": sent.MessageID, "timeout_ms": 60000}, &out); res.IsError {
			t.Fatal(resultText(res))
		}
		if out.Outcome != mcpadapter.OutcomeUndeliverable || out.Receipt == nil || out.Receipt.Status != "rejected" {
			t.Fatalf("out = %+v", out)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, args := range []map[string]any{{"message_id": "nope"}, {"timeout_ms": -1}} {
			if res := e.call("wait_for_reply", args, nil); !res.IsError {
				t.Errorf("%v: want isError", args)
			}
		}
	})
	t.Run("queue", func(t *testing.T) {
		// Without message_id: the next message addressed to the host, sent
		// by an ATP agent.
		done := make(chan mcpadapter.WaitOutput, 1)
		go func() {
			var out mcpadapter.WaitOutput
			res, err := e.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "wait_for_reply",
				Arguments: map[string]any{"timeout_ms": 60000}, Meta: sdk.Meta{"progressToken": "q"}})
			if err == nil && !res.IsError {
				b, _ := json.Marshal(res.StructuredContent)
				_ = json.Unmarshal(b, &out)
			}
			done <- out
		}()
		<-e.progress // the wait has started (and the host agent exists)
		code := postJSON(t, e.base+"/atp/send", map[string]any{"sender": "silent", "receiver": "mcp-host", "type": "note",
			"payload": map[string]any{"text": "psst"}}, nil)
		if code != http.StatusOK {
			t.Fatalf("atp send: %d", code)
		}
		out := <-done
		if out.Outcome != mcpadapter.OutcomeReply || out.Reply == nil || out.Reply.Text != "psst" || out.Reply.Sender != "silent" {
			t.Fatalf("out = %+v", out)
		}
	})
}

func TestWaitForReplyCancellation(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	startWorker(t, e.base, "slow", nil, nil, never, 0)
	var sent mcpadapter.SendMessageOutput
	e.call("send_message", map[string]any{"to": "slow", "text": "x"}, &sent)

	handlerDone := make(chan error, 1)
	e.srv.SDK().AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" {
				// A tool handler's error becomes an isError result.
				if r, ok := res.(*sdk.CallToolResult); ok && err == nil && r.IsError && strings.Contains(resultText(r), context.Canceled.Error()) {
					err = context.Canceled
				}
				handlerDone <- err
			}
			return res, err
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	callErr := make(chan error, 1)
	go func() {
		_, err := e.cs.CallTool(ctx, &sdk.CallToolParams{Name: "wait_for_reply",
			Arguments: map[string]any{"message_id": sent.MessageID, "timeout_ms": 600000},
			Meta:      sdk.Meta{"progressToken": 7}})
		callErr <- err
	}()
	<-e.progress // the server is waiting
	cancel()
	if err := <-callErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	if err := <-handlerDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("server handler ended with %v, want context.Canceled", err)
	}
}

func TestConversations(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	startWorker(t, e.base, "chatty", nil, nil, nil, 0)
	var sent mcpadapter.SendMessageOutput
	e.call("send_message", map[string]any{"to": "chatty", "text": "first", "conversation_id": "c-42"}, &sent)
	var w mcpadapter.WaitOutput
	e.call("wait_for_reply", map[string]any{"message_id": sent.MessageID}, &w)
	if w.Outcome != mcpadapter.OutcomeReply {
		t.Fatalf("wait = %+v", w)
	}
	var list mcpadapter.ListConversationsOutput
	if res := e.call("list_conversations", map[string]any{}, &list); res.IsError {
		t.Fatal(resultText(res))
	}
	if len(list.Conversations) != 1 || list.Conversations[0].ConversationID != "c-42" || list.Conversations[0].MessageCount != 2 {
		t.Fatalf("list = %+v", list)
	}
	var conv mcpadapter.ConversationOutput
	if res := e.call("get_conversation", map[string]any{"conversation_id": "c-42"}, &conv); res.IsError {
		t.Fatal(resultText(res))
	}
	if len(conv.Messages) != 2 || conv.Messages[0].Text != "first" || conv.Messages[1].Text != "done: first" ||
		len(conv.Conversation.Participants) != 2 {
		t.Fatalf("conversation = %+v", conv)
	}
	var page mcpadapter.ConversationOutput
	e.call("get_conversation", map[string]any{"conversation_id": "c-42", "after_seq": conv.Messages[0].Seq}, &page)
	if len(page.Messages) != 1 || page.Messages[0].MessageID != conv.Messages[1].MessageID {
		t.Fatalf("page = %+v", page)
	}
	for _, args := range []map[string]any{{"conversation_id": "none"}, {"conversation_id": ""}, {"conversation_id": "c-42", "after_seq": -1}} {
		if res := e.call("get_conversation", args, nil); !res.IsError {
			t.Errorf("%v: want isError", args)
		}
	}
	var all mcpadapter.ListConversationsOutput
	if res := e.call("list_conversations", map[string]any{"agent_id": "*"}, &all); res.IsError || len(all.Conversations) != 1 {
		t.Fatalf("all = %+v %s", all, resultText(res))
	}
}

// TestToolSchemasPortable: no tool schema uses a construct the MCP
// Inspector flags as unportable — a "type" that is an array, or a schema
// that says nothing of its value (the Inspector CLI's --strict check; the
// interop lane runs the Inspector itself).
func TestToolSchemasPortable(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{AMP: amp.New(amp.NewMemoryStore())})
	var check func(path string, v any)
	check = func(path string, v any) {
		s, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: schema %T is not an object", path, v)
			return
		}
		if _, many := s["type"].([]any); many {
			t.Errorf("%s: type is an array: %v", path, s["type"])
		}
		if s["type"] == nil && s["anyOf"] == nil && s["$ref"] == nil && s["enum"] == nil && s["const"] == nil {
			t.Errorf("%s: the schema constrains nothing: %v", path, s)
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for k, p := range props {
				check(path+".properties."+k, p)
			}
		}
		for _, k := range []string{"items", "additionalProperties"} {
			if sub, ok := s[k].(map[string]any); ok {
				check(path+"."+k, sub)
			}
		}
		if branches, ok := s["anyOf"].([]any); ok {
			for i, b := range branches {
				check(fmt.Sprintf("%s.anyOf[%d]", path, i), b)
			}
		}
	}
	n := 0
	for tool, err := range e.cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		for name, sch := range map[string]any{"inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema} {
			b, _ := json.Marshal(sch)
			var v any
			_ = json.Unmarshal(b, &v)
			check(tool.Name+"."+name, v)
		}
	}
	if n < 10 {
		t.Fatalf("%d tools", n)
	}
}
