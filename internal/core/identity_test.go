package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestIdentityGenerations: an id deregistered and registered again is a
// new identity that sees nothing of the old one, and the old one's mail
// ends as dead letters.
func TestIdentityGenerations(t *testing.T) {
	f := newFixture(t, core.Config{})
	hub := core.InternalPrincipal("test")
	for _, id := range []string{"alice", "carol"} {
		f.register(t, id, core.EndpointPull)
	}
	oldCred := core.AgentPrincipal("alice", f.clock.Now())
	f.clock.Advance(time.Second)
	for _, m := range []*core.Message{
		{ID: "out", Sender: "alice", Receiver: "carol", ConversationID: "c1"},
		{ID: "in", Sender: "carol", Receiver: "alice", ConversationID: "c1"},
		{ID: "answer", Sender: "carol", Receiver: "alice", CorrelationID: "out"},
	} {
		if _, err := f.relay.SendAs(f.ctx, hub, m); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(time.Second)
	if err := f.relay.DeregisterAs(f.ctx, oldCred, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"in", "answer"} {
		rc, err := f.relay.ReceiptFor(f.ctx, core.AdminPrincipal(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Status != core.StatusRejected || rc.Code != 410 || rc.LastError != core.DetailDeregistered || !rc.Status.DeadLetter() {
			t.Errorf("%s after the deregistration: %s %d %q, want a rejected dead letter 410 %q", id, rc.Status, rc.Code, rc.LastError, core.DetailDeregistered)
		}
	}
	f.clock.Advance(time.Second)
	if _, _, err := f.relay.RegisterAs(f.ctx, core.Anonymous(), &core.Agent{ID: "alice"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	newCred := core.AgentPrincipal("alice", f.clock.Now())
	for _, c := range []struct {
		name string
		do   func() error
		want error
	}{
		{"old credential acts", func() error {
			_, err := f.relay.PullAs(f.ctx, oldCred, "alice", 10, time.Minute, false)
			return err
		}, core.ErrIdentityEnded},
		{"receipt of a message the old identity sent", func() error {
			_, err := f.relay.ReceiptFor(f.ctx, newCred, "out")
			return err
		}, core.ErrNotFound},
		{"receipt of a message the old identity received", func() error {
			_, err := f.relay.ReceiptFor(f.ctx, newCred, "in")
			return err
		}, core.ErrNotFound},
		{"results of the old identity's message", func() error {
			_, err := f.relay.ResultsFor(f.ctx, newCred, "out", 0, 10)
			return err
		}, core.ErrNotFound},
		{"the old identity's conversation", func() error {
			_, err := f.relay.ConversationMessages(f.ctx, newCred, "c1", 0, 10)
			return err
		}, core.ErrNoConversation},
		{"sending in the old identity's conversation", func() error {
			_, err := f.relay.SendAs(f.ctx, newCred, &core.Message{ID: "x1", Sender: "alice", Receiver: "carol", ConversationID: "c1"})
			return err
		}, core.ErrNoConversation},
		{"answering a message the old identity received", func() error {
			_, err := f.relay.SendAs(f.ctx, newCred, &core.Message{ID: "x2", Sender: "alice", Receiver: "carol", CorrelationID: "in"})
			return err
		}, core.ErrNotAnswerable},
		{"replaying the old identity's mail", func() error {
			_, err := f.relay.ReplayAs(f.ctx, core.AdminPrincipal(), "in", 0)
			return err
		}, core.ErrConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.do(); !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
		})
	}
	ms, err := f.relay.PullAs(f.ctx, newCred, "alice", 10, time.Minute, false)
	if err != nil || len(ms) != 0 {
		t.Errorf("the new identity pulled %d messages (%v), want none", len(ms), err)
	}
	cs, err := f.relay.Conversations(f.ctx, newCred, "alice", 10)
	if err != nil || len(cs) != 0 {
		t.Errorf("the new identity lists %d conversations (%v), want none", len(cs), err)
	}
	// The new identity's own traffic is its own.
	if _, err := f.relay.SendAs(f.ctx, newCred, &core.Message{ID: "new", Sender: "alice", Receiver: "carol"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.relay.ReceiptFor(f.ctx, newCred, "new"); err != nil {
		t.Errorf("own receipt: %v", err)
	}
}
