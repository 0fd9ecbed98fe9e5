package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
	"github.com/switchboard-hub/switchboard/test/interop/a2a/testagent"
)

// fetchCard reads an agent's card from the hub.
func fetchCard(t *testing.T, url string) *sdk.AgentCard {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c sdk.AgentCard
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatalf("card %s: %v", url, err)
	}
	return &c
}

// TestGoSDKClientEveryBinding drives an agent on the hub with a2a-go's
// client (a2aclient) over each interface its card lists: JSON-RPC and
// HTTP+JSON in 1.0 and 0.3, and gRPC. The agent is an ATP worker that
// answers inline.
func TestGoSDKClientEveryBinding(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	w := atpWorker(t, false)
	postJSON(t, base+"/atp/register", map[string]any{"agent_id": "worker", "callback_url": w.URL}, nil)
	card := fetchCard(t, base+"/a2a/worker/.well-known/agent-card.json")
	seen := map[string]bool{}
	for _, iface := range card.SupportedInterfaces {
		name := string(iface.ProtocolBinding) + " " + string(iface.ProtocolVersion)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			opts := []a2aclient.FactoryOption{
				a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())),
				a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}),
				a2av0.WithRESTTransport(a2av0.RESTTransportConfig{}),
			}
			c, err := a2aclient.NewFromEndpoints(ctx, []*sdk.AgentInterface{iface}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Destroy()
			res, err := c.SendMessage(ctx, &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("hi "+name))})
			if err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			task, ok := res.(*sdk.Task)
			if !ok || task.Status.State != sdk.TaskStateCompleted || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Text() != "done: hi "+name {
				t.Fatalf("SendMessage answered %#v, want a completed task with the worker's answer", res)
			}
			got, err := c.GetTask(ctx, &sdk.GetTaskRequest{ID: task.ID})
			if err != nil || got.ID != task.ID || got.Status.State != sdk.TaskStateCompleted {
				t.Fatalf("GetTask: %+v %v", got, err)
			}
			// (gRPC: the tenant of a CancelTask request must reach the hub.)
			// (a2a-go's own 0.3 REST client reads its 0.3 REST server's
			// not-found as a server error: any error there.)
			_, err = c.CancelTask(ctx, &sdk.CancelTaskRequest{ID: "no-such-task"})
			if name == "HTTP+JSON 0.3" && err == nil || name != "HTTP+JSON 0.3" && !errors.Is(err, sdk.ErrTaskNotFound) {
				t.Errorf("CancelTask of an unknown task: %v, want task not found", err)
			}
			var states []sdk.TaskState
			for ev, err := range c.SendStreamingMessage(ctx, &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("streamed"))}) {
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
				switch e := ev.(type) {
				case *sdk.Task:
					states = append(states, e.Status.State)
				case *sdk.TaskStatusUpdateEvent:
					states = append(states, e.Status.State)
				}
			}
			if len(states) < 2 || states[len(states)-1] != sdk.TaskStateCompleted {
				t.Fatalf("stream states %v, want the task then its completion", states)
			}
			if iface.ProtocolVersion == "0.3" {
				return // 0.3 has no ListTasks
			}
			list, err := c.ListTasks(ctx, &sdk.ListTasksRequest{PageSize: 100})
			if err != nil {
				t.Fatalf("ListTasks: %v", err)
			}
			found := false
			for _, x := range list.Tasks {
				found = found || x.ID == task.ID
			}
			if !found {
				t.Fatalf("ListTasks does not list %s: %d tasks", task.ID, len(list.Tasks))
			}
		})
	}
	for _, want := range []string{"JSONRPC 1.0", "HTTP+JSON 1.0", "GRPC 1.0", "JSONRPC 0.3", "HTTP+JSON 0.3"} {
		if !seen[want] {
			t.Errorf("the card lists no %s interface: %+v", want, card.SupportedInterfaces)
		}
	}
}

// TestGoSDKAgentBehindHub registers an agent built on a2a-go's server
// (a2asrv) as a remote agent: an A2A client of the hub and an ATP sender
// both reach it, and its task states come through (a completed echo, an
// input-required task steered by the message id).
func TestGoSDKAgentBehindHub(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	var agent *httptest.Server
	agent = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		testagent.Handler(agent.URL).ServeHTTP(w, r)
	}))
	defer agent.Close()
	var reg struct {
		AgentID string `json:"agent_id"`
	}
	if code := postJSON(t, base+"/a2a/agents", map[string]any{"card_url": agent.URL, "agent_id": "goagent"}, &reg); code != 200 {
		t.Fatalf("register: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := a2aclient.NewFromCard(ctx, fetchCard(t, base+"/a2a/goagent/.well-known/agent-card.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id    string
		state sdk.TaskState
		text  string
	}{
		{"plain-1", sdk.TaskStateCompleted, "echo: ping"},
		{"tck-input-required-1", sdk.TaskStateInputRequired, "more input, please"},
	} {
		m := sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("ping"))
		m.ID = tc.id
		res, err := c.SendMessage(ctx, &sdk.SendMessageRequest{Message: m})
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		task := res.(*sdk.Task)
		if task.Status.State != tc.state || task.Status.Message == nil || task.Status.Message.Parts[0].Text() != tc.text {
			t.Errorf("%s: task %s %+v, want %s with %q", tc.id, task.Status.State, task.Status.Message, tc.state, tc.text)
		}
	}
	var sent struct {
		Status string `json:"status"`
	}
	postJSON(t, base+"/atp/register", map[string]any{"agent_id": "planner"}, nil)
	postJSON(t, base+"/atp/send", map[string]any{"atp_version": "1.0", "message_id": "atp-to-go", "sender": "planner", "receiver": "goagent",
		"type": "task.request", "ttl_ms": 30000, "payload": map[string]string{"text": "from atp"}}, &sent)
	waitfor.OKWithin(t, 20*time.Second, "the ATP message to the Go agent to be delivered", func() error {
		var rc struct {
			Status string          `json:"status"`
			Reply  json.RawMessage `json:"receipt"`
		}
		resp, err := http.Get(base + "/atp/receipts/atp-to-go")
		if err != nil {
			return err
		}
		_ = json.NewDecoder(resp.Body).Decode(&rc)
		resp.Body.Close()
		if rc.Status != "delivered" {
			return fmt.Errorf("status %q", rc.Status)
		}
		if !strings.Contains(string(rc.Reply), "echo: from atp") {
			t.Fatalf("receipt reply %s, want the agent's echo", rc.Reply)
		}
		return nil
	})
}
