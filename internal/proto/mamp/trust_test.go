package mamp_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proto/mamp"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// The trust model through MAMP: a hub with auth on, where an attacker
// holds nothing but an ordinary agent's credential. Each test is one class
// of attack; each checks the refusal and that nothing the attacker sent
// was stored or delivered.

const adminToken = "sba_test-admin-token"

// trustHub is a hub with auth on and MAMP agents alice and bob (with
// webhooks) and carol and mallory (pulling), each with its credential.
type trustHub struct {
	h      *hub.Hub
	c      client
	uri    func(string) string
	tokens map[string]string
	inbox  map[string]*inbox
}

func newTrustHub(t *testing.T, opt hub.Options) *trustHub {
	t.Helper()
	opt.Callbacks = ssrf.Policy{AllowLoopback: true}
	h, base := hubtest.Start(t, opt)
	host := h.Relay.Config().Host
	th := &trustHub{h: h, c: client{t: t, base: base}, uri: func(id string) string { return "agent://" + host + "/" + id },
		tokens: map[string]string{}, inbox: map[string]*inbox{}}
	for _, id := range []string{"alice", "bob", "carol", "mallory"} {
		endpoint := ""
		if id == "alice" || id == "bob" {
			th.inbox[id] = newInbox(t)
			endpoint = th.inbox[id].URL
		}
		th.tokens[id] = register(th.c, id, endpoint, nil)["token"].(string)
	}
	return th
}

// as is a client holding agent id's credential ("" for none).
func (th *trustHub) as(id string) client {
	if id == "admin" {
		return th.c.with(adminToken)
	}
	return th.c.with(th.tokens[id])
}

// send posts a message from one agent to another with its own credential.
func (th *trustHub) send(from, to, id string, e env) (int, map[string]any) {
	th.c.t.Helper()
	m := msg(id, th.uri(from), th.uri(to), "text of "+id)
	for k, v := range e {
		if k == "metadata" {
			for mk, mv := range v.(map[string]any) {
				m = m.meta(mk, mv)
			}
			continue
		}
		m = m.set(k, v)
	}
	return th.as(from).do("POST", "/mamp/v1/messages", m)
}

// stored reports whether message id is in the store.
func (th *trustHub) stored(t *testing.T, id string) bool {
	t.Helper()
	_, err := th.h.Relay.ReceiptFor(context.Background(), core.AdminPrincipal(), id)
	return err == nil
}

func wantRefused(t *testing.T, st int, out map[string]any, status int, code string) {
	t.Helper()
	if st != status || out["error"] != code {
		t.Fatalf("got %d %v, want %d %s", st, out, status, code)
	}
}

// TestTrustConversations: a non-member cannot join, read, page through or
// subscribe to a conversation, and is answered as for one that does not
// exist; nothing it sent is stored or delivered.
func TestTrustConversations(t *testing.T) {
	th := newTrustHub(t, hub.Options{})
	st, ack := th.send("alice", "bob", "c-1", nil)
	if st != 200 {
		t.Fatalf("member send: %d %v", st, ack)
	}
	conv := ack["conversation_id"].(string)
	th.inbox["bob"].next(t)

	unknown := func(path string) (int, map[string]any) { return th.as("mallory").do("GET", path, nil) }
	for _, c := range []struct{ name, path, other string }{
		{"history", "/mamp/v1/conversations/" + conv, "/mamp/v1/conversations/conv-none"},
		{"history after a seq", "/mamp/v1/conversations/" + conv + "?after=0&limit=5", "/mamp/v1/conversations/conv-none?after=0&limit=5"},
		{"subscribe", "/mamp/v1/conversations/" + conv + "/events", "/mamp/v1/conversations/conv-none/events"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, out := unknown(c.path)
			wantRefused(t, st, out, http.StatusNotFound, mamp.CodeConversationNotFound)
			st2, out2 := unknown(c.other)
			if st2 != st || strings.ReplaceAll(out2["message"].(string), "conv-none", conv) != out["message"] {
				t.Errorf("refusal %d %v differs from an unknown conversation's %d %v", st, out, st2, out2)
			}
		})
	}
	t.Run("anonymous", func(t *testing.T) {
		st, out := th.c.do("GET", "/mamp/v1/conversations/"+conv, nil)
		wantRefused(t, st, out, http.StatusUnauthorized, "unauthorized")
	})
	t.Run("another agent's list", func(t *testing.T) {
		st, out := th.as("mallory").do("GET", "/mamp/v1/conversations?agent="+th.uri("alice"), nil)
		wantRefused(t, st, out, http.StatusForbidden, "forbidden")
		st, out = th.as("mallory").do("GET", "/mamp/v1/conversations", nil)
		wantRefused(t, st, out, http.StatusForbidden, "forbidden")
	})
	t.Run("join by sending", func(t *testing.T) {
		for i, to := range []string{"bob", "alice", "carol"} {
			id := "join-" + to
			st, out := th.send("mallory", to, id, env{"conversation_id": conv})
			wantRefused(t, st, out, http.StatusNotFound, mamp.CodeConversationNotFound)
			if out["message"] != "Conversation "+conv+" not found" {
				t.Errorf("message %q, want the spec's", out["message"])
			}
			if th.stored(t, id) {
				t.Errorf("refused message %d was stored", i)
			}
		}
		th.inbox["bob"].none(t, 300*time.Millisecond)
		th.inbox["alice"].none(t, 0)
		if ms := th.as("carol").must("GET", "/mamp/v1/agents/carol/messages", nil)["messages"].([]any); len(ms) != 0 {
			t.Errorf("carol's inbox holds %v", ms)
		}
	})
	t.Run("join with a trace id", func(t *testing.T) {
		st, out := th.send("mallory", "bob", "join-trace", env{"conversation_id": conv, "metadata": map[string]any{"trace_id": "mine"}})
		wantRefused(t, st, out, http.StatusNotFound, mamp.CodeConversationNotFound)
	})
	// The member's view still has its two participants and one message.
	v := th.as("bob").must("GET", "/mamp/v1/conversations/"+conv, nil)
	if v["message_count"] != float64(1) || len(v["participants"].([]any)) != 2 {
		t.Errorf("conversation after the attempts: %v", v)
	}
	// bob, a member by receiving, continues it; his stream opens.
	if st, out := th.send("bob", "alice", "c-2", env{"conversation_id": conv}); st != 200 {
		t.Fatalf("member (receiver) send: %d %v", st, out)
	}
	stream := openStreamAs(t, th.as("bob"), conv)
	if m := stream.nextMessage(t); m.MessageID != "c-1" {
		t.Errorf("stream began with %s", m.MessageID)
	}
}

// openStreamAs opens a conversation's event stream with c's credential.
func openStreamAs(t *testing.T, c client, conv string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/mamp/v1/conversations/"+conv+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("stream = %d", resp.StatusCode)
	}
	s := &sse{events: make(chan [2]string, 64), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ": closed"):
				s.events <- [2]string{"closed", line}
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev != "":
				s.events <- [2]string{ev, data}
				ev, data = "", ""
			}
		}
	}()
	return s
}

// TestTrustNamespaces: remote-shaped ids are bound only by the operator
// or the hub's own remote registration; internal ids by nobody; a sender
// cannot speak as a remote agent; hidden agents are in no listing.
func TestTrustNamespaces(t *testing.T) {
	th := newTrustHub(t, hub.Options{})
	ctx := context.Background()
	for _, c := range []struct {
		name, as, id string
		status       int
		code         string
	}{
		{"remote URI, anonymous", "", "agent://partner.example/someone", 403, "reserved_id"},
		{"remote URI, an agent", "alice", "agent://partner.example/someone", 403, "reserved_id"},
		{"remote id, anonymous", "", "someone@partner.example", 403, "reserved_id"},
		{"remote id, an agent", "alice", "someone@partner.example", 403, "reserved_id"},
		{"internal id", "", "_mamp-cb.0123456789abcdef0123456789abcdef", 400, "invalid_field"},
		{"internal id by URI", "alice", "agent://" + th.h.Relay.Config().Host + "/_mamp-cb.0123456789abcdef0123456789abcdef", 400, "invalid_uri"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, out := th.as(c.as).do("POST", "/mamp/v1/agents", map[string]any{"agent_id": c.id, "endpoint_url": th.inbox["alice"].URL})
			wantRefused(t, st, out, c.status, c.code)
			for _, id := range []string{"someone@partner.example", "_mamp-cb.0123456789abcdef0123456789abcdef"} {
				if _, err := th.h.Relay.LookupAgent(ctx, core.AdminPrincipal(), id); err == nil {
					t.Errorf("%s was registered", id)
				}
			}
		})
	}
	t.Run("speaking as a remote agent", func(t *testing.T) {
		m := msg("as-remote", "agent://partner.example/someone", th.uri("bob"), "hi")
		st, out := th.as("alice").do("POST", "/mamp/v1/messages", m)
		wantRefused(t, st, out, http.StatusForbidden, "forbidden")
		if th.stored(t, "as-remote") {
			t.Error("stored")
		}
		th.inbox["bob"].none(t, 300*time.Millisecond)
	})
	t.Run("the operator binds a remote agent", func(t *testing.T) {
		out := th.as("admin").must("POST", "/mamp/v1/agents", map[string]any{"agent_id": "agent://partner.example/someone", "endpoint_url": th.inbox["alice"].URL})
		if out["id"] != "someone@partner.example" || out["token"] == nil {
			t.Errorf("operator registration: %v", out)
		}
	})
}

// TestTrustHidden: the callback agents MAMP makes for callback_url have
// internal ids that nobody can tell in advance, not even from the message
// id; they are in no listing, their cards are not found, and nobody can
// address them.
func TestTrustHidden(t *testing.T) {
	th := newTrustHub(t, hub.Options{})
	ctx := context.Background()
	cb := newInbox(t)
	st, ack := th.send("alice", "bob", "q-1", env{"callback_url": cb.URL})
	if st != 200 {
		t.Fatalf("send: %d %v", st, ack)
	}
	th.inbox["bob"].next(t)
	if st, out := th.send("bob", "alice", "a-1", env{"conversation_id": ack["conversation_id"], "correlation_id": "q-1"}); st != 200 {
		t.Fatalf("answer: %d %v", st, out)
	}
	copied := cb.next(t)
	if copied.CorrelationID != "q-1" {
		t.Fatalf("callback copy: %+v", copied)
	}
	u, err := mamp.ParseURI(copied.To)
	if err != nil {
		t.Fatal(err)
	}
	agent := u.ID
	if !strings.HasPrefix(agent, "_mamp-cb.") || !core.Hidden(agent) {
		t.Fatalf("callback agent %q is not an internal id", agent)
	}
	if agent == mamp.CallbackAgentID(th.h.Relay, "q-1") {
		t.Errorf("callback agent %q is derived from the message id alone", agent)
	}
	all, err := th.h.Relay.ListAgents(ctx, core.AdminPrincipal(), core.AgentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if !containsAgent(all, agent) {
		t.Fatalf("the operator does not see the callback agent")
	}
	list := th.as("carol").must("GET", "/mamp/v1/agents", nil)["agents"].([]any)
	if len(list) != 4 {
		t.Errorf("an agent lists %d agents, want the 4 registered", len(list))
	}
	for _, a := range list {
		if strings.Contains(a.(map[string]any)["agent_id"].(string), "_mamp-cb") {
			t.Errorf("listed: %v", a)
		}
	}
	for _, as := range []string{"", "carol"} {
		st, out := th.as(as).do("GET", "/mamp/v1/agents/"+agent+"/card", nil)
		wantRefused(t, st, out, http.StatusNotFound, "not_found")
	}
	st, out := th.send("carol", agent, "to-hidden", nil)
	wantRefused(t, st, out, http.StatusBadRequest, mamp.CodeInvalidURI)
	if th.stored(t, "to-hidden") {
		t.Error("a message to the hidden agent was stored")
	}
	cb.none(t, 300*time.Millisecond)
}

func containsAgent(list []*core.Agent, id string) bool {
	for _, a := range list {
		if a.ID == id {
			return true
		}
	}
	return false
}

// TestTrustReregistration: an id deregistered through MAMP and registered
// again by someone else sees nothing of the old identity; its queued mail
// ends as dead letters; the old credential acts no more.
func TestTrustReregistration(t *testing.T) {
	th := newTrustHub(t, hub.Options{})
	st, ack := th.send("alice", "carol", "old-out", nil)
	if st != 200 {
		t.Fatalf("send: %d %v", st, ack)
	}
	conv := ack["conversation_id"].(string)
	if st, out := th.send("alice", "carol", "old-queued", env{"conversation_id": conv}); st != 200 {
		t.Fatalf("send: %d %v", st, out)
	}
	oldToken := th.tokens["carol"]
	th.as("carol").must("DELETE", "/mamp/v1/agents/carol", nil)
	rc, err := th.h.Relay.ReceiptFor(context.Background(), core.AdminPrincipal(), "old-queued")
	if err != nil || rc.Status != core.StatusRejected || rc.Code != 410 {
		t.Errorf("mail queued at the deregistration: %+v %v, want rejected 410", rc, err)
	}
	th.tokens["carol"] = register(th.c, "carol", "", nil)["token"].(string) // the squatter
	st, out := th.as("carol").do("GET", "/mamp/v1/conversations/"+conv, nil)
	wantRefused(t, st, out, http.StatusNotFound, mamp.CodeConversationNotFound)
	if cs := th.as("carol").must("GET", "/mamp/v1/conversations?agent=carol", nil)["conversations"].([]any); len(cs) != 0 {
		t.Errorf("the new identity lists %v", cs)
	}
	if ms := th.as("carol").must("GET", "/mamp/v1/agents/carol/messages", nil)["messages"].([]any); len(ms) != 0 {
		t.Errorf("the new identity pulled %v", ms)
	}
	st, out = th.send("carol", "alice", "new-in-old", env{"conversation_id": conv})
	wantRefused(t, st, out, http.StatusNotFound, mamp.CodeConversationNotFound)
	st, out = th.c.with(oldToken).do("GET", "/mamp/v1/agents/carol/messages", nil)
	wantRefused(t, st, out, http.StatusUnauthorized, "unauthorized")
}

// TestTrustAnswers: only the receiver of M answers M, through MAMP and
// through another protocol dressing a message up as an answer.
func TestTrustAnswers(t *testing.T) {
	th := newTrustHub(t, hub.Options{})
	if st, out := th.send("bob", "alice", "question", nil); st != 200 {
		t.Fatalf("send: %d %v", st, out)
	}
	th.inbox["alice"].next(t)
	for _, from := range []string{"mallory", "bob"} { // a third agent, the sender itself
		id := "forged-" + from
		st, out := th.send(from, "bob", id, env{"correlation_id": "question"})
		wantRefused(t, st, out, http.StatusForbidden, "not_answerable")
		if th.stored(t, id) {
			t.Errorf("the forged answer of %s was stored", from)
		}
	}
	st, out := th.send("mallory", "bob", "forged-unknown", env{"correlation_id": "never-sent"})
	wantRefused(t, st, out, http.StatusForbidden, "not_answerable")
	th.inbox["bob"].none(t, 300*time.Millisecond)
	// The callback keys of metadata are not a way round: refused on MAMP…
	st, out = th.send("mallory", "bob", "forged-meta", env{"metadata": map[string]any{"mamp_callback_correlation_id": "question"}})
	wantRefused(t, st, out, http.StatusBadRequest, "invalid_field")
	// …and dropped when another protocol's sender sets them.
	res := th.as("mallory").must("POST", "/atp/send", map[string]any{"message_id": "forged-atp", "sender": "mallory", "receiver": "bob",
		"type": "result", "payload": map[string]any{"text": "trust me"},
		"metadata": map[string]any{"mamp_callback_correlation_id": "question", "mamp_callback_conversation_id": "conv-x"}})
	if res["status"] == nil {
		t.Fatalf("ATP send: %v", res)
	}
	got := th.inbox["bob"].next(t)
	if got.MessageID != "forged-atp" || got.CorrelationID != "" || got.ConversationID != "" ||
		got.Metadata["mamp_callback_correlation_id"] != nil || got.Metadata["mamp_callback_conversation_id"] != nil {
		t.Errorf("bob got %+v: a correlation the relay never accepted", got)
	}
	if rs, err := th.h.Relay.ResultsFor(context.Background(), core.AdminPrincipal(), "question", 0, 10); err != nil || len(rs) != 0 {
		t.Errorf("results after forged answers: %v %v", rs, err)
	}
	if st, out := th.send("alice", "bob", "answer", env{"correlation_id": "question"}); st != 200 {
		t.Fatalf("the receiver's answer: %d %v", st, out)
	}
	if got := th.inbox["bob"].next(t); got.CorrelationID != "question" {
		t.Errorf("bob got %+v", got)
	}
}

// TestTrustBrowserBodies: bodies not declared JSON are refused 415 and
// change nothing (a web page's cross-site form post).
func TestTrustBrowserBodies(t *testing.T) {
	th := newTrustHub(t, hub.Options{})
	body := `{"protocol":"mamp/1.0","message_id":"from-a-page","from":"` + th.uri("alice") + `","to":"` + th.uri("bob") +
		`","content":"hi","metadata":{"timestamp":"2026-01-01T00:00:00Z"}}`
	for _, c := range []struct{ path, body string }{
		{"/mamp/v1/messages", body},
		{"/mamp/v1/agents", `{"agent_id":"page-agent"}`},
	} {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
			t.Run(c.path+" "+ct, func(t *testing.T) {
				req, _ := http.NewRequest("POST", th.c.base+c.path, strings.NewReader(c.body))
				req.Header.Set("Authorization", "Bearer "+th.tokens["alice"])
				if ct != "" {
					req.Header.Set("Content-Type", ct)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusUnsupportedMediaType {
					t.Errorf("status %d, want 415", res.StatusCode)
				}
			})
		}
	}
	if th.stored(t, "from-a-page") {
		t.Error("the message was stored")
	}
	if _, err := th.h.Relay.LookupAgent(context.Background(), core.AdminPrincipal(), "page-agent"); err == nil {
		t.Error("the agent was registered")
	}
}

// TestUnstorableText: text the stores cannot keep (a NUL, a control
// character) is refused 400 invalid_field before anything is stored: no
// message, no conversation, no trace id.
func TestUnstorableText(t *testing.T) {
	th := newTrustHub(t, hub.Options{})
	_, ack := th.send("alice", "bob", "ok-1", nil)
	conv := ack["conversation_id"].(string)
	th.inbox["bob"].next(t)
	for _, c := range []struct {
		name string
		e    env
	}{
		{"trace_id", env{"metadata": map[string]any{"trace_id": "t\x00race"}}},
		{"trace_id in a conversation", env{"conversation_id": conv, "metadata": map[string]any{"trace_id": "t\x00race"}}},
		{"type", env{"metadata": map[string]any{"type": "ta\x00sk"}}},
		{"conversation_id", env{"conversation_id": "conv\x00x"}},
		{"correlation_id", env{"correlation_id": "ok\x001"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "nul-" + strings.ReplaceAll(c.name, " ", "-")
			st, out := th.send("alice", "bob", id, c.e)
			wantRefused(t, st, out, http.StatusBadRequest, "invalid_field")
			if th.stored(t, id) {
				t.Error("stored")
			}
		})
	}
	st, out := th.as("alice").do("POST", "/mamp/v1/messages", msg("nul\x00id", th.uri("alice"), th.uri("bob"), "hi"))
	wantRefused(t, st, out, http.StatusBadRequest, "invalid_field")
	cs, err := th.h.Relay.Conversations(context.Background(), core.AdminPrincipal(), "", 10)
	if err != nil || len(cs) != 1 {
		t.Errorf("conversations: %d %v, want the one of ok-1", len(cs), err)
	}
	th.inbox["bob"].none(t, 300*time.Millisecond)
}

// TestStreamsPerCaller: a caller holds at most the relay's MaxStreams
// conversation streams on an instance; one more ends its oldest, and
// other callers' streams are not touched.
func TestStreamsPerCaller(t *testing.T) {
	th := newTrustHub(t, hub.Options{Relay: core.Config{MaxStreams: 2}})
	_, ack := th.send("alice", "bob", "s-1", nil)
	conv := ack["conversation_id"].(string)
	other := openStreamAs(t, th.as("bob"), conv)
	var streams []*sse
	for range 3 {
		s := openStreamAs(t, th.as("alice"), conv)
		if m := s.nextMessage(t); m.MessageID != "s-1" {
			t.Fatalf("stream began with %s", m.MessageID)
		}
		streams = append(streams, s)
	}
	deadline := time.After(wait)
	for closed := false; !closed; {
		select {
		case e := <-streams[0].events:
			closed = e[0] == "closed" // status events of s-1 may come first
		case <-deadline:
			t.Fatal("the oldest stream was not ended")
		}
	}
	// The two newer ones, and bob's, still get what is sent.
	if st, out := th.send("bob", "alice", "s-2", env{"conversation_id": conv}); st != 200 {
		t.Fatalf("send: %d %v", st, out)
	}
	for i, s := range []*sse{streams[1], streams[2], other} {
		if i == 2 {
			s.nextMessage(t) // bob's stream first replays s-1
		}
		if m := s.nextMessage(t); m.MessageID != "s-2" {
			t.Errorf("stream %d got %s", i, m.MessageID)
		}
	}
}
