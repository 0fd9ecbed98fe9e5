// Package security tries every attack of the hub's threat model
// (docs/security.md) on every ingress protocol — ATP, MAMP, A2A and MCP —
// against a real hub with authentication on, and checks that each is
// refused with the right status and that nothing was stored.
package security

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/clocktest"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
	"github.com/switchboard-hub/switchboard/webhooksig"
)

// The flood test's hub limits every credential (and every anonymous
// address) to rate requests per second with a burst of burst; the operator
// is not limited, so the fixture registers agents with the admin token. The
// attack suite's hub has a limit high enough not to interfere.
const (
	rate  = 20
	burst = 40
	// oversized is larger than the hub's default 1 MiB body limit.
	oversized = 3 << 19
)

// fixture is the hub under attack and the agents on it.
type fixture struct {
	t    *testing.T
	h    *hub.Hub
	base string
	tok  map[string]string
	// Set up by the legitimate traffic the attacks aim at.
	convAB  string // a MAMP conversation between alice and bob
	taskAB  string // an A2A task alice created at bob
	taskPin string // a second task, for the push-to-loopback attack
	mcpMsg  string // a message alice sent bob over MCP
}

type resp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// do sends one request; body is raw bytes, a string, or a value encoded as
// JSON. hdr is pairs of header names and values.
func (f *fixture) do(method, path, token string, body any, hdr ...string) resp {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, f.base+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

// snap counts everything an attack could leave behind.
type snap struct {
	agents, queued, tasks, pushes, convs, callbacks, creds, dead int
}

func (f *fixture) snap() snap {
	f.t.Helper()
	ctx := context.Background()
	st := f.h.Store
	agents, err := st.ListAgents(ctx, core.AgentFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	s := snap{agents: len(agents)}
	for _, a := range agents {
		n, err := st.QueueDepth(ctx, a.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		s.queued += n
	}
	count := func(kind string) int {
		recs, err := st.ListRecords(ctx, kind, "", 100000)
		if err != nil {
			f.t.Fatal(err)
		}
		return len(recs)
	}
	s.tasks, s.pushes, s.callbacks, s.creds = count(a2a.KindTask), count("a2a_push"), count("mamp.callback"), count("credential")
	cs, err := st.ListConversations(ctx, "", 100000)
	if err != nil {
		f.t.Fatal(err)
	}
	s.convs = len(cs)
	dl, err := st.DeadLetters(ctx, core.DeadLetterFilter{Limit: 100000})
	if err != nil {
		f.t.Fatal(err)
	}
	s.dead = len(dl)
	return s
}

// absent fails unless no message with one of ids is stored.
func (f *fixture) absent(ids ...string) {
	f.t.Helper()
	for _, id := range ids {
		if m, err := f.h.Store.GetMessage(context.Background(), id); !errors.Is(err, core.ErrNotFound) {
			f.t.Fatalf("message %s of a refused request was stored: %+v %v", id, m, err)
		}
	}
}

func (f *fixture) uri(id string) string { return f.h.Relay.URI(id) }

func expect(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("answered %d, want %d: %s", r.status, status, r.raw)
	}
	if code != "" && r.body["error"] != code {
		t.Fatalf("error code %v, want %q: %s", r.body["error"], code, r.raw)
	}
}

func atpMsg(id, sender, receiver string) map[string]any {
	return map[string]any{"atp_version": "1.0", "message_id": id, "sender": sender, "receiver": receiver,
		"type": "task.request", "payload": map[string]any{"text": "hello"}}
}

func (f *fixture) mampMsg(id, from, to string) map[string]any {
	return map[string]any{"protocol": "mamp/1.0", "message_id": id, "from": f.uri(from), "to": f.uri(to),
		"content": "hello", "metadata": map[string]any{"timestamp": time.Now().UTC().Format(time.RFC3339)}}
}

// a2aCall posts one A2A 1.0 JSON-RPC call to /a2a/{agent}.
func (f *fixture) a2aCall(agent, token, method string, params any) resp {
	f.t.Helper()
	return f.do("POST", "/a2a/"+agent, token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
		"A2A-Version", "1.0")
}

func a2aSend(id, taskID string, meta map[string]any) map[string]any {
	m := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hello"}}}
	if taskID != "" {
		m["taskId"] = taskID
	}
	if meta != nil {
		m["metadata"] = meta
	}
	return map[string]any{"message": m, "configuration": map[string]any{"returnImmediately": true}}
}

// rpcError returns the JSON-RPC error code of an answer (0 if none).
func rpcError(r resp) int {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

func rpcTask(t *testing.T, r resp) map[string]any {
	t.Helper()
	res, _ := r.body["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	if r.status != 200 || task == nil {
		t.Fatalf("A2A SendMessage: %d %s", r.status, r.raw)
	}
	return task
}

// bearer adds a bearer token to every request of an MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the go-sdk MCP client with token.
func (f *fixture) mcpSession(token string) (*sdk.ClientSession, error) {
	hc := &http.Client{Transport: bearer{token}, Timeout: 30 * time.Second}
	return sdk.NewClient(&sdk.Implementation{Name: "attacker", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: f.base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
}

func (f *fixture) mustSession(token string) *sdk.ClientSession {
	f.t.Helper()
	cs, err := f.mcpSession(token)
	if err != nil {
		f.t.Fatalf("MCP connect: %v", err)
	}
	f.t.Cleanup(func() { cs.Close() })
	return cs
}

// tool calls an MCP tool; a protocol error and a tool error both count as
// refusals, returned as err.
func tool(cs *sdk.ClientSession, name string, args map[string]any, out any) error {
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return fmt.Errorf("tool error: %s", b.String())
	}
	if out != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		return json.Unmarshal(raw, out)
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "sbk_" + hex.EncodeToString(b)
}

// loopbackName returns a host name (not "localhost" or a *.localhost name,
// which the hub treats as loopback literals) that resolves only to loopback
// addresses here, so that the connect-time SSRF guard is what must refuse
// it.
func loopbackName(t *testing.T) string {
	t.Helper()
	cands := []string{"ip6-localhost", "ip6-loopback"}
	if h, err := os.Hostname(); err == nil {
		cands = append(cands, h)
	}
	cands = append(cands, "vm", "runsc")
	for _, c := range cands {
		if l := strings.ToLower(c); l == "localhost" || strings.HasSuffix(l, ".localhost") {
			continue
		}
		addrs, err := net.DefaultResolver.LookupIPAddr(context.Background(), c)
		if err != nil || len(addrs) == 0 {
			continue
		}
		all := true
		for _, a := range addrs {
			all = all && a.IP.IsLoopback()
		}
		if all {
			return c
		}
	}
	t.Fatalf("no host name among %v resolves only to loopback on this machine; the DNS-to-loopback SSRF case cannot run (add one to /etc/hosts on the CI runner)", cands)
	return ""
}

// recorder is a loopback HTTP server counting the requests it gets; the
// hub must never reach it (its SSRF policy refuses loopback).
func recorder(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// setup registers the agents and the legitimate traffic the attacks aim
// at: every protocol's happy path must work, or the refusals prove nothing.
func setup(t *testing.T, rate float64, burst int) *fixture {
	return setupWith(t, hub.Options{RateLimit: rate, RateBurst: burst})
}

// setupWith is setup with a hub started with opt.
func setupWith(t *testing.T, opt hub.Options) *fixture {
	h, base := hubtest.Start(t, opt)
	f := &fixture{t: t, h: h, base: base, tok: map[string]string{}}
	for _, id := range []string{"alice", "bob", "carol", "flood-atp", "flood-mamp", "flood-a2a", "flood-mcp"} {
		r := f.do("POST", "/atp/register", h.AdminToken, map[string]any{"agent_id": id, "lease_seconds": 3600})
		tok, _ := r.body["token"].(string)
		if r.status != 200 || !strings.HasPrefix(tok, "sbk_") {
			t.Fatalf("register %s: %d %s", id, r.status, r.raw)
		}
		f.tok[id] = tok
	}
	expect(t, f.do("POST", "/atp/send", f.tok["alice"], atpMsg("ok-atp", "alice", "bob")), 200, "")
	r := f.do("POST", "/mamp/v1/messages", f.tok["alice"], f.mampMsg("ok-mamp", "alice", "bob"))
	expect(t, r, 200, "")
	f.convAB, _ = r.body["conversation_id"].(string)
	f.taskAB, _ = rpcTask(t, f.a2aCall("bob", f.tok["alice"], "SendMessage", a2aSend("ok-a2a", "", nil)))["id"].(string)
	f.taskPin, _ = rpcTask(t, f.a2aCall("bob", f.tok["alice"], "SendMessage", a2aSend("ok-a2a-2", "", nil)))["id"].(string)
	var sent mcpadapter.SendMessageOutput
	if err := tool(f.mustSession(f.tok["alice"]), "send_message", map[string]any{"to": "bob", "text": "hello", "message_id": "ok-mcp"}, &sent); err != nil || sent.Sender != "alice" {
		t.Fatalf("MCP send as alice: %+v %v", sent, err)
	}
	f.mcpMsg = sent.MessageID
	if f.convAB == "" || f.taskAB == "" || f.taskPin == "" {
		t.Fatalf("setup incomplete: %+v", f)
	}
	return f
}

// attack is one attack on one protocol. stores is set for the few attacks
// whose refusal comes after something legitimate was stored (the hub
// cannot know a name resolves to loopback before it connects).
type attack struct {
	proto, name string
	stores      bool
	run         func(t *testing.T, f *fixture)
}

// TestAttacks is the security suite: each attack on each protocol, refused
// with the right status, and nothing stored.
func TestAttacks(t *testing.T) {
	f := setup(t, 1000, 1000)
	for _, a := range attacks() {
		t.Run(a.proto+"/"+a.name, func(t *testing.T) {
			f.t = t
			before := f.snap()
			a.run(t, f)
			if after := f.snap(); !a.stores && after != before {
				t.Fatalf("a refused attack changed the store: before %+v, after %+v", before, after)
			}
		})
	}
}

func attacks() []attack {
	return []attack{
		// ---- ATP ----
		{proto: "atp", name: "no token", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("POST", "/atp/send", "", atpMsg("atp-anon", "alice", "bob")), 401, "unauthorized")
			f.absent("atp-anon")
		}},
		{proto: "atp", name: "wrong token", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("POST", "/atp/send", randomToken(), atpMsg("atp-wrong", "alice", "bob")), 401, "unauthorized")
			r := f.do("POST", "/atp/send", "", atpMsg("atp-basic", "alice", "bob"), "Authorization", "Basic YWxpY2U6eA==")
			expect(t, r, 401, "unauthorized")
			f.absent("atp-wrong", "atp-basic")
		}},
		{proto: "atp", name: "spoofed sender", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("POST", "/atp/send", f.tok["carol"], atpMsg("atp-spoof", "alice", "bob")), 403, "forbidden")
			f.absent("atp-spoof")
		}},
		{proto: "atp", name: "hijack registration", run: func(t *testing.T, f *fixture) {
			reg := map[string]any{"agent_id": "bob", "callback_url": "https://attacker.example/steal"}
			expect(t, f.do("POST", "/atp/register", "", reg), 401, "unauthorized")
			expect(t, f.do("POST", "/atp/register", f.tok["carol"], reg), 403, "forbidden")
			expect(t, f.do("POST", "/atp/heartbeat", f.tok["carol"], map[string]any{"agent_id": "bob"}), 403, "forbidden")
			expect(t, f.do("DELETE", "/atp/agents/bob", f.tok["carol"], nil), 403, "forbidden")
			if a, err := f.h.Store.GetAgent(context.Background(), "bob"); err != nil || a.Endpoint.URL != "" {
				t.Fatalf("bob's registration changed: %+v %v", a, err)
			}
		}},
		{proto: "atp", name: "credential outlives deregistration", stores: true, run: func(t *testing.T, f *fixture) {
			staleCredential(t, f, "/atp/register", "/atp/agents/temp-atp", "temp-atp")
		}},
		{proto: "atp", name: "read another agent's queue", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("GET", "/atp/pending/bob", "", nil), 401, "unauthorized")
			expect(t, f.do("GET", "/atp/pending/bob", f.tok["alice"], nil), 403, "forbidden")
			expect(t, f.do("GET", "/atp/stream/bob", f.tok["alice"], nil), 403, "forbidden")
			expect(t, f.do("POST", "/atp/ack", f.tok["carol"], map[string]any{"agent_id": "bob", "message_ids": []string{"ok-atp"}}), 403, "forbidden")
			expect(t, f.do("GET", "/atp/receipts/ok-atp", f.tok["carol"], nil), 404, "not_found") // as for an unknown message: a refusal tells nothing
			expect(t, f.do("GET", "/atp/results/ok-atp", f.tok["carol"], nil), 404, "not_found")
		}},
		{proto: "atp", name: "callback to blocked addresses", run: func(t *testing.T, f *fixture) {
			srv, hits := recorder(t)
			port := srv.Listener.Addr().(*net.TCPAddr).Port
			for _, cb := range blockedCallbacks(port) {
				r := f.do("POST", "/atp/register", f.tok["carol"], map[string]any{"agent_id": "carol", "callback_url": cb})
				if r.status != 400 || r.body["error"] != "callback_url_forbidden" {
					t.Errorf("callback %s: %d %s, want 400 callback_url_forbidden", cb, r.status, r.raw)
				}
			}
			if a, err := f.h.Store.GetAgent(context.Background(), "carol"); err != nil || a.Endpoint.Kind != core.EndpointPull {
				t.Fatalf("carol's endpoint changed: %+v %v", a, err)
			}
			if hits.Load() != 0 {
				t.Fatalf("the hub called a loopback server %d times", hits.Load())
			}
		}},
		{proto: "atp", name: "callback by a name resolving to loopback", stores: true, run: func(t *testing.T, f *fixture) {
			srv, hits := recorder(t)
			name := loopbackName(t)
			cb := fmt.Sprintf("http://%s:%d/hook", name, srv.Listener.Addr().(*net.TCPAddr).Port)
			expect(t, f.do("POST", "/atp/register", f.h.AdminToken, map[string]any{"agent_id": "dns-loop", "callback_url": cb}), 200, "")
			r := f.do("POST", "/atp/send?wait_ms=10000", f.tok["alice"], atpMsg("atp-dns-loop", "alice", "dns-loop"))
			expect(t, r, 200, "")
			rc, err := f.h.Relay.ReceiptFor(context.Background(), core.AdminPrincipal(), "atp-dns-loop")
			if err != nil || rc.Status != core.StatusRejected || rc.Code != http.StatusForbidden {
				t.Fatalf("delivery to %s must end rejected 403 (SSRF guard at connect), got %+v %v", cb, rc, err)
			}
			if hits.Load() != 0 {
				t.Fatalf("the hub connected to %s (%d requests)", cb, hits.Load())
			}
		}},
		{proto: "atp", name: "oversized body", run: func(t *testing.T, f *fixture) {
			m := atpMsg("atp-big", "alice", "bob")
			m["payload"] = map[string]any{"text": strings.Repeat("x", oversized)}
			expect(t, f.do("POST", "/atp/send", f.tok["alice"], m), 413, "payload_too_large")
			f.absent("atp-big")
		}},

		// ---- MAMP ----
		{proto: "mamp", name: "no token", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("POST", "/mamp/v1/messages", "", f.mampMsg("mamp-anon", "alice", "bob")), 401, "unauthorized")
			f.absent("mamp-anon")
		}},
		{proto: "mamp", name: "wrong token", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("POST", "/mamp/v1/messages", randomToken(), f.mampMsg("mamp-wrong", "alice", "bob")), 401, "unauthorized")
			f.absent("mamp-wrong")
		}},
		{proto: "mamp", name: "spoofed sender", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("POST", "/mamp/v1/messages", f.tok["carol"], f.mampMsg("mamp-spoof", "alice", "bob")), 403, "forbidden")
			// Joining someone else's conversation as oneself is refused too,
			// as if it did not exist.
			m := f.mampMsg("mamp-join", "carol", "bob")
			m["conversation_id"] = f.convAB
			expect(t, f.do("POST", "/mamp/v1/messages", f.tok["carol"], m), 404, "conversation_not_found")
			f.absent("mamp-spoof", "mamp-join")
		}},
		{proto: "mamp", name: "hijack registration", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("POST", "/mamp/v1/agents", f.tok["carol"], map[string]any{"agent_id": "bob", "endpoint_url": "https://attacker.example/m"}), 403, "forbidden")
			expect(t, f.do("DELETE", "/mamp/v1/agents/bob", f.tok["carol"], nil), 403, "forbidden")
		}},
		{proto: "mamp", name: "credential outlives deregistration", stores: true, run: func(t *testing.T, f *fixture) {
			staleCredential(t, f, "/mamp/v1/agents", "/mamp/v1/agents/temp-mamp", "temp-mamp")
		}},
		{proto: "mamp", name: "read another agent's inbox", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("GET", "/mamp/v1/agents/bob/messages", "", nil), 401, "unauthorized")
			expect(t, f.do("GET", "/mamp/v1/agents/bob/messages", f.tok["alice"], nil), 403, "forbidden")
			expect(t, f.do("GET", "/mamp/v1/agents/"+url.PathEscape(f.uri("bob"))+"/messages", f.tok["carol"], nil), 403, "forbidden")
			// A non-member's read of a conversation answers as an unknown one.
			expect(t, f.do("GET", "/mamp/v1/conversations/"+f.convAB, f.tok["carol"], nil), 404, "conversation_not_found")
			expect(t, f.do("GET", "/mamp/v1/conversations/"+f.convAB+"/events", f.tok["carol"], nil), 404, "conversation_not_found")
			expect(t, f.do("GET", "/mamp/v1/conversations?agent=bob", f.tok["carol"], nil), 403, "forbidden")
			expect(t, f.do("GET", "/mamp/v1/conversations", f.tok["carol"], nil), 403, "forbidden")
		}},
		{proto: "mamp", name: "callback to blocked addresses", run: func(t *testing.T, f *fixture) {
			srv, hits := recorder(t)
			port := srv.Listener.Addr().(*net.TCPAddr).Port
			for i, cb := range blockedCallbacks(port) {
				r := f.do("POST", "/mamp/v1/agents", f.tok["carol"], map[string]any{"agent_id": "carol", "endpoint_url": cb})
				if r.status != 400 || r.body["error"] != "endpoint_url_forbidden" {
					t.Errorf("endpoint_url %s: %d %s, want 400 endpoint_url_forbidden", cb, r.status, r.raw)
				}
				// A message's callback_url is a URL the hub will call too.
				m := f.mampMsg(fmt.Sprintf("mamp-cb-%d", i), "carol", "bob")
				m["callback_url"] = cb
				r = f.do("POST", "/mamp/v1/messages", f.tok["carol"], m)
				if r.status != 400 || r.body["error"] != "callback_url_forbidden" {
					t.Errorf("message callback_url %s: %d %s, want 400 callback_url_forbidden", cb, r.status, r.raw)
				}
				f.absent(fmt.Sprintf("mamp-cb-%d", i))
			}
			if a, err := f.h.Store.GetAgent(context.Background(), "carol"); err != nil || a.Endpoint.Kind != core.EndpointPull {
				t.Fatalf("carol's endpoint changed: %+v %v", a, err)
			}
			if hits.Load() != 0 {
				t.Fatalf("the hub called a loopback server %d times", hits.Load())
			}
		}},
		{proto: "mamp", name: "oversized body", run: func(t *testing.T, f *fixture) {
			m := f.mampMsg("mamp-big", "alice", "bob")
			m["content"] = strings.Repeat("x", oversized)
			expect(t, f.do("POST", "/mamp/v1/messages", f.tok["alice"], m), 413, "payload_too_large")
			f.absent("mamp-big")
		}},

		// ---- A2A ----
		{proto: "a2a", name: "no token", run: func(t *testing.T, f *fixture) {
			r := f.a2aCall("bob", "", "SendMessage", a2aSend("a2a-anon", "", nil))
			if r.status != 401 || rpcError(r) == 0 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("anonymous SendMessage: %d %q %s, want 401 with a JSON-RPC error and WWW-Authenticate: Bearer", r.status, r.header.Get("WWW-Authenticate"), r.raw)
			}
			r = f.a2aCall("bob", "", "GetTask", map[string]any{"id": f.taskAB})
			if r.status != 401 {
				t.Fatalf("anonymous GetTask: %d %s", r.status, r.raw)
			}
			// Discovery stays public: the card says how to authenticate.
			card := f.do("GET", "/a2a/bob/.well-known/agent-card.json", "", nil)
			if card.status != 200 || card.body["securitySchemes"] == nil {
				t.Fatalf("agent card: %d %s", card.status, card.raw)
			}
		}},
		{proto: "a2a", name: "anonymous enumeration", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("GET", "/a2a/agents", "", nil), 401, "unauthorized")
			hub := f.do("GET", "/.well-known/agent-card.json", "", nil)
			if hub.status != 200 || len(hub.body["agents"].([]any)) != 0 || len(hub.body["skills"].([]any)) != 0 {
				t.Fatalf("anonymous hub card: %d %s, want the card with no agents or skills", hub.status, hub.raw)
			}
			// A credential, any agent's, lists them.
			dir := f.do("GET", "/a2a/agents", f.tok["carol"], nil)
			if dir.status != 200 || len(dir.body["agents"].([]any)) < 3 {
				t.Fatalf("directory with a token: %d %s", dir.status, dir.raw)
			}
			hub = f.do("GET", "/.well-known/agent-card.json", f.tok["carol"], nil)
			if hub.status != 200 || len(hub.body["agents"].([]any)) < 3 || !strings.Contains(string(hub.raw), `"id":"bob"`) {
				t.Fatalf("hub card with a token: %d %s", hub.status, hub.raw)
			}
		}},
		{proto: "amp", name: "anonymous tick", run: func(t *testing.T, f *fixture) {
			tick := map[string]any{"session_id": "amp-anon", "event": "PostToolUse", "tool_name": "Bash", "success": false}
			expect(t, f.do("POST", "/v4/tick", "", tick), 401, "unauthorized")
			if r := f.do("GET", "/v4/amp", "", nil); r.status != 200 {
				t.Fatalf("the AMP spec is public: %d %s", r.status, r.raw)
			}
		}},
		{proto: "amp", name: "tick with a credential", stores: true, run: func(t *testing.T, f *fixture) {
			tick := map[string]any{"session_id": "amp-carol", "event": "PostToolUse", "tool_name": "Bash", "success": false}
			if r := f.do("POST", "/v4/tick", f.tok["carol"], tick); r.status != 200 {
				t.Fatalf("tick with an agent's token: %d %s", r.status, r.raw)
			}
		}},
		{proto: "a2a", name: "wrong token", run: func(t *testing.T, f *fixture) {
			expect(t, f.a2aCall("bob", randomToken(), "SendMessage", a2aSend("a2a-wrong", "", nil)), 401, "unauthorized")
		}},
		{proto: "a2a", name: "sender is the credential's agent", stores: true, run: func(t *testing.T, f *fixture) {
			// A2A messages carry no sender: whatever the metadata claims,
			// the relayed message is from the credential's agent.
			task := rpcTask(t, f.a2aCall("bob", f.tok["carol"], "SendMessage",
				a2aSend("a2a-claim", "", map[string]any{"sender": "alice", "from": f.uri("alice")})))
			ms, err := f.h.Store.ConversationMessages(context.Background(), task["contextId"].(string), 0, 10)
			if err != nil || len(ms) != 1 || ms[0].Sender != "carol" {
				t.Fatalf("relayed message: %+v %v, want one message from carol", ms, err)
			}
		}},
		{proto: "a2a", name: "read another agent's tasks", run: func(t *testing.T, f *fixture) {
			carol := f.tok["carol"]
			for _, c := range []struct {
				method string
				params any
			}{
				{"GetTask", map[string]any{"id": f.taskAB}},
				{"CancelTask", map[string]any{"id": f.taskAB}},
				{"GetTaskPushNotificationConfig", map[string]any{"taskId": f.taskAB, "id": "x"}},
				{"ListTaskPushNotificationConfigs", map[string]any{"taskId": f.taskAB}},
				{"CreateTaskPushNotificationConfig", map[string]any{"taskId": f.taskAB, "url": "https://attacker.example/p"}},
				{"SendMessage", a2aSend("a2a-hijack", f.taskAB, nil)},
			} {
				if r := f.a2aCall("bob", carol, c.method, c.params); r.status != 200 || rpcError(r) != a2a.CodeTaskNotFound {
					t.Errorf("%s on alice's task by carol: %d %s, want -32001 task not found", c.method, r.status, r.raw)
				}
			}
			r := f.a2aCall("bob", carol, "ListTasks", map[string]any{})
			res, _ := r.body["result"].(map[string]any)
			if r.status != 200 || res == nil {
				t.Fatalf("carol lists bob's tasks: %s", r.raw)
			}
			tasks, _ := res["tasks"].([]any)
			for _, x := range tasks {
				if id := x.(map[string]any)["id"]; id == f.taskAB || id == f.taskPin {
					t.Fatalf("carol's ListTasks shows alice's task %s", id)
				}
			}
			if r := f.a2aCall("bob", f.tok["alice"], "GetTask", map[string]any{"id": f.taskAB}); rpcError(r) != 0 {
				t.Fatalf("alice reads her own task: %s", r.raw)
			}
		}},
		{proto: "a2a", name: "push to blocked addresses", run: func(t *testing.T, f *fixture) {
			for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/", "http://0.0.0.0:80/", "http://[fe80::1]/"} {
				r := f.a2aCall("bob", f.tok["alice"], "CreateTaskPushNotificationConfig", map[string]any{"taskId": f.taskAB, "url": u})
				if rpcError(r) != a2a.CodeInvalidParams {
					t.Errorf("push config %s: %s, want -32602", u, r.raw)
				}
				p := a2aSend("a2a-push-"+u, "", nil)
				p["configuration"].(map[string]any)["taskPushNotificationConfig"] = map[string]any{"url": u}
				if r := f.a2aCall("bob", f.tok["alice"], "SendMessage", p); rpcError(r) != a2a.CodeInvalidParams {
					t.Errorf("SendMessage with push config %s: %s, want -32602", u, r.raw)
				}
			}
		}},
		{proto: "a2a", name: "push to loopback", stores: true, run: func(t *testing.T, f *fixture) {
			// The adapter cannot know the operator's loopback policy when
			// the config is set, so the config may be stored; the hub must
			// still never connect to it.
			srv, hits := recorder(t)
			r := f.a2aCall("bob", f.tok["alice"], "CreateTaskPushNotificationConfig", map[string]any{"taskId": f.taskPin, "url": srv.URL + "/push"})
			if rpcError(r) == a2a.CodeInvalidParams {
				return // refused when set: nothing will be called
			}
			if rpcError(r) != 0 {
				t.Fatalf("push config: %s", r.raw)
			}
			if r := f.a2aCall("bob", f.tok["alice"], "CancelTask", map[string]any{"id": f.taskPin}); rpcError(r) != 0 {
				t.Fatalf("cancel: %s", r.raw) // a task change: the hub tries to push it
			}
			// The push is a relay message to a hidden agent: wait for its
			// (only) attempt to end, refused by the hub's address guard.
			waitfor.OK(t, "the push of the cancel to be refused by the address guard", func() error {
				dls, err := f.h.Store.DeadLetters(context.Background(), core.DeadLetterFilter{Limit: 1000})
				if err != nil {
					return err
				}
				for _, rc := range dls {
					m, err := f.h.Store.GetMessage(context.Background(), rc.MessageID)
					if err != nil || m.Type != "a2a.push" || m.Metadata["a2a_task_id"] != f.taskPin {
						continue
					}
					if rc.Status != core.StatusRejected || rc.Code != http.StatusForbidden {
						t.Fatalf("the push ended %s %d (%s), want rejected 403 by the address guard", rc.Status, rc.Code, rc.LastError)
					}
					return nil
				}
				return errors.New("no dead letter for the push yet")
			})
			if hits.Load() != 0 {
				t.Fatalf("the hub pushed to a loopback address %d times", hits.Load())
			}
		}},
		{proto: "a2a", name: "oversized body", run: func(t *testing.T, f *fixture) {
			p := a2aSend("a2a-big", "", nil)
			p["message"].(map[string]any)["parts"] = []any{map[string]any{"text": strings.Repeat("x", oversized)}}
			r := f.a2aCall("bob", f.tok["alice"], "SendMessage", p)
			if r.status != 413 || rpcError(r) == 0 {
				t.Fatalf("oversized SendMessage: %d %s, want 413 with a JSON-RPC error", r.status, r.raw)
			}
		}},

		// ---- MCP ----
		{proto: "mcp", name: "no token", run: func(t *testing.T, f *fixture) {
			r := f.do("POST", "/mcp", "", mcpInit, "Accept", "application/json, text/event-stream")
			if r.status != 401 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("anonymous initialize: %d %q", r.status, r.header.Get("WWW-Authenticate"))
			}
			if _, err := f.mcpSession(""); err == nil {
				t.Fatal("the MCP client connected without a token")
			}
		}},
		{proto: "mcp", name: "wrong token", run: func(t *testing.T, f *fixture) {
			expect(t, f.do("POST", "/mcp", randomToken(), mcpInit, "Accept", "application/json, text/event-stream"), 401, "unauthorized")
			if _, err := f.mcpSession(randomToken()); err == nil {
				t.Fatal("the MCP client connected with a made-up token")
			}
		}},
		{proto: "mcp", name: "sender is the credential's agent", stores: true, run: func(t *testing.T, f *fixture) {
			cs := f.mustSession(f.tok["carol"])
			// send_message has no sender argument: an extra "sender" is
			// refused by the schema or ignored, and metadata claims
			// nothing.
			err := tool(cs, "send_message", map[string]any{"to": "bob", "text": "x", "message_id": "mcp-spoof-arg", "sender": "alice"}, nil)
			if err == nil {
				checkSender(t, f, "mcp-spoof-arg", "carol")
			} else {
				f.absent("mcp-spoof-arg")
			}
			if err := tool(cs, "send_message", map[string]any{"to": "bob", "text": "x", "message_id": "mcp-spoof-meta",
				"metadata": map[string]any{"sender": "alice", "from": f.uri("alice")}}, nil); err != nil {
				t.Fatalf("send: %v", err)
			}
			checkSender(t, f, "mcp-spoof-meta", "carol")
			// Reusing alice's message id does not make it alice's.
			if err := tool(cs, "send_message", map[string]any{"to": "bob", "text": "x", "message_id": f.mcpMsg}, nil); err == nil {
				t.Fatal("carol reused alice's message id")
			}
			checkSender(t, f, f.mcpMsg, "alice")
		}},
		{proto: "mcp", name: "read another agent's messages", run: func(t *testing.T, f *fixture) {
			cs := f.mustSession(f.tok["carol"])
			for _, c := range []struct {
				name string
				args map[string]any
			}{
				{"get_receipt", map[string]any{"message_id": f.mcpMsg}},
				{"get_conversation", map[string]any{"conversation_id": f.convAB}},
				{"list_conversations", map[string]any{"agent_id": "bob"}},
				{"wait_for_reply", map[string]any{"message_id": f.mcpMsg, "timeout_ms": 100}},
			} {
				if err := tool(cs, c.name, c.args, nil); err == nil {
					t.Errorf("carol's %s %v succeeded", c.name, c.args)
				}
			}
			if _, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: mcpadapter.ConversationURI(f.convAB)}); err == nil {
				t.Error("carol read alice and bob's conversation resource")
			}
		}},
		{proto: "mcp", name: "oversized body", run: func(t *testing.T, f *fixture) {
			big := strings.Replace(mcpInit, `"name":"raw"`, `"name":"`+strings.Repeat("x", oversized)+`"`, 1)
			r := f.do("POST", "/mcp", f.tok["alice"], big, "Accept", "application/json, text/event-stream")
			if r.status != 413 {
				t.Fatalf("oversized MCP request: %d %.200s", r.status, r.raw)
			}
		}},
	}
}

// staleCredential registers id, deregisters it with its own credential,
// lets someone else register the free id, and checks that the first
// credential no longer acts as id.
func staleCredential(t *testing.T, f *fixture, registerPath, deletePath, id string) {
	t.Helper()
	r := f.do("POST", registerPath, "", map[string]any{"agent_id": id})
	old, _ := r.body["token"].(string)
	if r.status != 200 || old == "" {
		t.Fatalf("register %s: %d %s", id, r.status, r.raw)
	}
	expect(t, f.do("DELETE", deletePath, old, nil), 200, "")
	r = f.do("POST", registerPath, "", map[string]any{"agent_id": id})
	if fresh, _ := r.body["token"].(string); r.status != 200 || fresh == "" || fresh == old {
		t.Fatalf("re-register %s: %d %s", id, r.status, r.raw)
	}
	expect(t, f.do("POST", "/atp/send", old, atpMsg("stale-"+id, id, "bob")), 401, "unauthorized")
	expect(t, f.do("GET", "/atp/pending/"+id, old, nil), 401, "unauthorized")
	f.absent("stale-" + id)
}

const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func checkSender(t *testing.T, f *fixture, id, want string) {
	t.Helper()
	m, err := f.h.Store.GetMessage(context.Background(), id)
	if err != nil || m.Sender != want {
		t.Fatalf("message %s: %+v %v, want sender %s", id, m, err, want)
	}
}

// blockedCallbacks are callback URLs the default policy refuses at
// registration: metadata, loopback and unspecified addresses, a private
// range, and the same addresses spelled as IPv4-mapped IPv6, with a
// trailing dot, or in the numeric forms clients read as addresses
// (2130706433, 0177.0.0.1, 0x7f.1, 127.1).
func blockedCallbacks(port int) []string {
	return []string{
		fmt.Sprintf("http://2130706433:%d/hook", port),
		fmt.Sprintf("http://0177.0.0.1:%d/hook", port),
		fmt.Sprintf("http://0x7f.1:%d/hook", port),
		fmt.Sprintf("http://127.1:%d/hook", port),
		"http://169.254.43518/latest/meta-data/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/latest/meta-data/",
		fmt.Sprintf("http://127.0.0.1:%d/hook", port),
		fmt.Sprintf("http://[::1]:%d/hook", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/hook", port),
		fmt.Sprintf("http://localhost.:%d/hook", port),
		fmt.Sprintf("http://api.localhost:%d/hook", port),
		"http://0.0.0.0/",
		"http://10.0.0.1/",
		"http://192.168.1.1/",
	}
}

// TestFlood floods each protocol with one credential: requests over the
// rate are refused with 429 and a Retry-After, nothing of a refused request
// is stored, and everything accepted is.
//
// The hub's clock stands still during a flood, so its token buckets do not
// refill: exactly the burst is accepted however fast or slowly (a loaded
// machine, -race) the requests arrive.
func TestFlood(t *testing.T) {
	clock := clocktest.New(time.Now())
	f := setupWith(t, hub.Options{RateLimit: rate, RateBurst: burst, Clock: clock})
	const n = 120
	type outcome struct {
		id     string
		status int
		retry  string
	}
	flood := func(t *testing.T, send func(i int) (string, int, string)) (acc, ref []outcome) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := atomic.Int32{}
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					id, st, ra := send(i)
					mu.Lock()
					o := outcome{id, st, ra}
					if st == http.StatusTooManyRequests {
						ref = append(ref, o)
					} else {
						acc = append(acc, o)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// The bucket admits the burst, and with the clock standing still
		// nothing refills.
		if len(acc) != burst || len(ref) != n-burst {
			t.Fatalf("%d requests: %d accepted, %d refused; the limit is %d/s with a burst of %d", n, len(acc), len(ref), rate, burst)
		}
		for _, o := range ref {
			if o.retry == "" {
				t.Fatalf("429 without Retry-After")
			}
		}
		t.Logf("%d requests: %d accepted, %d refused with 429", n, len(acc), len(ref))
		return acc, ref
	}
	stored := func(t *testing.T, acc, ref []outcome) {
		for _, o := range acc {
			if o.status != 200 {
				t.Fatalf("accepted request %s answered %d", o.id, o.status)
			}
			if _, err := f.h.Store.GetMessage(context.Background(), o.id); err != nil {
				t.Fatalf("accepted message %s not stored: %v", o.id, err)
			}
		}
		for _, o := range ref {
			f.absent(o.id)
		}
	}
	// quiet lets the bucket refill: the time it takes, on the hub's clock.
	quiet := func() { clock.Advance(time.Duration(float64(burst) / rate * float64(time.Second))) }

	t.Run("atp", func(t *testing.T) {
		f.t = t
		acc, ref := flood(t, func(i int) (string, int, string) {
			id := fmt.Sprintf("flood-atp-%d", i)
			r := f.do("POST", "/atp/send", f.tok["flood-atp"], atpMsg(id, "flood-atp", "bob"))
			return id, r.status, r.header.Get("Retry-After")
		})
		stored(t, acc, ref)
	})
	t.Run("mamp", func(t *testing.T) {
		f.t = t
		acc, ref := flood(t, func(i int) (string, int, string) {
			id := fmt.Sprintf("flood-mamp-%d", i)
			r := f.do("POST", "/mamp/v1/messages", f.tok["flood-mamp"], f.mampMsg(id, "flood-mamp", "bob"))
			return id, r.status, r.header.Get("Retry-After")
		})
		stored(t, acc, ref)
	})
	t.Run("a2a", func(t *testing.T) {
		f.t = t
		before := f.snap().tasks
		acc, _ := flood(t, func(i int) (string, int, string) {
			r := f.a2aCall("bob", f.tok["flood-a2a"], "SendMessage", a2aSend(fmt.Sprintf("flood-a2a-%d", i), "", nil))
			if r.status == 200 && rpcError(r) != 0 {
				t.Errorf("accepted SendMessage failed: %s", r.raw)
			}
			return "", r.status, r.header.Get("Retry-After")
		})
		if got := f.snap().tasks - before; got != len(acc) {
			t.Fatalf("%d tasks stored for %d accepted SendMessage calls", got, len(acc))
		}
	})
	t.Run("mcp", func(t *testing.T) {
		f.t = t
		quiet()
		cs := f.mustSession(f.tok["flood-mcp"])
		quiet() // connecting took tokens from the bucket
		acc, ref := flood(t, func(i int) (string, int, string) {
			id := fmt.Sprintf("flood-mcp-%d", i)
			err := tool(cs, "send_message", map[string]any{"to": "bob", "text": "x", "message_id": id}, nil)
			switch {
			case err == nil:
				return id, 200, ""
			case strings.Contains(err.Error(), "429") || strings.Contains(strings.ToLower(err.Error()), "too many"):
				return id, 429, "(MCP client)"
			}
			t.Errorf("send %s: %v", id, err)
			return id, 0, ""
		})
		stored(t, acc, ref)
	})
}

// TestReplayedWebhook captures a signed delivery at a worker's callback
// and replays it, tampered and not: the worker's verifying handler refuses
// each with 401 and handles the message once. (The worker listens on
// loopback, so this hub allows loopback callbacks.)
func TestReplayedWebhook(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	ctx := context.Background()
	var handled atomic.Int32
	verifier := &webhooksig.Verifier{}
	h := client.CallbackHandler(func(context.Context, *client.Envelope) (client.Reply, error) {
		handled.Add(1)
		return client.Reply{}, nil
	}, client.CallbackOptions{Verifier: verifier})
	var mu sync.Mutex
	var hdr http.Header
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		if hdr == nil {
			hdr, body = r.Header.Clone(), b
		}
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	worker := client.New(base)
	reg, err := worker.Register(ctx, client.Registration{AgentID: "worker", CallbackURL: srv.URL})
	if err != nil || reg.SigningSecret == "" {
		t.Fatalf("register: %+v %v", reg, err)
	}
	verifier.Secret = []byte(reg.SigningSecret)
	sender := client.New(base)
	if _, err := sender.Register(ctx, client.Registration{AgentID: "sender"}); err != nil {
		t.Fatal(err)
	}
	if res, err := sender.Send(ctx, client.Message{MessageID: "w1", Sender: "sender", Receiver: "worker", Type: "t", Payload: map[string]any{"n": 1}}, 10*time.Second); err != nil || res.Status != "delivered" {
		t.Fatalf("signed delivery: %+v %v", res, err)
	}
	ts := hdr.Get(webhooksig.TimestampHeader)
	later := fmt.Sprint(time.Now().Unix() + 1)
	cases := []struct {
		name string
		hdr  func(http.Header)
		body []byte
	}{
		{"exact replay", func(http.Header) {}, body},
		{"body altered", func(http.Header) {}, bytes.Replace(body, []byte(`"n":1`), []byte(`"n":2`), 1)},
		{"timestamp moved", func(h http.Header) { h.Set(webhooksig.TimestampHeader, later) }, body},
		{"signature stripped", func(h http.Header) { h.Del(webhooksig.SignatureHeader) }, body},
		{"stale timestamp re-signed with a guessed key", func(h http.Header) {
			old := time.Now().Add(-time.Hour).Unix()
			h.Set(webhooksig.TimestampHeader, fmt.Sprint(old))
			h.Set(webhooksig.SignatureHeader, webhooksig.Signature([]byte("guess"), h.Get(webhooksig.IDHeader), old, body))
		}, body},
	}
	if ts == "" {
		t.Fatal("the delivery carried no signature timestamp")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(c.body))
			req.Header = hdr.Clone()
			c.hdr(req.Header)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("answered %d, want 401", res.StatusCode)
			}
		})
	}
	if n := handled.Load(); n != 1 {
		t.Fatalf("the worker handled %d deliveries, want 1", n)
	}
}
