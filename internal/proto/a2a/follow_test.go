package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
)

// TestTasksFollowedWithoutAGoroutineEach: tasks whose receiver has not
// answered cost the hub no goroutine each, and they still complete, with
// no client asking, when the answers arrive.
func TestTasksFollowedWithoutAGoroutineEach(t *testing.T) {
	const n = 200
	h, base := hubtest.Start(t, hub.Options{Dev: true})
	register(t, base, "sink", "", nil)       // pulls, answers later
	register(t, base, "a2a-client", "", nil) // where the answers go
	async := func(i int) string {
		return strings.Replace(send(fmt.Sprint("job-", i)), `"params":{`, `"params":{"configuration":{"returnImmediately":true},`, 1)
	}
	result(t, second(rpc(t, base+"/a2a/sink", "1.0", async(-1)))) // the follower and connections start
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	tasks := map[string]bool{}
	for i := range n {
		task := result(t, second(rpc(t, base+"/a2a/sink", "1.0", async(i))))["task"].(map[string]any)
		tasks[task["id"].(string)] = true
	}
	if grown := runtime.NumGoroutine() - before; grown > n/4 {
		t.Fatalf("%d goroutines more after %d tasks were started", grown, n)
	}

	// The receiver takes every message and answers each.
	var pulled struct {
		Messages []struct {
			MessageID string `json:"message_id"`
		} `json:"messages"`
	}
	resp, err := http.Get(base + "/atp/pending/sink?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&pulled)
	resp.Body.Close()
	if len(pulled.Messages) != n+1 {
		t.Fatalf("pulled %d messages, want %d", len(pulled.Messages), n+1)
	}
	if grown := runtime.NumGoroutine() - before; grown > n/4 {
		t.Fatalf("%d goroutines more after %d tasks were delivered", grown, n)
	}
	for _, m := range pulled.Messages {
		b, _ := json.Marshal(map[string]any{"atp_version": "1.0", "sender": "sink", "receiver": "a2a-client", "type": "result",
			"correlation_id": m.MessageID, "payload": map[string]string{"text": "done"}})
		resp, err := http.Post(base+"/atp/send", "application/json", bytes.NewReader(b))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("send result: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	// Read from the store, not through the A2A API (whose reads
	// reconcile): the tasks completed on their own.
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		open := 0
		for id := range tasks {
			rec, err := h.Store.GetRecord(ctx, a2a.KindTask, id)
			if err != nil {
				t.Fatal(err)
			}
			var tr a2a.TaskRecord
			if err := json.Unmarshal(rec.Data, &tr); err != nil {
				t.Fatal(err)
			}
			if tr.Task.Status.State != "TASK_STATE_COMPLETED" {
				open++
			}
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d answered tasks not completed", open, n)
		}
	}
}

// TestStreamSeesChangesFromElsewhere: a change to a task that does not
// come through this hub instance (here written straight into the store, as
// another instance on the same PostgreSQL would) still reaches an open
// stream, through its polls.
func TestStreamSeesChangesFromElsewhere(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Dev: true})
	register(t, base, "w", "", nil) // pulls; never answers here
	events := openStream(t, base+"/a2a/w", strings.Replace(send("far"), "SendMessage", "SendStreamingMessage", 1))
	var first struct {
		Result struct {
			Task struct{ ID string } `json:"task"`
		} `json:"result"`
	}
	select {
	case e := <-events:
		if err := json.Unmarshal([]byte(e), &first); err != nil || first.Result.Task.ID == "" {
			t.Fatalf("first event %s: %v", e, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no first event")
	}
	ctx := context.Background()
	rec, err := h.Store.GetRecord(ctx, a2a.KindTask, first.Result.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var tr map[string]any // as stored, so that nothing of it is lost
	if err := json.Unmarshal(rec.Data, &tr); err != nil {
		t.Fatal(err)
	}
	tr["task"].(map[string]any)["status"] = map[string]any{"state": "TASK_STATE_CANCELED", "timestamp": time.Now().UTC().Format(time.RFC3339Nano)}
	rec.Data, _ = json.Marshal(tr)
	if _, err := h.Store.PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the stream ended without the change")
			}
			if strings.Contains(e, "TASK_STATE_CANCELED") {
				return
			}
		case <-deadline:
			t.Fatal("a change made outside this instance never reached the stream")
		}
	}
}
