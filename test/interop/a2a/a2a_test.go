// Package a2a_test drives a real Switchboard hub with the third-party
// @a2a-js/sdk 1.3.0 (client and server). Install its packages first:
//
//	npm ci --prefix test/interop/a2a
//
// Without node_modules the tests skip, unless CI is set: then they fail.
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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

func requireNode(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs third-party programs (Node.js) against a hub: full lane, not with -short")
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node_modules missing: run `npm ci --prefix test/interop/a2a` (%v)", err)
		}
		t.Skip("node_modules missing: run `npm ci --prefix test/interop/a2a` to run the @a2a-js/sdk interop tests")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node not found: %v", err)
	}
	return dir
}

func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s: answer %d %s: %v", url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// atpWorker is an ATP worker: it answers every envelope with done: <text>
// (or only accepts it, when slow).
func atpWorker(t *testing.T, slow bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			Payload struct {
				Text string `json:"text"`
			} `json:"payload"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		w.Header().Set("Content-Type", "application/json")
		if slow {
			_, _ = io.WriteString(w, `{"status":"accepted"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "accepted", "result": map[string]string{"text": "done: " + env.Payload.Text}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

type push struct {
	Auth, Token string
	Body        map[string]any
}

func TestA2AJSClientDrivesHubAgents(t *testing.T) {
	dir := requireNode(t)
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	for id, slow := range map[string]bool{"worker": false, "slow": true} {
		var reg map[string]any
		if st := postJSON(t, base+"/atp/register", map[string]any{"agent_id": id, "callback_url": atpWorker(t, slow).URL,
			"capabilities": []string{"summarize"}}, &reg); st != 200 {
			t.Fatalf("register %s: %d %v", id, st, reg)
		}
	}
	var mu sync.Mutex
	var pushes []push
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		pushes = append(pushes, push{Auth: r.Header.Get("Authorization"), Token: r.Header.Get("X-A2A-Notification-Token"), Body: body})
		mu.Unlock()
	}))
	defer hook.Close()

	// rest-legacy (client.mjs) is not run: @a2a-js/sdk's 0.3 REST client
	// posts a push config as a TaskPushNotificationConfig, a2a-go's 0.3
	// REST handler reads a CreateTaskPushNotificationConfigRequest
	// (docs/interop.md).
	for _, mode := range []string{"v1", "compat", "legacy", "rest"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := proctest.Command(ctx, "node", "client.mjs", mode, base+"/a2a/worker", base+"/a2a/slow", hook.URL+"/push")
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("client.mjs %s: %v\n%s\n%s", mode, err, out, stderr.String())
			}
			var got struct {
				ProtocolVersion string `json:"protocolVersion"`
				Send            struct {
					State     string   `json:"state"`
					Artifacts []string `json:"artifacts"`
					History   int      `json:"history"`
				} `json:"send"`
				Stream []string `json:"stream"`
				Get    struct {
					State   string `json:"state"`
					History int    `json:"history"`
					ID      bool   `json:"id"`
				} `json:"get"`
				UnknownTask     string `json:"unknownTask"`
				Pending         string `json:"pending"`
				PushCreate      struct{ ID, Token string }
				PushGet         string   `json:"pushGet"`
				PushList        []string `json:"pushList"`
				Cancel          string   `json:"cancel"`
				CancelAgain     string   `json:"cancelAgain"`
				PushAfterDelete int      `json:"pushAfterDelete"`
				TaskID          string   `json:"taskId"`
				ListTasks       *int     `json:"listTasks"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("summary %s: %v", out, err)
			}
			t.Logf("%s: %s", mode, out)
			wantVersion := map[string]string{"v1": "1.0", "compat": "1.0", "legacy": "0.3", "rest": "1.0"}[mode]
			if got.ProtocolVersion != wantVersion {
				t.Errorf("client speaks %q, want %q", got.ProtocolVersion, wantVersion)
			}
			if got.Send.State != "TASK_STATE_COMPLETED" || len(got.Send.Artifacts) != 1 || got.Send.Artifacts[0] != "done: hello" {
				t.Errorf("send = %+v, want completed with artifact \"done: hello\"", got.Send)
			}
			if len(got.Stream) < 3 || got.Stream[0] != "task" || got.Stream[len(got.Stream)-1] != "status:TASK_STATE_COMPLETED" ||
				!contains(got.Stream, "artifact:done: streamed") {
				t.Errorf("stream = %v, want task, artifact \"done: streamed\", …, status completed", got.Stream)
			}
			if got.Get.State != "TASK_STATE_COMPLETED" || got.Get.History != 1 || !got.Get.ID {
				t.Errorf("get = %+v, want completed with 1 history message", got.Get)
			}
			// The REST transport's errors carry no JSON-RPC code, but name it.
			if !strings.HasSuffix(got.UnknownTask, ":-32001") && !strings.HasPrefix(got.UnknownTask, "RestTaskNotFoundError") {
				t.Errorf("unknown task error = %q, want code -32001", got.UnknownTask)
			}
			if got.Pending != "TASK_STATE_WORKING" && got.Pending != "TASK_STATE_SUBMITTED" {
				t.Errorf("returnImmediately task state = %q", got.Pending)
			}
			if got.PushCreate.ID != "cfg1" || got.PushCreate.Token != "tok-"+mode || got.PushGet != "cfg1" ||
				len(got.PushList) != 1 || got.PushAfterDelete != 0 {
				t.Errorf("push config round trip: %+v get=%q list=%v afterDelete=%d", got.PushCreate, got.PushGet, got.PushList, got.PushAfterDelete)
			}
			if got.Cancel != "TASK_STATE_CANCELED" || (!strings.HasSuffix(got.CancelAgain, ":-32002") && !strings.HasPrefix(got.CancelAgain, "RestTaskNotCancelableError")) {
				t.Errorf("cancel = %q, cancel again = %q (want canceled, -32002)", got.Cancel, got.CancelAgain)
			}
			if mode != "legacy" && (got.ListTasks == nil || *got.ListTasks < 2) {
				t.Errorf("listTasks = %v, want ≥ 2", got.ListTasks)
			}
			// The cancel went out as a push notification with the config's credentials.
			waitfor.True(t, "a push notification of the cancel of "+got.TaskID+" with the config's credentials", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range pushes {
					b, _ := json.Marshal(p.Body)
					if strings.Contains(string(b), got.TaskID) && p.Token == "tok-"+mode && p.Auth == "Bearer secret-"+mode &&
						(strings.Contains(string(b), "TASK_STATE_CANCELED") || strings.Contains(string(b), `"canceled"`)) {
						return true
					}
				}
				return false
			})
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// startRemoteAgent runs the @a2a-js/sdk server agent and returns its base
// URL and a function returning the lines it printed.
func startRemoteAgent(t *testing.T, dir string) (string, func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := proctest.Command(ctx, "node", "remote-agent.mjs")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &proctest.SafeBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	var mu sync.Mutex
	var lines []string
	port := make(chan string, 1)
	go func() {
		defer close(port) // the agent exited
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			mu.Lock()
			lines = append(lines, l)
			mu.Unlock()
			if p, ok := strings.CutPrefix(l, "LISTENING "); ok {
				port <- p
			}
		}
	}()
	var p string
	waitfor.OK(t, "the remote agent (remote-agent.mjs) to say LISTENING", func() error {
		var ok bool
		select {
		case p, ok = <-port:
			if !ok {
				t.Fatalf("remote-agent.mjs exited before listening:\n%s", stderr.String())
			}
			return nil
		default:
			return fmt.Errorf("stderr so far: %s", stderr.String())
		}
	})
	return "http://127.0.0.1:" + p, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}

func TestATPSenderReachesJSServerAgent(t *testing.T) {
	dir := requireNode(t)
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	remote, output := startRemoteAgent(t, dir)

	var reg map[string]any
	if st := postJSON(t, base+"/a2a/agents", map[string]any{"card_url": remote}, &reg); st != 200 {
		t.Fatalf("register remote: %d %v", st, reg)
	}
	if reg["agent_id"] != "remote-echo-agent" || reg["protocol_version"] != "1.0" {
		t.Fatalf("register remote = %v", reg)
	}

	// An ATP sender reaches the A2A agent; its receipt shows the answer.
	var sent map[string]any
	postJSON(t, base+"/atp/send?wait_ms=20000", map[string]any{"atp_version": "1.0", "message_id": "atp-to-a2a-1",
		"sender": "planner", "receiver": "remote-echo-agent", "type": "task", "payload": map[string]string{"text": "ping"}}, &sent)
	if sent["status"] != "delivered" {
		t.Fatalf("send = %v, want delivered", sent)
	}
	rc, _ := json.Marshal(sent["receipt"])
	if !strings.Contains(string(rc), `"result":{"text":"echo: ping"}`) || !strings.Contains(string(rc), "TASK_STATE_COMPLETED") {
		t.Fatalf("receipt = %s, want the remote task's answer", rc)
	}
	if !strings.Contains(output(), `"messageId":"atp-to-a2a-1"`) || !strings.Contains(output(), `"switchboard_sender":"planner"`) {
		t.Fatalf("remote agent did not see the message with its id and sender:\n%s", output())
	}

	// An A2A client on the hub reaches the remote agent through the hub.
	body := `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-via-hub","role":"ROLE_USER","parts":[{"text":"relayed"}]}}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/a2a/remote-echo-agent", strings.NewReader(body))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), "TASK_STATE_COMPLETED") || !strings.Contains(string(raw), "echo: relayed") {
		t.Fatalf("A2A → hub → A2A answer = %s", raw)
	}

	// An unreachable or invalid card is refused with a clear error.
	var bad map[string]any
	if st := postJSON(t, base+"/a2a/agents", map[string]any{"card_url": "http://127.0.0.1:1/"}, &bad); st != http.StatusBadGateway || bad["error"] != "card_unreachable" {
		t.Errorf("unreachable card: %d %v", st, bad)
	}
	notCard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"hello":1}`) }))
	defer notCard.Close()
	if st := postJSON(t, base+"/a2a/agents", map[string]any{"card_url": notCard.URL}, &bad); st != http.StatusUnprocessableEntity || bad["error"] != "invalid_card" {
		t.Errorf("invalid card: %d %v", st, bad)
	}
}
