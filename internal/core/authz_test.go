package core_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// want is the trust model as this test states it, independently of the
// table in authz.go: operation → the answer for each caller class, in the
// order owner, member, non-member, other agent, admin, anonymous, dev,
// internal. "ok" is allowed; 401, 403 and 404 are refusals of kind
// unauthenticated, forbidden and not found; "-" is a class that cannot
// occur for the operation (refused).
var want = map[core.Op][8]string{
	core.OpRegisterNew:        {"ok", "-", "-", "403", "ok", "ok", "ok", "ok"},
	core.OpRegisterExisting:   {"ok", "-", "-", "403", "ok", "401", "ok", "ok"},
	core.OpRegisterRemote:     {"403", "-", "-", "403", "ok", "403", "ok", "ok"},
	core.OpRegisterInternal:   {"403", "-", "-", "403", "403", "403", "403", "ok"},
	core.OpDeregister:         {"ok", "-", "-", "403", "ok", "401", "ok", "ok"},
	core.OpSendAs:             {"ok", "-", "-", "403", "ok", "401", "ok", "ok"},
	core.OpSendToInternal:     {"404", "-", "-", "404", "ok", "401", "ok", "ok"},
	core.OpAnswerInternal:     {"ok", "-", "-", "404", "ok", "401", "ok", "ok"},
	core.OpAnswer:             {"ok", "-", "-", "403", "ok", "401", "ok", "-"},
	core.OpReadReceipt:        {"ok", "-", "-", "404", "ok", "401", "ok", "ok"},
	core.OpQueue:              {"ok", "-", "-", "403", "ok", "401", "ok", "ok"},
	core.OpCredentials:        {"ok", "-", "-", "403", "ok", "401", "ok", "ok"},
	core.OpListAgents:         {"ok", "-", "-", "ok", "ok", "401", "ok", "ok"},
	core.OpListHidden:         {"403", "-", "-", "403", "ok", "401", "ok", "ok"},
	core.OpReadConversation:   {"-", "ok", "404", "-", "ok", "401", "ok", "-"},
	core.OpSendInConversation: {"-", "ok", "404", "-", "ok", "401", "ok", "-"},
	core.OpInvite:             {"-", "ok", "404", "-", "ok", "401", "ok", "-"},
	core.OpListConversations:  {"ok", "-", "-", "403", "ok", "401", "ok", "ok"},
	core.OpOperator:           {"403", "-", "-", "403", "ok", "401", "ok", "ok"},
}

// answer names err as the table does.
func answer(err error) string {
	if err == nil {
		return "ok"
	}
	switch core.KindOf(err) {
	case core.KindUnauthenticated:
		return "401"
	case core.KindForbidden:
		return "403"
	case core.KindNotFound:
		return "404"
	}
	return "error: " + err.Error()
}

// principals stands for each class of caller: the classes that are about
// an agent's own things act as alice, the others as bob.
func principalOf(c core.Class) core.Principal {
	switch c {
	case core.ClassOwner, core.ClassMember:
		return core.AgentPrincipal("alice", "")
	case core.ClassNonMember, core.ClassOther:
		return core.AgentPrincipal("bob", "")
	case core.ClassAdmin:
		return core.AdminPrincipal()
	case core.ClassDev:
		return core.DevPrincipal()
	case core.ClassInternal:
		return core.InternalPrincipal("test")
	}
	return core.Anonymous()
}

var classes = []core.Class{core.ClassOwner, core.ClassMember, core.ClassNonMember, core.ClassOther,
	core.ClassAdmin, core.ClassAnonymous, core.ClassDev, core.ClassInternal}

// TestAuthorize checks the decision function against the table above,
// for every operation and caller class.
func TestAuthorize(t *testing.T) {
	for op, row := range want {
		for i, c := range classes {
			if row[i] == "-" {
				continue
			}
			rel := core.RelNone
			switch c {
			case core.ClassOwner:
				rel = core.RelOwner
			case core.ClassMember:
				rel = core.RelMember
			}
			p := principalOf(c)
			if c == core.ClassInternal && (op == core.OpAnswer || op == core.OpReadConversation) {
				continue // judged as the agent it names
			}
			t.Run(op.String()+"/"+c.String(), func(t *testing.T) {
				if got := core.ClassOf(p, op, rel); got != c {
					t.Fatalf("class %s, want %s", got, c)
				}
				if got := answer(core.Authorize(p, op, rel)); got != row[i] {
					t.Errorf("got %s, want %s", got, row[i])
				}
			})
		}
	}
}

// actor does operation op through the relay for principal p, on the
// fixture of authzFixture, and returns the relay's answer. Each runs on
// a fresh fixture.
type actor func(f *authzFixture, p core.Principal) error

// authzFixture: agents alice, bob, carol, dave; conversation c1 between
// carol and alice (bob is not in it); message m1 from carol to alice;
// an internal agent and its message mi to alice; a dead letter.
type authzFixture struct {
	*fixture
	internal string
}

func newAuthzFixture(t *testing.T) *authzFixture {
	t.Helper()
	f := &authzFixture{fixture: newFixture(t, core.Config{})}
	for _, id := range []string{"alice", "bob", "carol", "dave"} {
		f.register(t, id, core.EndpointPull)
	}
	f.clock.Advance(time.Second)
	hub := core.InternalPrincipal("test")
	f.internal = f.relay.InternalID("test", "helper")
	if _, _, err := f.relay.RegisterAs(f.ctx, hub, &core.Agent{ID: f.internal, Endpoint: core.Endpoint{Kind: core.EndpointPull}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*core.Message{
		{ID: "m1", Sender: "carol", Receiver: "alice", ConversationID: "c1"},
		{ID: "m0", Sender: "carol", Receiver: "dave"},
		{ID: "mi", Sender: f.internal, Receiver: "alice"},
	} {
		if _, err := f.relay.SendAs(f.ctx, hub, m); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// self is the agent id p sends as: its own, or alice for callers that
// may act as anyone (and for anonymous ones, who may not).
func self(p core.Principal) string {
	if p.AgentID != "" {
		return p.AgentID
	}
	return "alice"
}

var actors = map[core.Op]actor{
	core.OpRegisterNew: func(f *authzFixture, p core.Principal) error {
		id := "fresh"
		if p.AgentID == "bob" {
			id = "someone-else" // bob's credential claiming another id
		} else if p.AgentID != "" {
			p.AgentID = id
		}
		_, _, err := f.relay.RegisterAs(f.ctx, p, &core.Agent{ID: id}, 0)
		return err
	},
	core.OpRegisterExisting: func(f *authzFixture, p core.Principal) error {
		_, _, err := f.relay.HeartbeatAs(f.ctx, p, "alice", 0)
		return err
	},
	core.OpRegisterRemote: func(f *authzFixture, p core.Principal) error {
		if p.AgentID == "alice" {
			p.AgentID = "x@remote.example" // even holding that id's credential
		}
		_, _, err := f.relay.RegisterAs(f.ctx, p, &core.Agent{ID: "x@remote.example"}, 0)
		return err
	},
	core.OpRegisterInternal: func(f *authzFixture, p core.Principal) error {
		_, _, err := f.relay.RegisterAs(f.ctx, p, &core.Agent{ID: f.relay.InternalID("test", "new")}, 0)
		return err
	},
	core.OpDeregister: func(f *authzFixture, p core.Principal) error {
		return f.relay.DeregisterAs(f.ctx, p, "alice")
	},
	core.OpSendAs: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.SendAs(f.ctx, p, &core.Message{ID: "s1", Sender: "alice", Receiver: "carol"})
		return err
	},
	core.OpSendToInternal: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.SendAs(f.ctx, p, &core.Message{ID: "s2", Sender: self(p), Receiver: f.internal})
		return err
	},
	core.OpAnswerInternal: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.SendAs(f.ctx, p, &core.Message{ID: "ai", Sender: self(p), Receiver: f.internal, CorrelationID: "mi"})
		return err
	},
	core.OpAnswer: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.SendAs(f.ctx, p, &core.Message{ID: "a1", Sender: self(p), Receiver: "carol", CorrelationID: "m1"})
		return err
	},
	core.OpReadReceipt: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.ReceiptFor(f.ctx, p, "m1")
		m, merr := f.relay.MessageFor(f.ctx, p, "m1")
		switch {
		case answer(err) != answer(merr):
			return fmt.Errorf("receipt %v and message %v disagree", err, merr)
		case merr == nil && m.ID != "m1":
			return fmt.Errorf("message %q, want m1", m.ID)
		}
		return err
	},
	core.OpQueue: func(f *authzFixture, p core.Principal) error {
		n, derr := f.relay.QueueDepth(f.ctx, p, "alice")
		switch {
		case derr == nil && n != 2: // m1 and mi
			return fmt.Errorf("queue depth %d, want 2", n)
		}
		_, err := f.relay.PullAs(f.ctx, p, "alice", 10, time.Minute, false)
		if answer(err) != answer(derr) {
			return fmt.Errorf("pull %v and queue depth %v disagree", err, derr)
		}
		return err
	},
	core.OpCredentials: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.CredentialAccess(f.ctx, p, "alice")
		return err
	},
	core.OpListAgents: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.LookupAgent(f.ctx, p, "carol")
		return err
	},
	core.OpListHidden: func(f *authzFixture, p core.Principal) error {
		list, err := f.relay.ListAgents(f.ctx, p, core.AgentFilter{})
		if err != nil {
			return err
		}
		_, lerr := f.relay.LookupAgent(f.ctx, p, f.internal)
		listed := false
		for _, a := range list {
			listed = listed || a.ID == f.internal
		}
		switch {
		case listed && lerr == nil:
			return nil
		case !listed && errors.Is(lerr, core.ErrNotFound):
			return core.ErrNotPermitted // as the table says: not for this caller
		}
		return errors.New("listed and looked up disagree")
	},
	core.OpReadConversation: func(f *authzFixture, p core.Principal) error {
		if _, err := f.relay.Conversation(f.ctx, p, "c1"); err != nil {
			return err
		}
		_, err := f.relay.ConversationMessages(f.ctx, p, "c1", 0, 10)
		return err
	},
	core.OpSendInConversation: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.SendAs(f.ctx, p, &core.Message{ID: "s3", Sender: self(p), Receiver: "carol", ConversationID: "c1"})
		return err
	},
	core.OpInvite: func(f *authzFixture, p core.Principal) error {
		return f.relay.Invite(f.ctx, p, "c1", "dave")
	},
	core.OpListConversations: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.Conversations(f.ctx, p, "alice", 10)
		return err
	},
	core.OpOperator: func(f *authzFixture, p core.Principal) error {
		_, err := f.relay.DeadLetters(f.ctx, p, core.DeadLetterFilter{})
		return err
	},
}

// TestRelayEnforcesTable runs every operation through the relay's own
// operations for every caller class and checks the answer against the
// table: the relay, not only Authorize, decides as the table says.
func TestRelayEnforcesTable(t *testing.T) {
	for op, row := range want {
		act, ok := actors[op]
		if !ok {
			t.Errorf("no actor for %s", op)
			continue
		}
		for i, c := range classes {
			if row[i] == "-" {
				continue
			}
			t.Run(op.String()+"/"+c.String(), func(t *testing.T) {
				f := newAuthzFixture(t)
				if got := answer(act(f, principalOf(c))); got != row[i] {
					t.Errorf("got %s, want %s", got, row[i])
				}
			})
		}
	}
}

// TestAuthorizationTableDocumented keeps docs/security.md's table equal to
// the one the core enforces.
func TestAuthorizationTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), core.AuthorizationTable()) {
		t.Errorf("docs/security.md does not hold the authorization table; put this in it:\n%s", core.AuthorizationTable())
	}
}

var _ = context.Background
