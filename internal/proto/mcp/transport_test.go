package mcp_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// rawPost posts a JSON-RPC body to /mcp with extra headers.
func rawPost(t *testing.T, url, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestHTTPBothEras(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	ctx := context.Background()
	// The Go SDK client tries server/discover first: the 2026-07-28
	// stateless era.
	c := sdk.NewClient(&sdk.Implementation{Name: "go-client", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != mcpadapter.StatelessVersion {
		t.Fatalf("negotiated %q, want %q", v, mcpadapter.StatelessVersion)
	}
	var out mcpadapter.ListAgentsOutput
	if res := callTool(t, cs, "list_agents", map[string]any{}, &out); res.IsError {
		t.Fatal(resultText(res))
	}
	// A 2025-11-25 client initializes and gets a session.
	resp := rawPost(t, base+"/mcp", initBody, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(string(body), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("legacy initialize: %d session %q body %s", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), body)
	}
}

func TestHTTPOriginAndHost(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	tests := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"cross-site browser request", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"foreign Origin", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"DNS rebinding Host", map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"same origin", map[string]string{"Origin": base}, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(initBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tc.hdr {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestHTTPAuth(t *testing.T) {
	// Auth on; the worker's callback is on loopback, which the SSRF policy
	// must allow in this test.
	h, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	ctx := context.Background()
	register := func(id string) string {
		var reg struct{ Token string }
		if code := postJSON(t, base+"/atp/register", map[string]any{"agent_id": id}, &reg); code != http.StatusOK || reg.Token == "" {
			t.Fatalf("register %s: %d", id, code)
		}
		return reg.Token
	}
	alice, bob := register("alice"), register("bob")
	startWorker(t, base, "open-worker", nil, nil, nil, 0)

	// Without a token, or with a wrong one, 401 names the protected-resource
	// metadata (RFC 9728).
	challenge := `resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp"`
	for name, hdr := range map[string]map[string]string{"no token": nil, "bad token": {"Authorization": "Bearer sbk_wrong"}} {
		resp := rawPost(t, base+"/mcp", initBody, hdr)
		if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, challenge) {
			t.Fatalf("%s: %d %q", name, resp.StatusCode, ch)
		}
	}
	// A session belongs to the identity that opened it.
	resp := rawPost(t, base+"/mcp", initBody, map[string]string{"Authorization": "Bearer " + alice})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("alice initialize: %d", resp.StatusCode)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if r := rawPost(t, base+"/mcp", ping, map[string]string{"Authorization": "Bearer " + bob, "Mcp-Session-Id": sid,
		"Mcp-Protocol-Version": "2025-11-25"}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("bob on alice's session: %d", r.StatusCode)
	}

	// With alice's token the host is alice.
	connect := func(token string) *sdk.ClientSession {
		hc := &http.Client{Transport: bearer{token}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).
			Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	cs := connect(alice)
	var sent mcpadapter.SendMessageOutput
	if res := callTool(t, cs, "send_message", map[string]any{"to": "open-worker", "text": "hi"}, &sent); res.IsError || sent.Sender != "alice" {
		t.Fatalf("send as alice: %+v %s", sent, resultText(res))
	}
	// alice was registered over ATP (pull): the MCP host does not re-register it.
	a, _ := h.Store.GetAgent(ctx, "alice")
	if a.Protocol != "atp" {
		t.Fatalf("alice's registration was replaced: %+v", a)
	}
	// bob cannot read alice's receipts (it is as if there were none);
	// the operator can.
	if res := callTool(t, connect(bob), "get_receipt", map[string]any{"message_id": sent.MessageID}, nil); !res.IsError ||
		!strings.Contains(resultText(res), "not_found") {
		t.Fatalf("bob reads alice's receipt: %s", resultText(res))
	}
	var rc mcpadapter.ReceiptView
	if res := callTool(t, connect(h.AdminToken), "get_receipt", map[string]any{"message_id": sent.MessageID}, &rc); res.IsError || rc.Sender != "alice" {
		t.Fatalf("admin reads the receipt: %s", resultText(res))
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// stdioClient serves b over a pair of pipes and connects an SDK client.
func stdioClient(t *testing.T, b mcpadapter.Backend, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mcpadapter.ServeStdio(ctx, b, inR, outW) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "stdio-host", Version: "1"}, opts).
		Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return cs
}

func TestStdioLocal(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Dev: true})
	startWorker(t, base, "w", []string{"x"}, nil, nil, 0)
	cs := stdioClient(t, mcpadapter.Local(h.Relay, mcpadapter.Options{Caller: core.DevPrincipal(), Logger: slog.New(slog.DiscardHandler)}), nil)
	var out mcpadapter.ListAgentsOutput
	if res := callTool(t, cs, "list_agents", map[string]any{"capability": "x"}, &out); res.IsError || out.Count != 1 {
		t.Fatalf("list_agents: %+v %s", out, resultText(res))
	}
}

func TestStdioRemoteBridge(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	release := make(chan struct{})
	startWorker(t, base, "w", nil, nil, release, 0)
	progress := make(chan float64, 100)
	cs := stdioClient(t, mcpadapter.Remote(mcpadapter.RemoteOptions{URL: base + "/mcp"}), &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params.Progress:
			default:
			}
		}})
	ctx := context.Background()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "send_message") || !strings.Contains(strings.Join(names, ","), "amp_tick") {
		t.Fatalf("bridged tools = %v", names)
	}
	var sent mcpadapter.SendMessageOutput
	if res := callTool(t, cs, "send_message", map[string]any{"to": "w", "text": "via bridge"}, &sent); res.IsError {
		t.Fatal(resultText(res))
	}
	// Progress (with a numeric token, as the TypeScript SDK sends) crosses
	// the bridge.
	go func() { <-progress; close(release) }()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "wait_for_reply",
		Arguments: map[string]any{"message_id": sent.MessageID, "timeout_ms": 60000}, Meta: sdk.Meta{"progressToken": 42}})
	if err != nil || res.IsError || !strings.Contains(resultText(res), "done: via bridge") {
		t.Fatalf("wait: %v %s", err, resultText(res))
	}
	// Tool errors stay tool results; protocol errors stay JSON-RPC errors.
	if res := callTool(t, cs, "get_agent_card", map[string]any{"agent_id": "ghost"}, nil); !res.IsError {
		t.Fatal("unknown agent: want isError")
	}
	var we *jsonrpc.Error
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "switchboard://agents/ghost"}); !errors.As(err, &we) {
		t.Fatalf("unknown resource: %v", err)
	}
	// Resources and prompts are mirrored.
	if _, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "delegate_task", Arguments: map[string]string{"capability": "none", "task": "x"}}); !errors.As(err, &we) {
		t.Fatalf("prompt error: %v", err)
	}
}

func TestRemoteBackendBadURL(t *testing.T) {
	err := mcpadapter.ServeStdio(context.Background(), mcpadapter.Remote(mcpadapter.RemoteOptions{URL: "ftp://x"}), strings.NewReader(""), io.Discard)
	if err == nil {
		t.Fatal("want an error for a non-HTTP hub URL")
	}
}

// TestBridgeLeavesNoConnection: when the stdio session ends, the bridge
// (here a channel, with its long polls beside the host's calls) leaves no
// connection to the hub open, not even an idle one: a hub that stops
// waits 5 s for a connection on which it has read no request yet, such as
// one the client dialled for a request that another connection served.
func TestBridgeLeavesNoConnection(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{})
	alice, reviewer := registerToken(t, base, "alice"), registerToken(t, base, "reviewer")
	var open atomic.Int64
	dialer := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		open.Add(1)
		return &countedConn{Conn: c, open: &open}, nil
	}}
	host := startHost(t, mcpadapter.Remote(mcpadapter.RemoteOptions{URL: base + "/mcp", Token: reviewer, Agent: "reviewer",
		HTTPClient: &http.Client{Transport: tr}, Logger: slog.New(slog.DiscardHandler)}))
	host.initialize()
	if code := atpSend(t, base, alice, map[string]any{"message_id": "m-conn", "sender": "alice", "receiver": "reviewer",
		"type": "task", "payload": map[string]any{"text": "hello"}}); code != http.StatusOK {
		t.Fatalf("send: %d", code)
	}
	host.channelEvent()
	host.tool("list_agents", map[string]any{})
	if open.Load() == 0 {
		t.Fatal("the bridge dialled no connection through the client it was given")
	}
	host.stop()
	waitFor(t, "every connection the bridge dialled to the hub to be closed", func() bool { return open.Load() == 0 })
}

// countedConn counts itself out of open when it is closed.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}
