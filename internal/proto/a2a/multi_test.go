package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
)

// slowPolling serves, beside hub h, a second A2A adapter on h's relay and
// store whose clients waiting on a task re-read it unwoken only after an
// hour (Options.TaskPoll): what they see of another instance's change
// within the test's waits, only the announcement of that change can have
// brought. It authenticates as the hub does, and runs (Run) until the test
// ends; it returns the adapter's base URL.
func slowPolling(t *testing.T, h *hub.Hub) string {
	t.Helper()
	records, ok := h.Store.(core.RecordStore)
	if !ok {
		t.Fatalf("the hub's store %T keeps no records", h.Store)
	}
	srv := a2a.New(h.Relay, a2a.Options{Records: records, Secured: true, TaskPoll: time.Hour, Logger: hubtest.Logger(t)})
	mux := http.NewServeMux()
	srv.Mount(mux)
	authn := &auth.Authenticator{Creds: h.Creds, AdminHash: auth.Hash(admin)}
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := authn.Authenticate(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r.WithContext(auth.With(r.Context(), p)))
	}))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	t.Cleanup(func() { web.CloseClientConnections(); web.Close(); cancel(); wg.Wait() })
	return web.URL
}

// stream is an A2A JSON-RPC stream (SendStreamingMessage or
// SubscribeToTask): its first event, as it came, and a channel that gets
// its last one when it ends.
type stream struct {
	first string
	last  <-chan string
}

func openStream(t *testing.T, base, agent, token, method string, params any) stream {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/a2a/"+agent, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	first, last := make(chan string, 1), make(chan string, 1)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		ev := ""
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				if ev == "" {
					first <- d
				}
				ev = d
			}
		}
		last <- ev
	}()
	select {
	case s := <-first:
		return stream{first: s, last: last}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s sent no first event within 30 s", method)
	}
	return stream{}
}

// end waits for the stream's end and returns its last event.
func (s stream) end(t *testing.T) string {
	t.Helper()
	select {
	case ev := <-s.last:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end within 30 s")
	}
	return ""
}

// taskOf is the id of the task in a stream's first event.
func taskOf(t *testing.T, ev string) string {
	t.Helper()
	var m struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if json.Unmarshal([]byte(ev), &m) != nil || m.Result.Task.ID == "" {
		t.Fatalf("first event %s: no task", ev)
	}
	return m.Result.Task.ID
}

// TestTaskUpdatesAcrossInstances: with two hubs on one PostgreSQL
// database, a client waiting on a task through hub B — SubscribeToTask, a
// streaming send, a blocking send — gets the change hub A made to it at
// once, from A's announcement: B's clients re-read unwoken only after an
// hour. A's follower completes a task when its agent's answer reaches A,
// and a cancel through A ends the stream and the blocking send on B.
// Another agent still may not subscribe to the task through B.
func TestTaskUpdatesAcrossInstances(t *testing.T) {
	db := hubtest.PostgresDB(t)
	_, a := hubtest.Start(t, hub.Options{StoreURL: db})
	hb, _ := hubtest.Start(t, hub.Options{StoreURL: db})
	b := slowPolling(t, hb)
	alice, carol := register(t, a, admin, "alice", ""), register(t, a, admin, "carol", "")
	wtok := register(t, a, admin, "worker", "")
	register(t, a, admin, "idle", "") // never answers

	t.Run("completed by A's follower", func(t *testing.T) {
		id := rpc(t, a, "worker", alice, "SendMessage", sendParams("q-1", "question", "", true)).task(t)["id"].(string)
		s := openStream(t, b, "worker", alice, "SubscribeToTask", map[string]any{"id": id})
		if c := rpc(t, b, "worker", carol, "SubscribeToTask", map[string]any{"id": id}); !strings.Contains(c.raw, fmt.Sprintf(`"code":%d`, a2a.CodeTaskNotFound)) {
			t.Fatalf("carol's subscription to alice's task through B: %s, want %d", c.raw, a2a.CodeTaskNotFound)
		}
		ms := pull(t, a, wtok, "worker")
		if len(ms) != 1 {
			t.Fatalf("the worker got %v, want the task's message", ms)
		}
		start := time.Now()
		if c := atpSend(t, a, wtok, map[string]any{"sender": "worker", "receiver": "alice", "type": "task.result",
			"correlation_id": ms[0]["message_id"], "payload": map[string]string{"text": "the answer"}}); c.status != 200 {
			t.Fatalf("the worker's answer: %d %s", c.status, c.raw)
		}
		if last := s.end(t); !strings.Contains(last, "TASK_STATE_COMPLETED") || !strings.Contains(last, "the answer") {
			t.Fatalf("the subscription on B ended with %s", last)
		}
		t.Logf("answer on A → completion on B's subscription: %v", time.Since(start))
	})

	cancel := func(t *testing.T, id string) {
		t.Helper()
		if c := rpc(t, a, "idle", alice, "CancelTask", map[string]any{"id": id}); state(c.result(t)) != "TASK_STATE_CANCELED" {
			t.Fatalf("cancel through A: %s", c.raw)
		}
	}
	t.Run("streaming send canceled through A", func(t *testing.T) {
		s := openStream(t, b, "idle", alice, "SendStreamingMessage", sendParams("s-1", "streamed", "", false))
		start := time.Now()
		cancel(t, taskOf(t, s.first))
		if last := s.end(t); !strings.Contains(last, "TASK_STATE_CANCELED") {
			t.Fatalf("the stream on B ended with %s", last)
		}
		t.Logf("cancel through A → end of B's stream: %v", time.Since(start))
	})

	t.Run("blocking send canceled through A", func(t *testing.T) {
		answer := make(chan call, 1)
		go func() { // not t: it may not fail the test from here
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
				"params": sendParams("b-1", "blocking", "", false)})
			req, _ := http.NewRequest(http.MethodPost, b+"/a2a/idle", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("A2A-Version", "1.0")
			req.Header.Set("Authorization", "Bearer "+alice)
			var c call
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				c.raw = err.Error()
			} else {
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				c = call{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
				_ = json.Unmarshal(raw, &c.body)
			}
			answer <- c
		}()
		// The task, as A lists it once B has made it (alice's only open
		// task with idle) and relayed its message (she may see it then).
		var id string
		waitFor(t, 30*time.Second, "B to make and relay the blocking send's task", func() bool {
			ts, _ := rpc(t, a, "idle", alice, "ListTasks", map[string]any{}).result(t)["tasks"].([]any)
			for _, x := range ts {
				if tk := x.(map[string]any); state(tk) != "TASK_STATE_CANCELED" {
					id, _ = tk["id"].(string)
				}
			}
			return id != "" && rpc(t, a, "idle", alice, "GetTask", map[string]any{"id": id}).code() == 0
		})
		start := time.Now()
		cancel(t, id)
		select {
		case c := <-answer:
			if state(c.task(t)) != "TASK_STATE_CANCELED" {
				t.Fatalf("the blocking send on B answered %d %s", c.status, c.raw)
			}
			t.Logf("cancel through A → answer of B's blocking send: %v", time.Since(start))
		case <-time.After(30 * time.Second):
			t.Fatal("the blocking send on B did not answer within 30 s")
		}
	})
}
