package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// taskStream is a 2026-07-28 subscriptions/listen for task ids over HTTP:
// the task ids its acknowledgement agreed to, and its task notifications
// (the params, as they came, in order).
type taskStream struct {
	agreed []string
	notes  chan map[string]any
}

func listenTasks(t *testing.T, base, token string, ids ...string) *taskStream {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"taskIds": ids},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": mcpadapter.StatelessVersion,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{mcpadapter.TasksExtension: map[string]any{}}}}}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpadapter.StatelessVersion)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	s := &taskStream{notes: make(chan map[string]any, 100)}
	acked := make(chan []string, 1)
	go func() {
		defer close(done)
		defer close(s.notes)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m struct {
				Method string         `json:"method"`
				Params map[string]any `json:"params"`
			}
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || json.Unmarshal([]byte(d), &m) != nil {
				continue
			}
			switch m.Method {
			case "notifications/subscriptions/acknowledged":
				var agreed []string
				ids, _ := m.Params["notifications"].(map[string]any)["taskIds"].([]any)
				for _, id := range ids {
					agreed = append(agreed, id.(string))
				}
				acked <- agreed
			case "notifications/tasks":
				s.notes <- m.Params
			}
		}
	}()
	select {
	case s.agreed = <-acked:
	case <-time.After(30 * time.Second):
		t.Fatal("no acknowledgement of the listen within 30 s")
	}
	return s
}

// next is the stream's next task notification.
func (s *taskStream) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case n, ok := <-s.notes:
		if !ok {
			t.Fatal("the listen stream ended")
		}
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no task notification within 30 s")
	}
	return nil
}

// expect reads the stream's next notifications, one per task of want (in
// any order), and checks each task's status; a notification of another
// task, or a second of one, fails the test.
func (s *taskStream) expect(t *testing.T, want map[string]string) map[string]map[string]any {
	t.Helper()
	got := map[string]map[string]any{}
	for len(got) < len(want) {
		n := s.next(t)
		id, _ := n["taskId"].(string)
		status, ok := want[id]
		if !ok || got[id] != nil {
			t.Fatalf("notification %v, want one for each of %v", n, want)
		}
		if n["status"] != status {
			t.Fatalf("task %s notified %v, want %s: %v", id, n["status"], status, n)
		}
		got[id] = n
	}
	return got
}

// taskCall makes a task of a 2026-07-28 tools/call and returns its id.
func taskCall(t *testing.T, base, token, tool string, args map[string]any) string {
	t.Helper()
	r := modern(t, base, token, "tools/call", map[string]any{"name": tool, "arguments": args}, true)
	res, _ := r["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" {
		t.Fatalf("%s as a task: %v", tool, r)
	}
	return id
}

// sendPlain sends a message as a plain tools/call and returns its id.
func sendPlain(t *testing.T, base, token, to, text string) string {
	t.Helper()
	r := modern(t, base, token, "tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{"to": to, "text": text}}, false)
	id, _ := r["result"].(map[string]any)["structuredContent"].(map[string]any)["message_id"].(string)
	if id == "" {
		t.Fatalf("send to %s: %v", to, r)
	}
	return id
}

// outcome is the structured content of a 2026 notification's inlined
// result.
func outcome(n map[string]any) map[string]any {
	sc, _ := n["result"].(map[string]any)["structuredContent"].(map[string]any)
	return sc
}

// TestTaskStatusAcrossInstances2026: with two hubs on one PostgreSQL
// database, a 2026-07-28 host listening on hub A hears every status change
// of its tasks made on hub B — a send_message task ending when its
// receipt does, a wait_for_reply task ending when the answer, accepted by
// A, reaches B, a cancellation made through B (which also stops the work
// running on A), and a task left working by a stopped hub C that B's
// start-up sweep completes — while another caller's listen on A agrees to
// and hears none of them.
func TestTaskStatusAcrossInstances2026(t *testing.T) {
	db := hubtest.PostgresDB(t)
	_, a := hubtest.Start(t, hub.Options{StoreURL: db})
	_, b := hubtest.Start(t, hub.Options{StoreURL: db})
	alice, bob, carol := registerToken(t, a, "alice"), registerToken(t, a, "bob"), registerToken(t, a, "carol")

	question := sendPlain(t, a, alice, "carol", "question")
	unanswered := sendPlain(t, a, alice, "carol", "never answered")
	bobsQuestion := sendPlain(t, a, bob, "carol", "bob's question")
	sendTask := taskCall(t, b, alice, "send_message", map[string]any{"to": "carol", "text": "for the record", "message_id": "for-the-record"})
	replyTask := taskCall(t, b, alice, "wait_for_reply", map[string]any{"message_id": question})
	cancelTask := taskCall(t, a, alice, "wait_for_reply", map[string]any{"message_id": unanswered})
	bobsTask := taskCall(t, b, bob, "wait_for_reply", map[string]any{"message_id": bobsQuestion})

	mine := listenTasks(t, a, alice, sendTask, replyTask, cancelTask, bobsTask)
	if want := []string{sendTask, replyTask, cancelTask}; strings.Join(mine.agreed, ",") != strings.Join(want, ",") {
		t.Fatalf("alice's listen agreed to %v, want %v", mine.agreed, want)
	}
	mine.expect(t, map[string]string{sendTask: mcpadapter.TaskWorking, replyTask: mcpadapter.TaskWorking, cancelTask: mcpadapter.TaskWorking})
	theirs := listenTasks(t, a, bob, bobsTask, sendTask, replyTask)
	if len(theirs.agreed) != 1 || theirs.agreed[0] != bobsTask {
		t.Fatalf("bob's listen agreed to %v, want only %s", theirs.agreed, bobsTask)
	}
	theirs.expect(t, map[string]string{bobsTask: mcpadapter.TaskWorking})

	for _, c := range []struct {
		name   string
		task   string
		status string
		do     func()
		check  func(n map[string]any) bool
	}{
		{"cancelled through B", cancelTask, mcpadapter.TaskCancelled, func() {
			if r := modern(t, b, alice, "tasks/cancel", map[string]any{"taskId": cancelTask}, true); r["error"] != nil {
				t.Fatalf("cancel through B: %v", r)
			}
		}, func(map[string]any) bool { return true }},
		{"send ends with its receipt", sendTask, mcpadapter.TaskCompleted, func() {
			// carol reads her mail through A, where the receipts end, until
			// she has read the task's message (B sends it in the
			// background).
			waitFor(t, "carol to read the send task's message", func() bool {
				r := modern(t, a, carol, "tools/call", map[string]any{"name": "check_inbox", "arguments": map[string]any{"max": 50}}, false)
				sc, _ := r["result"].(map[string]any)["structuredContent"].(map[string]any)
				ms, _ := sc["messages"].([]any)
				for _, m := range ms {
					if m.(map[string]any)["message_id"] == "for-the-record" {
						return true
					}
				}
				return false
			})
		}, func(n map[string]any) bool { return outcome(n)["status"] == "delivered" }},
		{"reply accepted by A", replyTask, mcpadapter.TaskCompleted, func() {
			if code := atpSend(t, a, carol, map[string]any{"message_id": "answer", "sender": "carol", "receiver": "alice",
				"type": "task.result", "correlation_id": question, "payload": map[string]any{"text": "the answer"}}); code != http.StatusOK {
				t.Fatalf("answer: %d", code)
			}
		}, func(n map[string]any) bool {
			reply, _ := outcome(n)["reply"].(map[string]any)
			return outcome(n)["outcome"] == "reply" && reply["text"] == "the answer"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.do()
			n := mine.expect(t, map[string]string{c.task: c.status})[c.task]
			if !c.check(n) {
				t.Fatalf("notification %v", n)
			}
		})
	}
	if r := modern(t, a, alice, "tasks/get", map[string]any{"taskId": cancelTask}, true); r["result"].(map[string]any)["status"] != mcpadapter.TaskCancelled {
		t.Fatalf("the cancelled task: %v", r)
	}

	t.Run("B's start-up sweep", func(t *testing.T) {
		_, c, stopC := hubtest.StartStop(t, hub.Options{StoreURL: db})
		later := sendPlain(t, c, alice, "carol", "later")
		left := taskCall(t, c, alice, "wait_for_reply", map[string]any{"message_id": later})
		stopC() // the task stays working in the store
		s := listenTasks(t, a, alice, left)
		s.expect(t, map[string]string{left: mcpadapter.TaskWorking})
		if code := atpSend(t, a, carol, map[string]any{"sender": "carol", "receiver": "alice", "type": "task.result",
			"correlation_id": later, "payload": map[string]any{"text": "late answer"}}); code != http.StatusOK {
			t.Fatalf("answer: %d", code)
		}
		hubtest.Start(t, hub.Options{StoreURL: db}) // its sweep does the task
		n := s.expect(t, map[string]string{left: mcpadapter.TaskCompleted})[left]
		if reply, _ := outcome(n)["reply"].(map[string]any); reply["text"] != "late answer" {
			t.Fatalf("notification %v", n)
		}
	})

	// bob's listen heard nothing of alice's tasks: its next notification
	// is of his own task.
	if code := atpSend(t, a, carol, map[string]any{"sender": "carol", "receiver": "bob", "type": "task.result",
		"correlation_id": bobsQuestion, "payload": map[string]any{"text": "for bob"}}); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	theirs.expect(t, map[string]string{bobsTask: mcpadapter.TaskCompleted})
}

// session2025 opens a 2025-11-25 session on base acting as agent (dev
// mode; "" for the host agent) and returns a function that posts one
// JSON-RPC request in it and returns its answer.
func session2025(t *testing.T, base, agent string) func(body string) map[string]any {
	t.Helper()
	hdr := map[string]string{}
	if agent != "" {
		hdr[mcpadapter.AgentHeader] = agent
	}
	resp := rawPost(t, base+"/mcp", initBody, hdr)
	resp.Body.Close()
	hdr["Mcp-Session-Id"], hdr["Mcp-Protocol-Version"] = resp.Header.Get("Mcp-Session-Id"), "2025-11-25"
	rawPost(t, base+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr).Body.Close()
	return func(body string) map[string]any {
		t.Helper()
		resp := rawPost(t, base+"/mcp", body, hdr)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var out map[string]any
			if json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &out) == nil && out["id"] != nil {
				return out
			}
		}
		t.Fatalf("%s: no answer", body)
		return nil
	}
}

// task2025 makes a task of a 2025-11-25 wait_for_reply in the session of
// rpc and returns its id.
func task2025(t *testing.T, rpc func(string) map[string]any, messageID string) string {
	t.Helper()
	r := rpc(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait_for_reply","task":{"ttl":60000},"arguments":{"message_id":"` + messageID + `"}}}`)
	task, _ := r["result"].(map[string]any)["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" {
		t.Fatalf("wait_for_reply as a task: %v", r)
	}
	return id
}

// send2025 sends a message in the session of rpc and returns its id.
func send2025(t *testing.T, rpc func(string) map[string]any, to, text string) string {
	t.Helper()
	r := rpc(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"` + to + `","text":"` + text + `"}}}`)
	id, _ := r["result"].(map[string]any)["structuredContent"].(map[string]any)["message_id"].(string)
	if id == "" {
		t.Fatalf("send: %v", r)
	}
	return id
}

// TestTaskStatusAcrossInstances2025: with two hubs on one PostgreSQL
// database, the standalone stream of a 2025-11-25 session on hub A hears
// notifications/tasks/status of its caller's tasks changed on hub B — a
// task made on A and cancelled through B, one made on B that completes
// when the answer, accepted by A, reaches it — while the stream of
// another agent's session on A hears only of that agent's own task.
func TestTaskStatusAcrossInstances2025(t *testing.T) {
	db := hubtest.PostgresDB(t)
	_, a := hubtest.Start(t, hub.Options{StoreURL: db, Dev: true})
	_, b := hubtest.Start(t, hub.Options{StoreURL: db, Dev: true})
	if code := postJSON(t, a+"/atp/register", map[string]any{"agent_id": "carol"}, nil); code != http.StatusOK {
		t.Fatalf("register carol: %d", code)
	}
	stream := func(agent string) chan map[string]any {
		notes, opened := make(chan map[string]any, 100), make(chan struct{})
		hc := &http.Client{Transport: &noteTransport{agent: agent, notes: notes, opened: opened}}
		c := sdk.NewClient(&sdk.Implementation{Name: "go-client", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: a + "/mcp", HTTPClient: hc},
			&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		select {
		case <-opened:
		case <-time.After(30 * time.Second):
			t.Fatal("no standalone stream within 30 s")
		}
		return notes
	}
	mine, theirs := stream(""), stream("someone-else")
	hostA, hostB, otherB := session2025(t, a, ""), session2025(t, b, ""), session2025(t, b, "someone-else")
	question, unanswered := send2025(t, hostA, "carol", "question"), send2025(t, hostA, "carol", "never answered")
	otherQuestion := send2025(t, otherB, "carol", "another question")
	onB := task2025(t, hostB, question)
	onA := task2025(t, hostA, unanswered)
	others := task2025(t, otherB, otherQuestion)

	if r := hostB(`{"jsonrpc":"2.0","id":4,"method":"tasks/cancel","params":{"taskId":"` + onA + `"}}`); r["error"] != nil {
		t.Fatalf("cancel through B: %v", r)
	}
	if n := waitNote(t, mine, "notifications/tasks/status", onA, mcpadapter.TaskCancelled); n["ttl"] == nil {
		t.Fatalf("2025 Task shape: %v", n)
	}
	if code := atpSend(t, a, "", map[string]any{"sender": "carol", "receiver": "mcp-host", "type": "task.result",
		"correlation_id": question, "payload": map[string]any{"text": "the answer"}}); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	if n := waitNote(t, mine, "notifications/tasks/status", onB, mcpadapter.TaskCompleted); n["result"] != nil || n["pollInterval"] == nil {
		t.Fatalf("2025 Task shape: %v", n)
	}
	if code := atpSend(t, a, "", map[string]any{"sender": "carol", "receiver": "someone-else", "type": "task.result",
		"correlation_id": otherQuestion, "payload": map[string]any{"text": "yours"}}); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	// The other agent's stream: its own task's end is the first it hears.
	select {
	case n := <-theirs:
		if n["taskId"] != others || n["status"] != mcpadapter.TaskCompleted {
			t.Fatalf("another agent's stream heard %v, want only its own task %s completed", n, others)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the other agent's stream heard nothing of its own task within 30 s")
	}
}
