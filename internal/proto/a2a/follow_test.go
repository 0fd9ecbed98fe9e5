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

	"github.com/switchboard-hub/switchboard/internal/clocktest"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
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
	before := runtime.NumGoroutine()
	// settled waits until the hub holds at most n/4 goroutines more than
	// before: store reads start short-lived goroutines of the SQLite
	// driver (one per read that may be canceled), so a count may be
	// high for a moment, but not for long.
	settled := func(when string) {
		t.Helper()
		waitfor.OK(t, fmt.Sprintf("at most %d goroutines more %s", n/4, when), func() error {
			if g := runtime.NumGoroutine() - before; g > n/4 {
				return fmt.Errorf("%d more", g)
			}
			return nil
		})
	}
	var tasks []string
	for i := range n {
		task := result(t, second(rpc(t, base+"/a2a/sink", "1.0", asyncSend(fmt.Sprint("job-", i)))))["task"].(map[string]any)
		tasks = append(tasks, task["id"].(string))
	}
	settled(fmt.Sprintf("after %d tasks were started", n))

	// The receiver takes every message and answers each.
	ids := pullIDs(t, base, "sink")
	if len(ids) != n+1 {
		t.Fatalf("pulled %d messages, want %d", len(ids), n+1)
	}
	settled(fmt.Sprintf("after %d tasks were delivered", n))
	for _, id := range ids {
		answerATP(t, base, id)
	}
	// The tasks completed on their own.
	waitfor.OK(t, fmt.Sprintf("the %d answered tasks to complete on their own", n), func() error {
		if got := completed(t, h.Store, tasks); got < n {
			return fmt.Errorf("%d of %d completed", got, n)
		}
		return nil
	})
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
	if e := waitfor.Recv(t, "the stream's first event", events); json.Unmarshal([]byte(e), &first) != nil || first.Result.Task.ID == "" {
		t.Fatalf("first event %s", e)
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
	for {
		if e := waitfor.Recv(t, "a change made outside this instance to reach the stream", events); strings.Contains(e, "TASK_STATE_CANCELED") {
			return
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
	waitfor.True(t, "the task answered after the restart to complete", func() bool { return completed(t, h2.Store, []string{id}) == 1 })
	waitfor.OK(t, "a push of the completion", func() error {
		if last := mustJSON(pushes.last()); !strings.Contains(last, "TASK_STATE_COMPLETED") {
			return fmt.Errorf("last push %s", last)
		}
		return nil
	})
	left := func() int {
		marks, err := h2.Store.ListRecords(ctx, a2a.KindFollow, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(marks)
	}
	waitfor.OK(t, "the follow marks to go once the task settled", func() error {
		if n := left(); n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
}

// TestFollowerChecksOnItsOwn: a result that reaches the store without this
// instance's relay hearing of it (accepted by another instance on the same
// store) still completes tasks, through the follower's own checks, and
// every task checked is checked again until it settles.
//
// The hub runs on a fake clock: the checks are due on it (after 1 s, then
// 2 s, 4 s, … up to 10 s apart), so the test moves it on while it waits
// instead of waiting seconds; the follower's passes still run every
// quarter second of real time.
func TestFollowerChecksOnItsOwn(t *testing.T) {
	const n = 20
	clock := clocktest.New(time.Now())
	h, base := hubtest.Start(t, hub.Options{Dev: true, Clock: clock})
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
	// completes waits, moving the hub's clock on by a quarter second at
	// each look, until want tasks are complete: only the follower's own
	// checks can complete them (no event reaches this instance).
	completes := func(want int) {
		t.Helper()
		waitfor.OK(t, fmt.Sprintf("the follower's own checks to complete %d tasks answered elsewhere", want), func() error {
			clock.Advance(250 * time.Millisecond)
			if got := completed(t, h.Store, tasks); got < want {
				return fmt.Errorf("%d of %d completed", got, want)
			}
			return nil
		})
	}
	// Half answered before the first checks; half after the clock moved
	// on 16 s, once the checks of the tasks still open have spaced out.
	answer(marks[:n/2])
	completes(n / 2)
	clock.Advance(16 * time.Second)
	answer(marks[n/2:])
	completes(n)
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
