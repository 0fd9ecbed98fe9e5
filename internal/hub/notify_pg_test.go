package hub_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestResultNotifiedAcrossInstances: a reply accepted by hub A reaches
// what hub B follows of the message it answers through the store's
// notification. The relay calls OnMessageEvent callbacks only on
// notifications, never on a wait's poll, so without the announcement of
// results hub B would never call it.
func TestResultNotifiedAcrossInstances(t *testing.T) {
	db := hubtest.PostgresDB(t)
	_, a := hubtest.Start(t, hub.Options{StoreURL: db, Dev: true})
	hb, _ := hubtest.Start(t, hub.Options{StoreURL: db, Dev: true})
	post := func(path string, body map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(a+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, out)
		}
	}
	// Pull receivers that never ack: no receipt ends, so only the result's
	// announcement can reach hub B's callback.
	for _, id := range []string{"asker", "helper"} {
		post("/atp/register", map[string]any{"agent_id": id, "delivery": "pull"})
	}
	post("/atp/send", map[string]any{"atp_version": "1.0", "message_id": "question-1", "sender": "asker", "receiver": "helper",
		"type": "task.request", "payload": map[string]any{"text": "review this?"}})
	heard := make(chan string, 8)
	stop := hb.Relay.OnMessageEvent("question-1", func(id string) {
		select {
		case heard <- id:
		default:
		}
	})
	defer stop()
	post("/atp/send", map[string]any{"atp_version": "1.0", "message_id": "answer-1", "sender": "helper", "receiver": "asker",
		"type": "task.result", "correlation_id": "question-1", "payload": map[string]any{"text": "looks good"}})
	if got := waitfor.Recv(t, "hub B to hear of the reply to question-1 accepted on hub A", heard); got != "question-1" {
		t.Fatalf("callback called for %q", got)
	}
}
