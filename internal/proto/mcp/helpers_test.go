package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// env is a real hub plus an MCP client connected to the adapter over the
// SDK's in-memory transport.
type env struct {
	t        *testing.T
	hub      *hub.Hub
	base     string
	srv      *mcpadapter.Server
	cs       *sdk.ClientSession
	progress chan *sdk.ProgressNotificationParams
	updated  chan string
}

func newEnv(t *testing.T, hopt hub.Options, opt mcpadapter.Options) *env {
	t.Helper()
	hopt.Dev = true
	h, base := hubtest.Start(t, hopt)
	if opt.ProgressEvery == 0 {
		opt.ProgressEvery = 20 * time.Millisecond
	}
	if opt.Caller == (core.Principal{}) {
		opt.Caller = core.DevPrincipal() // the in-memory transport carries no credential
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	e := &env{t: t, hub: h, base: base, srv: mcpadapter.New(h.Relay, opt),
		progress: make(chan *sdk.ProgressNotificationParams, 1000), updated: make(chan string, 1000)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = e.srv.Run(ctx) }()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := e.srv.SDK().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.cs = e.connect(ctx, ct)
	t.Cleanup(func() {
		_ = e.cs.Close()
		_ = ss.Close()
		cancel()
		wg.Wait()
	})
	return e
}

// waitUpdate waits for a resource-updated notification of uri.
func (e *env) waitUpdate(uri string) {
	e.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case u := <-e.updated:
			if u == uri {
				return
			}
		case <-timeout:
			e.t.Fatalf("no resources/updated notification for %s within 20 s", uri)
		}
	}
}

// connect connects a client that records progress and resource updates.
func (e *env) connect(ctx context.Context, t sdk.Transport) *sdk.ClientSession {
	e.t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-host", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			select {
			case e.progress <- r.Params:
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			e.updated <- r.Params.URI
		},
	})
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// call calls a tool and decodes its structured output into out (if not
// nil). It fails the test on a protocol error.
func (e *env) call(name string, args any, out any) *sdk.CallToolResult {
	e.t.Helper()
	return callTool(e.t, e.cs, name, args, out)
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args any, out any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	if out != nil && !res.IsError {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

func resultText(res *sdk.CallToolResult) string {
	var b bytes.Buffer
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// postJSON posts v to the hub and decodes the answer into out.
func postJSON(t *testing.T, url string, v, out any) int {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("POST %s: %d %s: %v", url, resp.StatusCode, body, err)
		}
	}
	return resp.StatusCode
}

// worker is a real ATP agent: an HTTP callback server registered on the
// hub. For each task it receives it answers "accepted" and, once release
// is closed (at once if nil), sends a task.result correlated to the task
// back to the sender through POST /atp/send.
type worker struct {
	t        *testing.T
	id       string
	srv      *httptest.Server
	received chan map[string]any
	release  chan struct{}
	status   int // HTTP status to answer with (200 by default)
	// inline answers in the delivery response, as the ATP tutorial's
	// worker does, instead of with a task.result message later.
	inline bool
}

// startInlineWorker starts a worker that answers each task inline: its
// response to the delivery carries the result ({"status": "accepted",
// "result": {"text": "inline: …"}}), and no message follows.
func startInlineWorker(t *testing.T, base, id string) *worker {
	return startWorkerWith(t, base, &worker{id: id, inline: true}, nil, nil)
}

func startWorker(t *testing.T, base, id string, caps []string, card map[string]any, release chan struct{}, status int) *worker {
	t.Helper()
	return startWorkerWith(t, base, &worker{id: id, release: release, status: status}, caps, card)
}

func startWorkerWith(t *testing.T, base string, w *worker, caps []string, card map[string]any) *worker {
	t.Helper()
	id := w.id
	w.t, w.received = t, make(chan map[string]any, 100)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var env map[string]any
		if err := json.NewDecoder(r.Body).Decode(&env); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.received <- env
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(w.status)
		if w.status != http.StatusOK {
			_, _ = rw.Write([]byte(`{"status":"rejected","error":"not today"}`))
			return
		}
		if w.inline {
			payload, _ := env["payload"].(map[string]any)
			text, _ := payload["text"].(string)
			b, _ := json.Marshal(map[string]any{"status": "accepted", "message_id": env["message_id"], "result": map[string]any{"text": "inline: " + text}})
			_, _ = rw.Write(b)
			return
		}
		_, _ = rw.Write([]byte(`{"status":"accepted","handled_by":"` + id + `"}`))
		if env["type"] == "task.result" {
			return
		}
		go w.reply(base, env)
	}))
	t.Cleanup(w.srv.Close)
	reg := map[string]any{"agent_id": id, "callback_url": w.srv.URL, "capabilities": caps, "lease_seconds": 300}
	if card != nil {
		reg["card"] = card
	}
	if code := postJSON(t, base+"/atp/register", reg, nil); code != http.StatusOK {
		t.Fatalf("register %s: %d", id, code)
	}
	return w
}

func (w *worker) reply(base string, env map[string]any) {
	if w.release != nil {
		<-w.release
	}
	payload, _ := env["payload"].(map[string]any)
	text, _ := payload["text"].(string)
	res := map[string]any{"atp_version": "1.0", "sender": w.id, "receiver": env["sender"], "type": "task.result",
		"correlation_id": env["message_id"], "payload": map[string]any{"text": "done: " + text}}
	if c, ok := env["conversation_id"].(string); ok && c != "" {
		res["conversation_id"] = c
	}
	b, _ := json.Marshal(res)
	resp, err := http.Post(base+"/atp/send", "application/json", bytes.NewReader(b))
	if err == nil {
		resp.Body.Close()
	}
}
