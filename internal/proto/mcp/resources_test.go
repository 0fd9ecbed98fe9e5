package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

func TestResourcesListAndRead(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	ctx := context.Background()
	startWorker(t, e.base, "alpha", []string{"a"}, nil, nil, 0)
	var uris, templates []string
	for r, err := range e.cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	for r, err := range e.cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates = append(templates, r.URITemplate)
	}
	if strings.Join(sorted(uris), " ") != "switchboard://agents switchboard://conversations" ||
		strings.Join(sorted(templates), " ") != "switchboard://agents/{id} switchboard://conversations/{id}" {
		t.Fatalf("resources %v templates %v", uris, templates)
	}

	read := func(uri string, out any) error {
		res, err := e.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			return err
		}
		if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" || res.Contents[0].URI != uri {
			t.Fatalf("%s: contents %+v", uri, res.Contents)
		}
		return json.Unmarshal([]byte(res.Contents[0].Text), out)
	}
	var agents struct{ Agents []mcpadapter.AgentView }
	if err := read("switchboard://agents", &agents); err != nil || len(agents.Agents) != 1 || agents.Agents[0].AgentID != "alpha" {
		t.Fatalf("agents = %+v, %v", agents, err)
	}
	var one mcpadapter.AgentView
	if err := read("switchboard://agents/alpha", &one); err != nil || one.AgentID != "alpha" || one.Card == nil {
		t.Fatalf("agent = %+v, %v", one, err)
	}

	var sent mcpadapter.SendMessageOutput
	e.call("send_message", map[string]any{"to": "alpha", "text": "hi", "conversation_id": "room 1"}, &sent)
	var conv mcpadapter.ConversationOutput
	if err := read(mcpadapter.ConversationURI("room 1"), &conv); err != nil || conv.Conversation.ConversationID != "room 1" || len(conv.Messages) == 0 {
		t.Fatalf("conversation = %+v, %v", conv, err)
	}
	var convs struct{ Conversations []mcpadapter.ConversationView }
	if err := read("switchboard://conversations", &convs); err != nil || len(convs.Conversations) != 1 {
		t.Fatalf("conversations = %+v, %v", convs, err)
	}

	for _, uri := range []string{"switchboard://agents/ghost", "switchboard://conversations/none", "switchboard://nothing"} {
		var we *jsonrpc.Error
		if err := read(uri, &one); !errors.As(err, &we) {
			t.Errorf("%s: err = %v, want a JSON-RPC error", uri, err)
		}
	}
}

func TestResourceSubscriptions(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	ctx := context.Background()
	startWorker(t, e.base, "beta", nil, nil, nil, 0)
	e.call("send_message", map[string]any{"to": "beta", "text": "x", "conversation_id": "c1"}, nil)
	for _, uri := range []string{"switchboard://agents", "switchboard://agents/beta", mcpadapter.ConversationURI("c1")} {
		if err := e.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	// Under the legacy protocol resources/subscribe refuses URIs that are
	// not ours, and resources the caller may not read (here, ones that do
	// not exist); under 2026-07-28 subscriptions/listen has no error to
	// give back through the SDK's client.
	if v := e.cs.InitializeResult().ProtocolVersion; v < mcpadapter.StatelessVersion {
		for _, uri := range []string{"test://elsewhere", "switchboard://agents/nobody", mcpadapter.ConversationURI("nothing")} {
			if err := e.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err == nil {
				t.Fatalf("subscribing to %s: want an error", uri)
			}
		}
	}
	startWorker(t, e.base, "gamma", nil, nil, nil, 0)
	e.waitUpdate("switchboard://agents")
	e.call("send_message", map[string]any{"to": "beta", "text": "y", "conversation_id": "c1"}, nil)
	e.waitUpdate(mcpadapter.ConversationURI("c1"))
	if err := e.cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: "switchboard://agents"}); err != nil {
		t.Fatal(err)
	}
}

func TestParseURI(t *testing.T) {
	tests := []struct {
		uri  string
		kind mcpadapter.ResourceKind
		id   string
		ok   bool
	}{
		{"switchboard://agents", mcpadapter.ResourceAgents, "", true},
		{"switchboard://conversations", mcpadapter.ResourceConversations, "", true},
		{"switchboard://agents/w-1", mcpadapter.ResourceAgent, "w-1", true},
		{"switchboard://conversations/a%20b", mcpadapter.ResourceConversation, "a b", true},
		{"switchboard://agents/", 0, "", false},
		{"switchboard://agents/a/b", 0, "", false},
		{"switchboard://agents/bad%2", 0, "", false},
		{"switchboard://agents/-x", 0, "", false},
		{"switchboard://other/x", 0, "", false},
		{"http://agents/x", 0, "", false},
	}
	for _, tc := range tests {
		kind, id, err := mcpadapter.ParseURI(tc.uri)
		if (err == nil) != tc.ok || kind != tc.kind || id != tc.id {
			t.Errorf("ParseURI(%q) = %v, %q, %v", tc.uri, kind, id, err)
		}
		if err != nil && !errors.Is(err, mcpadapter.ErrBadURI) {
			t.Errorf("ParseURI(%q): error %v is not ErrBadURI", tc.uri, err)
		}
	}
	if got := mcpadapter.ConversationURI("a b/c"); got != "switchboard://conversations/a%20b%2Fc" {
		t.Fatalf("ConversationURI = %q", got)
	}
}

func TestDelegateTaskPrompt(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	ctx := context.Background()
	startWorker(t, e.base, "translator", []string{"translate"}, map[string]any{"name": "Translator"}, nil, 0)
	var names []string
	for p, err := range e.cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "delegate_task" {
		t.Fatalf("prompts = %v", names)
	}
	res, err := e.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "delegate_task",
		Arguments: map[string]string{"capability": "translate", "task": "say hello in French"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 {
		t.Fatalf("messages = %+v", res.Messages)
	}
	card, ok := res.Messages[0].Content.(*sdk.EmbeddedResource)
	if !ok || card.Resource.URI != "switchboard://agents/translator" || !strings.Contains(card.Resource.Text, "Translator") {
		t.Fatalf("first message = %+v", res.Messages[0].Content)
	}
	text := res.Messages[1].Content.(*sdk.TextContent).Text
	for _, want := range []string{`to="translator"`, "say hello in French", "wait_for_reply"} {
		if !strings.Contains(text, want) {
			t.Errorf("prompt text lacks %q:\n%s", want, text)
		}
	}
	for _, args := range []map[string]string{
		{"capability": "fly", "task": "x"},
		{"capability": "translate"},
		{"capability": "translate", "task": "x", "agent_id": "ghost"},
	} {
		var we *jsonrpc.Error
		if _, err := e.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "delegate_task", Arguments: args}); !errors.As(err, &we) {
			t.Errorf("%v: err = %v, want a JSON-RPC error", args, err)
		}
	}
}

func TestCompletion(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{})
	ctx := context.Background()
	for _, a := range []struct{ id, cap string }{{"tr-1", "translate"}, {"tr-2", "transcribe"}, {"sum", "summarize"}} {
		if _, _, err := e.hub.Relay.RegisterAs(ctx, core.AdminPrincipal(), &core.Agent{ID: a.id, Capabilities: []string{a.cap}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(ref *sdk.CompleteReference, name, value string) []string {
		res, err := e.cs.Complete(ctx, &sdk.CompleteParams{Ref: ref, Argument: sdk.CompleteParamsArgument{Name: name, Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Completion.Values
	}
	prompt := &sdk.CompleteReference{Type: "ref/prompt", Name: "delegate_task"}
	if got := complete(prompt, "capability", "tra"); strings.Join(got, ",") != "transcribe,translate" {
		t.Fatalf("capabilities = %v", got)
	}
	if got := complete(&sdk.CompleteReference{Type: "ref/resource", URI: "switchboard://agents/{id}"}, "id", "tr"); strings.Join(got, ",") != "tr-1,tr-2" {
		t.Fatalf("agent ids = %v", got)
	}
	if got := complete(prompt, "task", ""); len(got) != 0 {
		t.Fatalf("task = %v", got)
	}
}

func TestAMP(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{AMP: amp.New(amp.NewMemoryStore())})
	ctx := context.Background()
	for _, uri := range []string{mcpadapter.AMPSpecURI, mcpadapter.AMPSpecAliasURI} {
		res, err := e.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		var doc amp.SpecDocument
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil || doc.Spec != "AMP/0.1" {
			t.Fatalf("%s: %+v, %v", uri, doc, err)
		}
	}
	var out mcpadapter.AMPTickOutput
	res := e.call("amp_tick", map[string]any{"session_id": "s1", "event": "UserPromptSubmit", "message": "I give up, this is impossible"}, &out)
	if res.IsError {
		t.Fatal(resultText(res))
	}
	if out.SessionID != "s1" || out.Envelope["spec"] != "AMP/0.1" {
		t.Fatalf("tick = %+v", out)
	}
	if res := e.call("amp_tick", map[string]any{"session_id": "s1", "event": "NoSuchEvent"}, nil); !res.IsError {
		t.Fatal("unknown event: want isError")
	}
	// Without an engine there is no amp_tick tool.
	plain := newEnv(t, hub.Options{}, mcpadapter.Options{})
	if _, err := plain.cs.CallTool(ctx, &sdk.CallToolParams{Name: "amp_tick"}); err == nil {
		t.Fatal("amp_tick without an engine: want a protocol error")
	}
}
