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

	"github.com/switchboard-hub/switchboard/internal/core"
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
	register(t, base, "sink", "", nil)                                   // pulls, answers later
	register(t, base, "a2a-client", "", nil)                             // where the answers go
	result(t, second(rpc(t, base+"/a2a/sink", "1.0", asyncSend("job")))) // the follower and connections start
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	// grown is how many goroutines more the hub holds: the least of a few
	// counts over up to a second, since store reads start short-lived
	// goroutines of the SQLite driver (one per read that may be canceled).
	grown := func() int {
		g := runtime.NumGoroutine() - before
		for range 20 {
			if g <= n/4 {
				break
			}
			time.Sleep(50 * time.Millisecond)
			g = min(g, runtime.NumGoroutine()-before)
		}
		return g
	}
	var tasks []string
	for i := range n {
		task := result(t, second(rpc(t, base+"/a2a/sink", "1.0", asyncSend(fmt.Sprint("job-", i)))))["task"].(map[string]any)
		tasks = append(tasks, task["id"].(string))
	}
	if g := grown(); g > n/4 {
		t.Fatalf("%d goroutines more after %d tasks were started", g, n)
	}

	// The receiver takes every message and answers each.
	ids := pullIDs(t, base, "sink")
	if len(ids) != n+1 {
		t.Fatalf("pulled %d messages, want %d", len(ids), n+1)
	}
	if g := grown(); g > n/4 {
		t.Fatalf("%d goroutines more after %d tasks were delivered", g, n)
	}
	for _, id := range ids {
		answerATP(t, base, id)
	}
	// The tasks completed on their own.
	within(t, 20*time.Second, func() string {
		return fmt.Sprintf("%d of %d answered tasks completed", completed(t, h.Store, tasks), n)
	}, func() bool { return completed(t, h.Store, tasks) == n })
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

// TestTasksFollowedAcrossRestart: a task left open when its hub stops is
// followed by the next hub on the same store. Its answer, which arrives
// after the restart, completes it and is pushed to its push notification
// config with no client asking, and the follow marks are then gone.
func TestTasksFollowedAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	h1, base1, stop1 := hubtest.StartStop(t, hub.Options{Dev: true, DataDir: dir})
	register(t, base1, "sink", "", nil)       // pulls, answers after the restart
	register(t, base1, "a2a-client", "", nil) // where the answers go
	pushes := startWorker(t, http.StatusOK, "{}")
	body := strings.Replace(asyncSend("across"), `"configuration":{`, `"configuration":{"taskPushNotificationConfig":{"url":"`+pushes.srv.URL+`","token":"tok"},`, 1)
	task := result(t, second(rpc(t, base1+"/a2a/sink", "1.0", body)))["task"].(map[string]any)
	id := task["id"].(string)
	ctx := context.Background()
	marks, err := h1.Store.ListRecords(ctx, a2a.KindFollow, "", 0)
	if err != nil || len(marks) != 1 {
		t.Fatalf("follow marks before the restart: %d, %v", len(marks), err)
	}
	stop1()

	h2, base2 := hubtest.Start(t, hub.Options{Dev: true, DataDir: dir})
	if ids := pullIDs(t, base2, "sink"); len(ids) != 1 || ids[0] != marks[0].ID {
		t.Fatalf("pulled %v, want the marked message %s", ids, marks[0].ID)
	}
	answerATP(t, base2, marks[0].ID)
	within(t, 20*time.Second, func() string { return "the task answered after the restart did not complete" },
		func() bool { return completed(t, h2.Store, []string{id}) == 1 })
	within(t, 20*time.Second, func() string { return "no push of the completion; last push " + mustJSON(pushes.last()) },
		func() bool { return strings.Contains(mustJSON(pushes.last()), "TASK_STATE_COMPLETED") })
	left := func() int {
		marks, err := h2.Store.ListRecords(ctx, a2a.KindFollow, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(marks)
	}
	within(t, 10*time.Second, func() string { return fmt.Sprintf("%d follow marks left after the task settled", left()) },
		func() bool { return left() == 0 })
}

// TestFollowerChecksOnItsOwn: a result that reaches the store without this
// instance's relay hearing of it (accepted by another instance on the same
// store) still completes tasks, through the follower's own checks, and
// every task checked is checked again until it settles.
func TestFollowerChecksOnItsOwn(t *testing.T) {
	const n = 20
	h, base := hubtest.Start(t, hub.Options{Dev: true})
	register(t, base, "sink", "", nil)
	register(t, base, "a2a-client", "", nil)
	ctx := context.Background()
	other := core.NewRelay(h.Store, nil, core.Config{}, nil) // another instance
	var tasks []string
	for i := range n {
		task := result(t, second(rpc(t, base+"/a2a/sink", "1.0", asyncSend(fmt.Sprint("far-", i)))))["task"].(map[string]any)
		tasks = append(tasks, task["id"].(string))
	}
	marks, err := h.Store.ListRecords(ctx, a2a.KindFollow, "", 0)
	if err != nil || len(marks) != n {
		t.Fatalf("%d follow marks, want %d (%v)", len(marks), n, err)
	}
	answer := func(marks []core.Record) {
		for _, m := range marks {
			if _, err := other.Send(ctx, &core.Message{ID: "r-" + m.ID, Sender: "sink", Receiver: "a2a-client", Type: "result",
				CorrelationID: m.ID, Parts: []core.Part{{Kind: core.PartText, Text: "done elsewhere"}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Half answered after the first checks, half once they have spaced out.
	time.Sleep(1500 * time.Millisecond)
	answer(marks[:n/2])
	time.Sleep(2 * time.Second)
	answer(marks[n/2:])
	within(t, 20*time.Second, func() string {
		return fmt.Sprintf("%d of %d tasks completed by results accepted elsewhere", completed(t, h.Store, tasks), n)
	}, func() bool { return completed(t, h.Store, tasks) == n })
}

// asyncSend is a SendMessage of text that returns at once.
func asyncSend(text string) string {
	return strings.Replace(send(text), `"params":{`, `"params":{"configuration":{"returnImmediately":true},`, 1)
}

// pullIDs pulls the agent's pending messages over ATP and returns their ids.
func pullIDs(t *testing.T, base, agent string) []string {
	t.Helper()
	var pulled struct {
		Messages []struct {
			MessageID string `json:"message_id"`
		} `json:"messages"`
	}
	resp, err := http.Get(base + "/atp/pending/" + agent + "?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&pulled); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(pulled.Messages))
	for i, m := range pulled.Messages {
		ids[i] = m.MessageID
	}
	return ids
}

// answerATP sends, as "sink" over ATP, the result of message id.
func answerATP(t *testing.T, base, id string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"atp_version": "1.0", "sender": "sink", "receiver": "a2a-client", "type": "result",
		"correlation_id": id, "payload": map[string]string{"text": "done"}})
	resp, err := http.Post(base+"/atp/send", "application/json", bytes.NewReader(b))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("send result: %v %v", err, resp)
	}
	resp.Body.Close()
}

// completed counts the tasks that are completed in the store (read from
// the store, not through the A2A API, whose reads reconcile).
func completed(t *testing.T, st core.RecordStore, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		rec, err := st.GetRecord(context.Background(), a2a.KindTask, id)
		if err != nil {
			t.Fatal(err)
		}
		var tr a2a.TaskRecord
		if err := json.Unmarshal(rec.Data, &tr); err != nil {
			t.Fatal(err)
		}
		if tr.Task.Status.State == "TASK_STATE_COMPLETED" {
			n++
		}
	}
	return n
}

// within fails the test unless ok holds within d; what says what did not
// happen.
func within(t *testing.T, d time.Duration, what func() string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
	}
}
