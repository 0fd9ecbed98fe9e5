package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// mcpCommand runs "switchboard mcp args…" in-process over pipes, connects
// the official Go SDK's client to it, and returns the session and the
// embedded hub's URL, read from the line the command writes on stderr.
func mcpCommand(t *testing.T, args ...string) (*sdk.ClientSession, string) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, append([]string{"mcp"}, args...), stdio{in: inR, out: outW, err: errW})
		outW.Close()
		errW.Close()
	}()
	hubURL := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errR)
		re := regexp.MustCompile(`embedded hub listening on (http://[0-9.:]+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				hubURL <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-hubURL:
	case code := <-done:
		cancel()
		t.Fatalf("switchboard mcp exited %d before listening", code)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("switchboard mcp did not say where its hub listens within 30 s")
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-host", Version: "1"}, nil).
		Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("switchboard mcp exited %d", code)
		}
	})
	return cs, base
}

// atpWorker is an ATP agent on a loopback callback: with inline it
// answers each task in its delivery response, otherwise it answers with a
// task.result message sent with its token.
func atpWorker(t *testing.T, base, id string, inline bool) {
	t.Helper()
	var token string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env map[string]any
		_ = json.NewDecoder(r.Body).Decode(&env)
		text, _ := env["payload"].(map[string]any)["text"].(string)
		if inline {
			b, _ := json.Marshal(map[string]any{"status": "accepted", "result": map[string]any{"text": "inline: " + text}})
			_, _ = w.Write(b)
			return
		}
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
		go func() {
			b, _ := json.Marshal(map[string]any{"sender": id, "receiver": env["sender"], "type": "task.result",
				"correlation_id": env["message_id"], "payload": map[string]any{"text": "later: " + text}})
			req, _ := http.NewRequest(http.MethodPost, base+"/atp/send", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}))
	t.Cleanup(srv.Close)
	b, _ := json.Marshal(map[string]any{"agent_id": id, "callback_url": srv.URL})
	resp, err := http.Post(base+"/atp/register", "application/json", bytes.NewReader(b))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("register %s: %v %v", id, err, resp)
	}
	defer resp.Body.Close()
	var reg struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil || reg.Token == "" {
		t.Fatalf("register %s: no token (auth must be on): %v", id, err)
	}
	token = reg.Token
}

// TestMCPEmbeddedAuthOn: "switchboard mcp --embedded" with auth on (no
// --dev): agents registering on its hub get tokens, loopback callbacks
// are allowed on request, the session acts as the operator's internal
// id, and answers reach it both inline and as messages.
func TestMCPEmbeddedAuthOn(t *testing.T) {
	cs, base := mcpCommand(t, "--embedded", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--allow-loopback-callbacks")
	resp, err := http.Get(base + "/atp/agents")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an anonymous listing answered %d: auth is not on", resp.StatusCode)
	}
	atpWorker(t, base, "inline-worker", true)
	atpWorker(t, base, "later-worker", false)
	for _, tc := range []struct{ to, want, source string }{
		{"inline-worker", "inline: ping", mcpadapter.SourceInline},
		{"later-worker", "later: ping", mcpadapter.SourceMessage},
	} {
		t.Run(tc.to, func(t *testing.T) {
			var sent mcpadapter.SendMessageOutput
			call(t, cs, "send_message", map[string]any{"to": tc.to, "text": "ping"}, &sent)
			if !strings.HasPrefix(sent.Sender, "_mcp-operator.") {
				t.Fatalf("the session acts as %q, not the operator's internal id", sent.Sender)
			}
			var out mcpadapter.WaitOutput
			call(t, cs, "wait_for_reply", map[string]any{"message_id": sent.MessageID, "timeout_ms": 30000}, &out)
			if out.Outcome != mcpadapter.OutcomeReply || out.Source != tc.source || out.Reply.Text != tc.want {
				t.Fatalf("wait = %+v, reply %+v", out, out.Reply)
			}
		})
	}
}

// call calls a tool, fails the test on any error, and decodes the
// structured output into out.
func call(t *testing.T, cs *sdk.ClientSession, name string, args, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: %v", name, res.Content[0].(*sdk.TextContent).Text)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// TestMCPChannelCommand: "switchboard mcp --embedded --dev --agent
// reviewer": the agent exists as soon as the hub says where it listens
// (a message sent before the host has even initialized is kept), and
// once the host initializes the message arrives as a channel event.
func TestMCPChannelCommand(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, []string{"mcp", "--embedded", "--dev", "--agent", "reviewer", "--addr", "127.0.0.1:0", "--data", t.TempDir()},
			stdio{in: inR, out: outW, err: errW})
		outW.Close()
		errW.Close()
	}()
	hubURL := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errR)
		re := regexp.MustCompile(`embedded hub listening on (http://[0-9.:]+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				hubURL <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-hubURL:
	case <-time.After(30 * time.Second):
		t.Fatal("no listening line within 30 s")
	}
	b, _ := json.Marshal(map[string]any{"message_id": "early", "sender": "ci", "receiver": "reviewer", "type": "task",
		"payload": map[string]any{"text": "sent before the host connected"}})
	resp, err := http.Post(base+"/atp/send", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send to the bound agent right away: %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(outR)
	write := func(v string) {
		if _, err := io.WriteString(inW, v+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"experimental":{"claude/channel":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	found := make(chan map[string]any, 1)
	go func() {
		for lines.Scan() {
			var m map[string]any
			if json.Unmarshal(lines.Bytes(), &m) == nil && m["method"] == "notifications/claude/channel" {
				found <- m["params"].(map[string]any)
				return
			}
		}
	}()
	select {
	case p := <-found:
		if p["content"] != "sent before the host connected" || p["meta"].(map[string]any)["message_id"] != "early" {
			t.Fatalf("event = %v", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no channel event within 30 s")
	}
	inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d", code)
	}
}
