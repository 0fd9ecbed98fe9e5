// Package testagent is an A2A agent built on the official Go SDK's server
// (a2asrv), for interop tests and the A2A TCK runner: registered on a hub
// as a remote agent, it stands behind the hub's A2A bindings.
//
// It answers each message with a task, steered like the TCK's own test
// agents by the message's id (or, when the hub relays it, the client's
// id in the metadata "a2a_message_id"):
//
//	prefix                 task
//	tck-input-required     input-required, asking for more
//	tck-auth-required      auth-required
//	tck-reject-task        rejected
//	tck-fail-task          failed
//	anything else          completed, artifact "echo: <text>"
package testagent

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// executor is the agent's logic.
type executor struct{}

// steer is the id the agent is steered by.
func steer(m *a2a.Message) string {
	if id, ok := m.Metadata["a2a_message_id"].(string); ok && id != "" {
		return id
	}
	return m.ID
}

func text(m *a2a.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// Execute implements a2asrv.AgentExecutor.
func (executor) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		id := steer(ec.Message)
		reply := func(s string) *a2a.Message {
			return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(s))
		}
		var ev *a2a.TaskStatusUpdateEvent
		switch {
		case strings.HasPrefix(id, "tck-input-required"):
			ev = a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, reply("more input, please"))
		case strings.HasPrefix(id, "tck-auth-required"):
			ev = a2a.NewStatusUpdateEvent(ec, a2a.TaskStateAuthRequired, reply("authorization, please"))
		case strings.HasPrefix(id, "tck-reject-task"):
			ev = a2a.NewStatusUpdateEvent(ec, a2a.TaskStateRejected, reply("rejected"))
		case strings.HasPrefix(id, "tck-fail-task"):
			ev = a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, reply("failed"))
		default:
			out := "echo: " + text(ec.Message)
			if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(out)), nil) {
				return
			}
			ev = a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, reply(out))
		}
		yield(ev, nil)
	}
}

// Cancel implements a2asrv.AgentExecutor.
func (executor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// Card is the agent's card for an agent served at base (its JSON-RPC
// endpoint is base itself).
func Card(base string) *a2a.AgentCard {
	return &a2a.AgentCard{
		Name: "Go SDK echo agent", Description: "An a2asrv agent that echoes, steered by message id prefixes", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base, a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "echo", Name: "echo", Description: "echoes the text", Tags: []string{"echo"}}},
	}
}

// Handler serves the agent at base: its card at
// /.well-known/agent-card.json and JSON-RPC at /.
func Handler(base string) http.Handler {
	mux := http.NewServeMux()
	card, _ := json.Marshal(Card(base))
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(card)
	})
	mux.Handle("POST /", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(executor{})))
	return mux
}
