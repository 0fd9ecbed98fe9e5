package atp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// TestSendAnswersFirstAttempt: as the tutorial's relay does, a send to an
// online push receiver answers with the first delivery attempt when it
// ends in time (delivered with the receiver's reply, or rejected), and
// queued when it failed, when the receiver only pulls, or when the caller
// asked not to wait.
func TestSendAnswersFirstAttempt(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Dev: true})
	w := newWorker(t)
	down := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "busy", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	for _, a := range []map[string]any{
		{"agent_id": "worker", "callback_url": w.URL},
		{"agent_id": "down", "callback_url": down.URL},
		{"agent_id": "puller"},
		{"agent_id": "planner"},
	} {
		if r := call(t, "POST", base+"/atp/register", "", a); r.status != 200 {
			t.Fatalf("register %v: %d %s", a["agent_id"], r.status, r.raw)
		}
	}
	for _, c := range []struct {
		name, to, query, prefer string
		payload                 map[string]any
		status                  core.Status
		result                  string
	}{
		{"delivered", "worker", "", "", map[string]any{"text": "abc"}, core.StatusDelivered, "cba"},
		{"rejected by the receiver", "worker", "", "", map[string]any{}, core.StatusRejected, ""},
		{"first attempt failed", "down", "", "", map[string]any{"text": "abc"}, core.StatusQueued, ""},
		{"receiver pulls", "puller", "", "", map[string]any{"text": "abc"}, core.StatusQueued, ""},
		{"wait_ms=0", "worker", "?wait_ms=0", "", map[string]any{"text": "abc"}, core.StatusQueued, ""},
		{"Prefer: respond-async", "worker", "", "respond-async", map[string]any{"text": "abc"}, core.StatusQueued, ""},
		{"Prefer among others", "worker", "", "return=minimal, respond-async", map[string]any{"text": "abc"}, core.StatusQueued, ""},
		{"wait_ms for the final status", "worker", "?wait_ms=5000", "", map[string]any{"text": "xyz"}, core.StatusDelivered, "zyx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "m-" + c.name
			body, _ := json.Marshal(map[string]any{"message_id": id, "sender": "planner", "receiver": c.to,
				"type": "task.request", "ttl_ms": 60000, "payload": c.payload})
			req, _ := http.NewRequest("POST", base+"/atp/send"+c.query, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if c.prefer != "" {
				req.Header.Set("Prefer", c.prefer)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var out struct {
				Status  core.Status `json:"status"`
				Receipt *struct {
					Result struct {
						Text string `json:"text"`
					} `json:"result"`
				} `json:"receipt"`
			}
			if err := json.Unmarshal(raw, &out); err != nil || res.StatusCode != 200 {
				t.Fatalf("%d %s", res.StatusCode, raw)
			}
			if out.Status != c.status {
				t.Fatalf("answered %s, want %s: %s", out.Status, c.status, raw)
			}
			if c.result != "" && (out.Receipt == nil || out.Receipt.Result.Text != c.result) {
				t.Errorf("receipt %s, want the worker's result %q", raw, c.result)
			}
			if c.status == core.StatusQueued && out.Receipt != nil {
				t.Errorf("a queued answer carries a receipt: %s", raw)
			}
			// Whatever the answer said, the message is stored, and a
			// delivered answer is what the store holds.
			rc, err := h.Relay.ReceiptFor(context.Background(), core.AdminPrincipal(), id)
			if err != nil {
				t.Fatalf("not stored: %v", err)
			}
			if c.status.Terminal() && rc.Status != c.status {
				t.Errorf("answered %s, store holds %s", c.status, rc.Status)
			}
		})
	}
}
