package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestAnswerToHelper: the agent a hidden helper wrote to may answer it
// (an A2A task's reply path); nobody else may write to the helper, and the
// answer's author is checked as for any answer.
func TestAnswerToHelper(t *testing.T) {
	f := newFixture(t, core.Config{})
	hub := core.InternalPrincipal("a2a")
	helper := f.relay.InternalID("a2a-reply", "task-1")
	if _, _, err := f.relay.RegisterAs(f.ctx, hub, &core.Agent{ID: helper, Endpoint: core.Endpoint{Kind: core.EndpointPull}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	f.register(t, "carol", core.EndpointPull)
	if _, err := f.relay.SendAs(f.ctx, hub, &core.Message{ID: "m", Sender: helper, Receiver: "planner", Parts: []core.Part{{Kind: core.PartText, Text: "q"}}}); err != nil {
		t.Fatal(err)
	}
	planner := core.AgentPrincipal("planner", "")
	carol := core.AgentPrincipal("carol", "")
	text := []core.Part{{Kind: core.PartText, Text: "a"}}
	for _, c := range []struct {
		name string
		p    core.Principal
		m    *core.Message
		want error
	}{
		{"the receiver answers", planner, &core.Message{ID: "a1", Sender: "planner", Receiver: helper, CorrelationID: "m", Parts: text}, nil},
		{"the receiver writes without answering", planner, &core.Message{ID: "a2", Sender: "planner", Receiver: helper, Parts: text}, core.ErrUnknownReceiver},
		{"another agent answers", carol, &core.Message{ID: "a3", Sender: "carol", Receiver: helper, CorrelationID: "m", Parts: text}, core.ErrUnknownReceiver},
		{"answer to a message that does not exist", planner, &core.Message{ID: "a4", Sender: "planner", Receiver: helper, CorrelationID: "nope", Parts: text}, core.ErrUnknownReceiver},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.relay.SendAs(f.ctx, c.p, c.m)
			if !errors.Is(err, c.want) && (c.want != nil || err != nil) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			_, gerr := f.relay.ReceiptFor(f.ctx, core.AdminPrincipal(), c.m.ID)
			if stored := gerr == nil; stored != (c.want == nil) {
				t.Fatalf("stored = %v, want %v", stored, c.want == nil)
			}
		})
	}
}
