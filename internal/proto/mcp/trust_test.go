package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// trustHub is a hub with auth on (the default) and the agents alice, bob
// and carol registered over ATP as pull agents, each holding its token.
// Every attack goes through MCP with the official Go SDK's client over
// Streamable HTTP, as an MCP host holding an agent's token would.
type trustHub struct {
	t      *testing.T
	h      *hub.Hub
	base   string
	tokens map[string]string
}

const trustAdminToken = "sba_test-admin-token"

func newTrustHub(t *testing.T) *trustHub {
	t.Helper()
	h, base := hubtest.Start(t, hub.Options{})
	th := &trustHub{t: t, h: h, base: base, tokens: map[string]string{}}
	for _, id := range []string{"alice", "bob", "carol"} {
		th.tokens[id] = th.register(id)
	}
	return th
}

func (th *trustHub) register(id string) string {
	th.t.Helper()
	var reg struct{ Token string }
	if code := postJSON(th.t, th.base+"/atp/register", map[string]any{"agent_id": id}, &reg); code != http.StatusOK || reg.Token == "" {
		th.t.Fatalf("register %s: %d", id, code)
	}
	return reg.Token
}

// session connects an MCP client with token (and, when agent is set, the
// Switchboard-Agent header).
func (th *trustHub) session(token, agent string) *sdk.ClientSession {
	th.t.Helper()
	cs, err := th.connect(token, agent)
	if err != nil {
		th.t.Fatalf("connect: %v", err)
	}
	return cs
}

func (th *trustHub) connect(token, agent string) (*sdk.ClientSession, error) {
	hc := &http.Client{Transport: headers{"Authorization": "Bearer " + token, mcpadapter.AgentHeader: agent}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "attacker", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: th.base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err == nil {
		th.t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// headers adds headers (empty values are left out) to every request.
type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// as is an MCP session of agent id.
func (th *trustHub) as(id string) *sdk.ClientSession { return th.session(th.tokens[id], "") }

// stored reports whether message id was stored.
func (th *trustHub) stored(id string) bool {
	_, err := th.h.Relay.ReceiptFor(context.Background(), core.AdminPrincipal(), id)
	return err == nil
}

// queued is the depth of agent id's queue.
func (th *trustHub) queued(id string) int {
	n, err := th.h.Store.QueueDepth(context.Background(), id)
	if err != nil {
		th.t.Fatal(err)
	}
	return n
}

// refused calls a tool that must fail with a tool error starting with
// kind, and returns the error text.
func refused(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any, kind string) string {
	t.Helper()
	res := callTool(t, cs, tool, args, nil)
	text := resultText(res)
	if !res.IsError || !strings.HasPrefix(text, kind+":") {
		t.Fatalf("%s %v: isError=%v %q, want a %s refusal", tool, args, res.IsError, text, kind)
	}
	return text
}

// TestTrustConversations: a non-member cannot join, read, page, list,
// subscribe to or write into a conversation through MCP, and is answered
// as for a conversation that does not exist; nothing it sent is stored.
func TestTrustConversations(t *testing.T) {
	th := newTrustHub(t)
	alice, bob := th.as("alice"), th.as("bob")
	var sent mcpadapter.SendMessageOutput
	if res := callTool(t, alice, "send_message", map[string]any{"to": "carol", "text": "secret plan", "conversation_id": "secret"}, &sent); res.IsError {
		t.Fatal(resultText(res))
	}
	unknown := refused(t, bob, "get_conversation", map[string]any{"conversation_id": "no-such-conversation"}, "not_found")
	tests := []struct {
		name string
		tool string
		args map[string]any
	}{
		{"read", "get_conversation", map[string]any{"conversation_id": "secret"}},
		{"page", "get_conversation", map[string]any{"conversation_id": "secret", "after_seq": 0, "limit": 1}},
		{"join by sending", "send_message", map[string]any{"to": "carol", "text": "let me in", "conversation_id": "secret", "message_id": "join-1"}},
		{"join by sending to a member", "send_message", map[string]any{"to": "alice", "text": "hi", "conversation_id": "secret", "message_id": "join-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := refused(t, bob, tc.tool, tc.args, "not_found")
			if tc.tool == "get_conversation" && strings.ReplaceAll(text, "secret", "no-such-conversation") != unknown {
				t.Errorf("refusal %q differs from the unknown conversation's %q", text, unknown)
			}
		})
	}
	for _, id := range []string{"join-1", "join-2"} {
		if th.stored(id) {
			t.Errorf("%s was stored", id)
		}
	}
	if n := th.queued("carol"); n != 1 {
		t.Errorf("carol's queue holds %d messages, want alice's 1", n)
	}
	// Listing another agent's conversations, or all of them, is refused.
	refused(t, bob, "list_conversations", map[string]any{"agent_id": "alice"}, "forbidden")
	refused(t, bob, "list_conversations", map[string]any{"agent_id": "*"}, "forbidden")
	var mine mcpadapter.ListConversationsOutput
	callTool(t, bob, "list_conversations", map[string]any{}, &mine)
	if len(mine.Conversations) != 0 {
		t.Errorf("bob lists %+v", mine.Conversations)
	}
	// The resource and a subscription to it: refused as unknown.
	ctx := context.Background()
	if _, err := bob.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcpadapter.ConversationURI("secret")}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("read resource: %v", err)
	}
	for _, era := range []string{"2025-11-25", mcpadapter.StatelessVersion} {
		if body := th.subscribe(th.tokens["bob"], era, mcpadapter.ConversationURI("secret")); !strings.Contains(body, `"message":"Resource not found"`) {
			t.Errorf("%s: bob's subscription answered %s, want Resource not found", era, body)
		}
	}
	// A member's subscription is accepted.
	if body := th.subscribe(th.tokens["carol"], "2025-11-25", mcpadapter.ConversationURI("secret")); !strings.Contains(body, `"result":{}`) {
		t.Errorf("carol's subscription answered %s", body)
	}
	// The members still read it.
	var conv mcpadapter.ConversationOutput
	if res := callTool(t, th.as("carol"), "get_conversation", map[string]any{"conversation_id": "secret"}, &conv); res.IsError || len(conv.Messages) != 1 {
		t.Fatalf("carol reads: %s", resultText(res))
	}
}

// TestTrustIdentity: the host is the agent of its credential. Claiming
// another agent through the Switchboard-Agent header is refused; the
// operator acts as an internal id no agent can name, reach or list.
func TestTrustIdentity(t *testing.T) {
	th := newTrustHub(t)
	if _, err := th.connect(th.tokens["bob"], "alice"); err == nil {
		t.Fatal("bob's token acting as alice connected")
	}
	// The operator's session acts as the hub's internal operator id.
	op := th.session(trustAdminToken, "")
	var sent mcpadapter.SendMessageOutput
	if res := callTool(t, op, "send_message", map[string]any{"to": "alice", "text": "from the operator"}, &sent); res.IsError {
		t.Fatal(resultText(res))
	}
	if !strings.HasPrefix(sent.Sender, core.InternalPrefix+"mcp-operator.") || !core.Hidden(sent.Sender) {
		t.Fatalf("the operator acts as %q", sent.Sender)
	}
	// Hidden from agents in every listing; the operator sees it.
	bob := th.as("bob")
	var list mcpadapter.ListAgentsOutput
	callTool(t, bob, "list_agents", map[string]any{}, &list)
	for _, a := range list.Agents {
		if core.Hidden(a.AgentID) {
			t.Errorf("bob lists the hidden agent %s", a.AgentID)
		}
	}
	res, err := bob.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: mcpadapter.AgentsURI})
	if err != nil || strings.Contains(res.Contents[0].Text, sent.Sender) {
		t.Errorf("agents resource: %v, lists the operator: %v", err, err == nil && strings.Contains(res.Contents[0].Text, sent.Sender))
	}
	comp, err := bob.Complete(context.Background(), &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/resource", URI: mcpadapter.AgentURITemplate},
		Argument: sdk.CompleteParamsArgument{Name: "id", Value: "_"}})
	if err != nil || len(comp.Completion.Values) != 0 {
		t.Errorf("completion offers %v (%v)", comp, err)
	}
	var all mcpadapter.ListAgentsOutput
	callTool(t, op, "list_agents", map[string]any{}, &all)
	if !strings.Contains(agentIDs(all.Agents), sent.Sender) {
		t.Errorf("the operator does not see its own agent: %s", agentIDs(all.Agents))
	}
	// An agent cannot message the operator's id out of the blue (404,
	// as an unknown agent), but alice may answer what the operator sent
	// her, and the operator's wait_for_reply gets it.
	if code := postJSON(t, th.base+"/atp/send", map[string]any{"message_id": "probe", "sender": "bob", "receiver": sent.Sender,
		"type": "note", "payload": map[string]any{"text": "hi"}}, nil); code == http.StatusOK {
		t.Fatal("bob messaged the operator's internal id")
	}
	postWithToken(t, th.base+"/atp/send", th.tokens["alice"], map[string]any{"message_id": "answer-1", "sender": "alice",
		"receiver": sent.Sender, "type": "task.result", "correlation_id": sent.MessageID, "payload": map[string]any{"text": "yes, operator"}})
	var out mcpadapter.WaitOutput
	if res := callTool(t, op, "wait_for_reply", map[string]any{"message_id": sent.MessageID, "timeout_ms": 20000}, &out); res.IsError ||
		out.Outcome != mcpadapter.OutcomeReply || out.Reply.Text != "yes, operator" {
		t.Fatalf("operator's wait: %+v %s", out, resultText(res))
	}
	if th.stored("probe") {
		t.Error("the probe was stored")
	}
}

// subscribe subscribes to uri with token in protocol era and returns the
// answer's body (an accepted subscription stays open: the body read up
// to then, after at most two seconds).
func (th *trustHub) subscribe(token, era, uri string) string {
	th.t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + token}
	var body string
	if era == mcpadapter.StatelessVersion {
		hdr["Mcp-Protocol-Version"], hdr["Mcp-Method"] = era, "subscriptions/listen"
		body = `{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + era +
			`","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},` +
			`"notifications":{"resourceSubscriptions":["` + uri + `"]}}}`
	} else {
		resp := rawPost(th.t, th.base+"/mcp", initBody, hdr)
		resp.Body.Close()
		hdr["Mcp-Session-Id"], hdr["Mcp-Protocol-Version"] = resp.Header.Get("Mcp-Session-Id"), era
		rawPost(th.t, th.base+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr).Body.Close()
		body = `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, th.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		th.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func agentIDs(as []mcpadapter.AgentView) string {
	var ids []string
	for _, a := range as {
		ids = append(ids, a.AgentID)
	}
	return strings.Join(ids, ",")
}

// postWithToken posts v with a bearer token and fails the test unless
// the hub answers 200.
func postWithToken(t *testing.T, url, token string, v any) {
	t.Helper()
	hc := &http.Client{Transport: headers{"Authorization": "Bearer " + token}}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.NewReader(raw)
	resp, err := hc.Post(url, "application/json", b)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
}

// TestTrustAnswers: only the receiver of message M may answer it: a
// forged correlation_id, and a reply to a message someone else received,
// are refused and nothing is stored or delivered.
func TestTrustAnswers(t *testing.T) {
	th := newTrustHub(t)
	alice, bob := th.as("alice"), th.as("bob")
	var m mcpadapter.SendMessageOutput
	callTool(t, alice, "send_message", map[string]any{"to": "carol", "text": "question"}, &m)
	refused(t, bob, "send_message", map[string]any{"to": "alice", "text": "forged answer", "correlation_id": m.MessageID, "message_id": "forged-1"}, "forbidden")
	refused(t, bob, "reply", map[string]any{"message_id": m.MessageID, "text": "forged reply"}, "not_found")
	if th.stored("forged-1") || th.queued("alice") != 0 {
		t.Fatalf("a forged answer was stored (queued for alice: %d)", th.queued("alice"))
	}
	// alice waits and sees no answer; carol's real one arrives.
	var w mcpadapter.WaitOutput
	callTool(t, alice, "wait_for_reply", map[string]any{"message_id": m.MessageID, "timeout_ms": 50}, &w)
	if w.Outcome != mcpadapter.OutcomeTimeout {
		t.Fatalf("alice's wait: %+v", w)
	}
	var r mcpadapter.SendMessageOutput
	if res := callTool(t, th.as("carol"), "reply", map[string]any{"message_id": m.MessageID, "text": "answer"}, &r); res.IsError || r.Receiver != "alice" {
		t.Fatalf("carol's reply: %+v %s", r, resultText(res))
	}
	callTool(t, alice, "wait_for_reply", map[string]any{"message_id": m.MessageID, "timeout_ms": 20000}, &w)
	if w.Outcome != mcpadapter.OutcomeReply || w.Reply.Sender != "carol" || w.Reply.Text != "answer" {
		t.Fatalf("alice's wait: %+v", w)
	}
}

// TestTrustReadOthers: receipts, results, waits and queues of messages
// an agent neither sent nor received look as if they did not exist.
func TestTrustReadOthers(t *testing.T) {
	th := newTrustHub(t)
	alice, bob := th.as("alice"), th.as("bob")
	var m mcpadapter.SendMessageOutput
	callTool(t, alice, "send_message", map[string]any{"to": "carol", "text": "private"}, &m)
	unknown := refused(t, bob, "get_receipt", map[string]any{"message_id": "no-such-message"}, "not_found")
	got := refused(t, bob, "get_receipt", map[string]any{"message_id": m.MessageID}, "not_found")
	if strings.ReplaceAll(got, m.MessageID, "no-such-message") != unknown {
		t.Errorf("refusal %q differs from the unknown message's %q", got, unknown)
	}
	refused(t, bob, "wait_for_reply", map[string]any{"message_id": m.MessageID, "timeout_ms": 50}, "not_found")
	// bob's inbox is bob's: carol's message stays queued for her.
	var in mcpadapter.CheckInboxOutput
	callTool(t, bob, "check_inbox", map[string]any{}, &in)
	if in.AgentID != "bob" || len(in.Messages) != 0 || th.queued("carol") != 1 {
		t.Fatalf("bob's inbox %+v, carol's queue %d", in, th.queued("carol"))
	}
	var ack mcpadapter.AckMessagesOutput
	callTool(t, bob, "ack_messages", map[string]any{"message_ids": []string{m.MessageID}}, &ack)
	if ack.Acknowledged != 0 || th.queued("carol") != 1 {
		t.Fatalf("bob acknowledged carol's message: %+v, carol's queue %d", ack, th.queued("carol"))
	}
}

// TestTrustGenerations: an id deregistered and registered again is a new
// identity: through MCP it sees nothing of the old one's receipts,
// results or mail, and the old token is refused.
func TestTrustGenerations(t *testing.T) {
	th := newTrustHub(t)
	alice := th.as("alice")
	var m mcpadapter.SendMessageOutput
	callTool(t, alice, "send_message", map[string]any{"to": "carol", "text": "before"}, &m)
	var toAlice mcpadapter.SendMessageOutput
	callTool(t, th.as("carol"), "send_message", map[string]any{"to": "alice", "text": "queued mail"}, &toAlice)
	oldToken := th.tokens["alice"]
	req, _ := http.NewRequest(http.MethodDelete, th.base+"/atp/agents/alice", nil)
	req.Header.Set("Authorization", "Bearer "+oldToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("deregister: %v %v", err, resp)
	}
	resp.Body.Close()
	th.tokens["alice"] = th.register("alice")
	if _, err := th.connect(oldToken, ""); err == nil {
		t.Error("the old token still connects")
	}
	reborn := th.as("alice")
	refused(t, reborn, "get_receipt", map[string]any{"message_id": m.MessageID}, "not_found")
	refused(t, reborn, "wait_for_reply", map[string]any{"message_id": m.MessageID, "timeout_ms": 50}, "not_found")
	var in mcpadapter.CheckInboxOutput
	callTool(t, reborn, "check_inbox", map[string]any{}, &in)
	if len(in.Messages) != 0 {
		t.Fatalf("the new alice reads the old one's mail: %+v", in.Messages)
	}
}

// TestTrustBrowsers: /mcp refuses a cross-site browser request and a
// body that is not JSON; nothing is stored.
func TestTrustBrowsers(t *testing.T) {
	th := newTrustHub(t)
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},` +
			`"name":"send_message","arguments":{"to":"carol","text":"csrf","message_id":"` + id + `"}}}`
	}
	auth := "Bearer " + th.tokens["alice"]
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		ok   bool
	}{
		{"same-site JSON (control)", map[string]string{"Content-Type": "application/json"}, true},
		{"cross-site", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, false},
		{"text/plain form", map[string]string{"Content-Type": "text/plain"}, false},
	} {
		id := "csrf-" + strings.ReplaceAll(tc.name, " ", "-")
		req, _ := http.NewRequest(http.MethodPost, th.base+"/mcp", strings.NewReader(call(id)))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", auth)
		req.Header.Set("Mcp-Protocol-Version", mcpadapter.StatelessVersion)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "send_message")
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch {
		case tc.ok && (resp.StatusCode != http.StatusOK || !th.stored(id)):
			t.Errorf("%s: answered %d, stored %v; want 200 and stored", tc.name, resp.StatusCode, th.stored(id))
		case !tc.ok && (resp.StatusCode < 400 || resp.StatusCode >= 500 || th.stored(id)):
			t.Errorf("%s: answered %d, stored %v; want a 4xx and nothing stored", tc.name, resp.StatusCode, th.stored(id))
		}
	}
}
