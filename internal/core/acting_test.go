package core_test

import (
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestActAs: ActAs answers as SendAs decides who may send as an agent.
func TestActAs(t *testing.T) {
	for i, c := range classes {
		if want := want[core.OpSendAs][i]; want != "-" {
			t.Run(c.String(), func(t *testing.T) {
				f := newAuthzFixture(t)
				if got := answer(f.relay.ActAs(f.ctx, principalOf(c), "alice")); got != want {
					t.Errorf("got %s, want %s", got, want)
				}
			})
		}
	}
	t.Run("ended identity", func(t *testing.T) {
		f := newAuthzFixture(t)
		old := core.AgentPrincipal("alice", "an-ended-generation")
		if got := answer(f.relay.ActAs(f.ctx, old, "alice")); got != "401" {
			t.Errorf("a credential of another generation: %s, want 401", got)
		}
	})
}

// TestPublicAgent: an agent's card is anyone's to read; a hidden agent's
// only the callers' that may see hidden agents.
func TestPublicAgent(t *testing.T) {
	for i, c := range classes {
		if c == core.ClassMember || c == core.ClassNonMember {
			continue
		}
		t.Run(c.String(), func(t *testing.T) {
			f := newAuthzFixture(t)
			p := principalOf(c)
			if a, err := f.relay.PublicAgent(f.ctx, p, "carol"); err != nil || a.ID != "carol" {
				t.Errorf("carol: %v %v", a, err)
			}
			got := answer(f.relayPublic(p))
			wantHidden := "404"
			if want[core.OpListHidden][i] == "ok" {
				wantHidden = "ok"
			}
			if got != wantHidden {
				t.Errorf("hidden agent: %s, want %s", got, wantHidden)
			}
			if got := answer(func() error { _, err := f.relay.PublicAgent(f.ctx, p, "nobody"); return err }()); got != "404" {
				t.Errorf("unknown agent: %s, want 404", got)
			}
		})
	}
}

func (f *authzFixture) relayPublic(p core.Principal) error {
	_, err := f.relay.PublicAgent(f.ctx, p, f.internal)
	return err
}

// TestSetTraceIDAs: an agent sets its own trace id for a conversation it
// is a member of; a non-member is answered as for an unknown
// conversation, and another agent's trace id is not the caller's to set.
func TestSetTraceIDAs(t *testing.T) {
	alice := core.AgentPrincipal("alice", "")
	bob := core.AgentPrincipal("bob", "")
	for _, c := range []struct {
		name        string
		p           core.Principal
		conv, agent string
		trace       string
		want        string
	}{
		{"member sets its own", alice, "c1", "alice", "trace-a", "ok"},
		{"non-member", bob, "c1", "bob", "trace-b", "404"},
		{"unknown conversation", alice, "c-none", "alice", "trace-a", "404"},
		{"another agent's", bob, "c1", "alice", "trace-x", "403"},
		{"anonymous", core.Anonymous(), "c1", "alice", "trace-x", "401"},
		{"hub for a member", core.InternalPrincipal("test"), "c1", "carol", "trace-c", "ok"},
		{"hub for a non-member", core.InternalPrincipal("test"), "c1", "bob", "trace-b", "404"},
		{"operator", core.AdminPrincipal(), "c1", "dave", "trace-d", "ok"},
		{"control character", alice, "c1", "alice", "a\x00b", "error: trace id holds a control character (U+0000): invalid"},
		{"too long", alice, "c1", "alice", strings.Repeat("t", core.MaxTraceID+1), "error: trace id longer than 200 bytes: invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newAuthzFixture(t)
			if got := answer(f.relay.SetTraceIDAs(f.ctx, c.p, c.conv, c.agent, c.trace)); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
			conv, err := f.relay.Conversation(f.ctx, core.AdminPrincipal(), "c1")
			if err != nil {
				t.Fatal(err)
			}
			for _, pt := range conv.Participants {
				if pt.AgentID == c.agent && (pt.TraceID == c.trace) != (c.want == "ok") {
					t.Errorf("%s's trace id is %q after %s", c.agent, pt.TraceID, c.want)
				}
			}
		})
	}
}
