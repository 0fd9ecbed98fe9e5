package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// generationOf is agent id's current identity generation.
func generationOf(t *testing.T, f *fixture, id string) string {
	t.Helper()
	a, err := f.relay.LookupAgent(f.ctx, core.AdminPrincipal(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a.Generation
}

// TestIdentityGenerations: an id deregistered and registered again is a
// new identity that sees nothing of the old one, and the old one's mail
// ends as dead letters.
func TestIdentityGenerations(t *testing.T) {
	f := newFixture(t, core.Config{})
	hub := core.InternalPrincipal("test")
	for _, id := range []string{"alice", "carol"} {
		f.register(t, id, core.EndpointPull)
	}
	oldCred := core.AgentPrincipal("alice", generationOf(t, f, "alice"))
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
	newCred := core.AgentPrincipal("alice", generationOf(t, f, "alice"))
	if newCred.Generation == oldCred.Generation || newCred.Generation == "" {
		t.Fatalf("the new identity's generation %q, the old one's %q: want a new one", newCred.Generation, oldCred.Generation)
	}
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

// hookStore runs beforeAccept (once) as a message is accepted, between the
// relay reading the receiver and storing the message.
type hookStore struct {
	core.Store
	beforeAccept func()
	once         sync.Once
}

func (s *hookStore) Accept(ctx context.Context, m *core.Message, r *core.Receipt, maxQueue int) (core.AcceptResult, error) {
	s.once.Do(s.beforeAccept)
	return s.Store.Accept(ctx, m, r, maxQueue)
}

// TestDeregistrationRacingAccept: a deregistration of the receiver that
// races a send to it (the receiver read, the message not yet stored),
// followed by a registration of the same id by someone else, never leaves
// the message for the new identity: it ends rejected 410, a dead letter,
// and is never handed to the new owner — whether the deregistration ran
// on this instance or on another sharing the store.
func TestDeregistrationRacingAccept(t *testing.T) {
	for _, tt := range []struct {
		name  string
		local bool // deregistered on the instance that accepts
	}{
		{"this instance", true},
		{"another instance", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, core.Config{})
			hub := core.InternalPrincipal("test")
			hs := &hookStore{Store: f.store}
			this := core.NewRelay(hs, f.clock, core.Config{}, nil)
			other := core.NewRelay(f.store, f.clock, core.Config{}, nil)
			d := &scripted{}
			this.SetDeliverer(kindTest, d)
			other.SetDeliverer(kindTest, d)
			alice := func() *core.Agent {
				return &core.Agent{ID: "alice", Endpoint: core.Endpoint{Kind: kindTest, URL: "http://x"}}
			}
			if _, _, err := this.RegisterAs(f.ctx, hub, alice(), time.Minute); err != nil {
				t.Fatal(err)
			}
			var deregistered sync.WaitGroup
			deregistered.Add(1)
			hs.beforeAccept = func() {
				if tt.local {
					go func() {
						defer deregistered.Done()
						if err := this.DeregisterAs(f.ctx, hub, "alice"); err != nil {
							t.Error(err)
						}
					}()
					return
				}
				defer deregistered.Done()
				if err := other.DeregisterAs(f.ctx, hub, "alice"); err != nil {
					t.Error(err)
				}
			}
			if _, err := this.SendAs(f.ctx, hub, &core.Message{ID: "raced", Sender: "planner", Receiver: "alice", TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			deregistered.Wait()
			// Someone else registers the freed id, on the other instance,
			// which then runs the scheduler.
			if _, _, err := other.RegisterAs(f.ctx, core.Anonymous(), alice(), time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := other.Tick(f.ctx); err != nil {
				t.Fatal(err)
			}
			if got := d.delivered(); len(got) != 0 {
				t.Errorf("delivered %v to the id's next identity", got)
			}
			rc, err := other.ReceiptFor(f.ctx, core.AdminPrincipal(), "raced")
			if err != nil {
				t.Fatal(err)
			}
			if rc.Status != core.StatusRejected || rc.Code != 410 || !rc.Status.DeadLetter() {
				t.Errorf("receipt %s %d %q, want rejected 410, a dead letter", rc.Status, rc.Code, rc.LastError)
			}
			ms, err := other.PullAs(f.ctx, hub, "alice", 10, time.Minute, false)
			if err != nil || len(ms) != 0 {
				t.Errorf("the new identity pulls %d messages (%v), want none", len(ms), err)
			}
		})
	}
}

// TestListAgentsPagesPastHidden: a page of agents for a caller that may
// not see hidden agents holds as many visible agents as asked for while
// there are that many, however many hidden ones sort before them.
func TestListAgentsPagesPastHidden(t *testing.T) {
	f := newFixture(t, core.Config{}) // registers worker and planner
	hub := core.InternalPrincipal("test")
	for i := range 5 {
		// Internal ids ("_…") sort before lowercase local ids.
		id := f.relay.InternalID("test", fmt.Sprint("helper", i))
		if _, _, err := f.relay.RegisterAs(f.ctx, hub, &core.Agent{ID: id, Endpoint: core.Endpoint{Kind: core.EndpointPull}}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	f.register(t, "alice", core.EndpointPull)
	agent := core.AgentPrincipal("alice", "")
	tests := []struct {
		limit int
		want  string
	}{
		{1, "alice"},
		{2, "alice,planner"},
		{3, "alice,planner,worker"},
		{10, "alice,planner,worker"},
		{0, "alice,planner,worker"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("limit ", tt.limit), func(t *testing.T) {
			list, err := f.relay.ListAgents(f.ctx, agent, core.AgentFilter{Limit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, a := range list {
				ids = append(ids, a.ID)
			}
			if got := strings.Join(ids, ","); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	all, err := f.relay.ListAgents(f.ctx, core.AdminPrincipal(), core.AgentFilter{Limit: 3})
	if err != nil || len(all) != 3 || !core.Hidden(all[0].ID) {
		t.Errorf("the operator's page of 3: %d agents, first hidden %v (%v); want 3, hidden ones first", len(all), len(all) > 0 && core.Hidden(all[0].ID), err)
	}
}
