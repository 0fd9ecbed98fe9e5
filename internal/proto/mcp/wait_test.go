package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/hub"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// TestWaitWokenByRelay: with the fallback poll an hour apart, a wait
// ends only if the relay's notifications wake it: each kind of wait is
// started, seen waiting (a progress notification), then given what it
// waits for, and must end with it well before its timeout.
func TestWaitWokenByRelay(t *testing.T) {
	e := newEnv(t, hub.Options{}, mcpadapter.Options{WaitPoll: time.Hour})
	release := make(chan struct{})
	startWorker(t, e.base, "slow", nil, nil, release, 0)
	var sent mcpadapter.SendMessageOutput
	if res := e.call("send_message", map[string]any{"to": "slow", "text": "hello"}, &sent); res.IsError {
		t.Fatalf("send: %s", resultText(res))
	}
	atp := func(text string) func() {
		return func() {
			if code := postJSON(t, e.base+"/atp/send", map[string]any{"sender": "silent", "receiver": "mcp-host", "type": "note",
				"payload": map[string]any{"text": text}}, nil); code != http.StatusOK {
				t.Errorf("atp send: %d", code)
			}
		}
	}
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		trigger    func()
		want       string // the text of the message that ends the wait
	}{
		{"reply", "wait_for_reply", map[string]any{"message_id": sent.MessageID}, func() { close(release) }, "done: hello"},
		{"queue", "wait_for_reply", map[string]any{}, atp("psst"), "psst"},
		{"inbox", "check_inbox", map[string]any{}, atp("more"), "more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for len(e.progress) > 0 {
				<-e.progress
			}
			tc.args["timeout_ms"] = 20000
			done := make(chan string, 1)
			go func() {
				res, err := e.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tc.tool, Arguments: tc.args,
					Meta: sdk.Meta{"progressToken": tc.name}})
				var out struct {
					Outcome  string
					Reply    *mcpadapter.MessageView
					Messages []mcpadapter.MessageView
				}
				if err == nil && !res.IsError {
					b, _ := json.Marshal(res.StructuredContent)
					_ = json.Unmarshal(b, &out)
				}
				switch {
				case out.Reply != nil:
					done <- out.Reply.Text
				case len(out.Messages) > 0:
					done <- out.Messages[0].Text
				default:
					done <- "outcome " + out.Outcome
				}
			}()
			select {
			case <-e.progress: // waiting
			case got := <-done:
				t.Fatalf("the wait ended before its trigger with %q", got)
			case <-time.After(30 * time.Second):
				t.Fatal("no progress notification within 30 s")
			}
			tc.trigger()
			if got := <-done; got != tc.want {
				t.Fatalf("the wait ended with %q, want %q", got, tc.want)
			}
		})
	}
}
