package atp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// trustHub is a hub with auth on and three registered pull agents.
type trustHub struct {
	h      *hub.Hub
	base   string
	tokens map[string]string
}

const adminToken = "sba_test-admin-token"

func newTrustHub(t *testing.T) *trustHub {
	t.Helper()
	h, base := hubtest.Start(t, hub.Options{})
	th := &trustHub{h: h, base: base, tokens: map[string]string{}}
	for _, id := range []string{"alice", "bob", "carol"} {
		th.tokens[id] = th.register(t, id)
	}
	return th
}

func (th *trustHub) register(t *testing.T, id string) string {
	t.Helper()
	r := call(t, "POST", th.base+"/atp/register", "", map[string]any{"agent_id": id})
	if r.status != 200 {
		t.Fatalf("register %s: %d %s", id, r.status, r.raw)
	}
	return r.body["token"].(string)
}

func (th *trustHub) send(t *testing.T, from, to, id string, extra map[string]any) resp {
	t.Helper()
	env := map[string]any{"message_id": id, "sender": from, "receiver": to, "type": "task", "payload": map[string]any{"text": id}}
	for k, v := range extra {
		env[k] = v
	}
	return call(t, "POST", th.base+"/atp/send", th.tokens[from], env)
}

// stored reports whether message id is in the store.
func (th *trustHub) stored(t *testing.T, id string) bool {
	t.Helper()
	_, err := th.h.Relay.ReceiptFor(context.Background(), core.AdminPrincipal(), id)
	return err == nil
}

// wantRefused checks a refusal's status and error code.
func wantRefused(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.status != status || r.body["error"] != code {
		t.Fatalf("got %d %s, want %d %s", r.status, r.raw, status, code)
	}
}

// TestTrustConversations: a non-member cannot join, read or write a
// conversation, and is answered as for one that does not exist.
func TestTrustConversations(t *testing.T) {
	th := newTrustHub(t)
	if r := th.send(t, "alice", "carol", "c-1", map[string]any{"conversation_id": "secret"}); r.status != 200 {
		t.Fatalf("member send: %d %s", r.status, r.raw)
	}
	// bob joins by sending in it: refused like an unknown conversation,
	// nothing stored, carol's queue untouched.
	r := th.send(t, "bob", "carol", "join-1", map[string]any{"conversation_id": "secret"})
	wantRefused(t, r, http.StatusNotFound, "conversation_not_found")
	if th.stored(t, "join-1") {
		t.Error("the refused message was stored")
	}
	// carol, a member by receiving, answers in it; alice pulls only that.
	if r := th.send(t, "carol", "alice", "c-2", map[string]any{"conversation_id": "secret"}); r.status != 200 {
		t.Fatalf("member (receiver) send: %d %s", r.status, r.raw)
	}
	got := call(t, "GET", th.base+"/atp/pending/carol", th.tokens["carol"], nil)
	if ms := got.body["messages"].([]any); len(ms) != 1 {
		t.Errorf("carol's queue holds %d messages, want alice's 1", len(ms))
	}
	// bob's reads of the conversation, through the core: the same answer
	// as for a conversation that does not exist.
	ctx := context.Background()
	bob := core.AgentPrincipal("bob", "")
	_, errSecret := th.h.Relay.ConversationMessages(ctx, bob, "secret", 0, 10)
	_, errNone := th.h.Relay.ConversationMessages(ctx, bob, "no-such", 0, 10)
	if errSecret == nil || errNone == nil || errSecret.Error() != strings.ReplaceAll(errNone.Error(), "no-such", "secret") {
		t.Errorf("non-member read %v, unknown read %v: want the same refusal", errSecret, errNone)
	}
}

// TestTrustNamespaces: remote-shaped and internal ids cannot be
// registered by callers; hidden agents are not listed.
func TestTrustNamespaces(t *testing.T) {
	th := newTrustHub(t)
	ctx := context.Background()
	internal := th.h.Relay.InternalID("a2a-push", "task", "cfg", "http://x")
	for _, c := range []struct {
		id, token     string
		status        int
		code          string
		registeredNow bool
	}{
		{"someone@partner.example", "", http.StatusForbidden, "reserved_id", false},
		{"someone@partner.example", "alice", http.StatusForbidden, "reserved_id", false},
		{internal, "", http.StatusBadRequest, "invalid_field", false},
		{"_mcp-operator.0123456789abcdef0123456789abcdef", "", http.StatusBadRequest, "invalid_field", false},
	} {
		t.Run(c.id, func(t *testing.T) {
			r := call(t, "POST", th.base+"/atp/register", th.tokens[c.token], map[string]any{"agent_id": c.id})
			wantRefused(t, r, c.status, c.code)
			if _, err := th.h.Relay.LookupAgent(ctx, core.AdminPrincipal(), c.id); err == nil {
				t.Error("the id was registered")
			}
		})
	}
	// The operator binds a remote id.
	if r := call(t, "POST", th.base+"/atp/register", adminToken, map[string]any{"agent_id": "someone@partner.example"}); r.status != 200 {
		t.Errorf("operator registering a remote id: %d %s", r.status, r.raw)
	}
	// A hidden agent of the hub's is in no listing and cannot be sent to.
	if _, _, err := th.h.Relay.RegisterAs(ctx, core.InternalPrincipal("test"), &core.Agent{ID: internal}, time.Minute); err != nil {
		t.Fatal(err)
	}
	list := call(t, "GET", th.base+"/atp/agents", th.tokens["alice"], nil)
	if _, ok := list.body[internal]; ok || list.status != 200 || len(list.body) != 4 {
		t.Errorf("listing: %d, %d agents, hidden listed: %v", list.status, len(list.body), ok)
	}
	wantRefused(t, call(t, "GET", th.base+"/atp/agents/"+internal, th.tokens["alice"], nil), http.StatusNotFound, "not_found")
	r := th.send(t, "alice", internal, "to-internal", nil)
	wantRefused(t, r, http.StatusNotFound, "unreachable")
	if th.stored(t, "to-internal") {
		t.Error("the message to the internal agent was stored")
	}
}

// TestTrustReregistration: an id deregistered and registered again by
// someone else sees nothing of the old identity.
func TestTrustReregistration(t *testing.T) {
	th := newTrustHub(t)
	th.send(t, "alice", "bob", "old-out", map[string]any{"conversation_id": "old-conv"})
	th.send(t, "bob", "alice", "old-in", map[string]any{"conversation_id": "old-conv"})
	oldToken := th.tokens["alice"]
	if r := call(t, "POST", th.base+"/atp/deregister", oldToken, map[string]any{"agent_id": "alice"}); r.status != 200 {
		t.Fatalf("deregister: %d %s", r.status, r.raw)
	}
	rc := call(t, "GET", th.base+"/atp/receipts/old-in", adminToken, nil)
	if rc.body["status"] != "rejected" || rc.body["code"] != float64(410) {
		t.Errorf("mail queued at the deregistration: %s, want rejected 410", rc.raw)
	}
	th.tokens["alice"] = th.register(t, "alice") // the squatter
	for _, c := range []struct{ name, method, path string }{
		{"receipt it sent", "GET", "/atp/receipts/old-out"},
		{"receipt it received", "GET", "/atp/receipts/old-in"},
		{"results", "GET", "/atp/results/old-out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantRefused(t, call(t, c.method, th.base+c.path, th.tokens["alice"], nil), http.StatusNotFound, "not_found")
		})
	}
	got := call(t, "GET", th.base+"/atp/pending/alice", th.tokens["alice"], nil)
	if ms, _ := got.body["messages"].([]any); got.status != 200 || len(ms) != 0 {
		t.Errorf("the new identity pulled %s", got.raw)
	}
	wantRefused(t, th.send(t, "alice", "bob", "new-in-old", map[string]any{"conversation_id": "old-conv"}), http.StatusNotFound, "conversation_not_found")
	wantRefused(t, call(t, "GET", th.base+"/atp/pending/alice", oldToken, nil), http.StatusUnauthorized, "unauthorized")
}

// TestTrustAnswers: only the receiver of M answers M.
func TestTrustAnswers(t *testing.T) {
	th := newTrustHub(t)
	th.send(t, "alice", "bob", "question", nil)
	for _, from := range []string{"carol", "alice"} { // a third agent, the sender itself
		r := th.send(t, from, "alice", "forged-"+from, map[string]any{"correlation_id": "question"})
		wantRefused(t, r, http.StatusForbidden, "not_answerable")
		if th.stored(t, "forged-"+from) {
			t.Errorf("the forged answer of %s was stored", from)
		}
	}
	wantRefused(t, th.send(t, "carol", "alice", "forged-unknown", map[string]any{"correlation_id": "never-sent"}), http.StatusForbidden, "not_answerable")
	res := call(t, "GET", th.base+"/atp/results/question", th.tokens["alice"], nil)
	if rs, _ := res.body["results"].([]any); len(rs) != 0 {
		t.Errorf("results after forged answers: %s", res.raw)
	}
	if r := th.send(t, "bob", "alice", "answer", map[string]any{"correlation_id": "question"}); r.status != 200 {
		t.Fatalf("the receiver's answer: %d %s", r.status, r.raw)
	}
	res = call(t, "GET", th.base+"/atp/results/question", th.tokens["alice"], nil)
	if rs, _ := res.body["results"].([]any); len(rs) != 1 {
		t.Errorf("results: %s, want bob's answer", res.raw)
	}
}

// TestTrustBrowserBodies: a body not declared JSON is refused 415 and
// registers nothing (a web page's cross-site form post).
func TestTrustBrowserBodies(t *testing.T) {
	th := newTrustHub(t)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		t.Run(ct, func(t *testing.T) {
			req, _ := http.NewRequest("POST", th.base+"/atp/register", strings.NewReader(`{"agent_id":"from-a-page"}`))
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
			if _, err := th.h.Relay.LookupAgent(context.Background(), core.AdminPrincipal(), "from-a-page"); err == nil {
				t.Error("the agent was registered")
			}
		})
	}
}
