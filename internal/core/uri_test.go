package core_test

import (
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func TestAgentURI(t *testing.T) {
	for _, c := range []struct{ id, want string }{
		{"worker", "agent://hub.test/worker"},
		{"analyst@other.example", "agent://other.example/analyst"},
		{"analyst@Other.Example:8443", "agent://other.example:8443/analyst"},
		{"a@b@other.example", "agent://other.example/a@b"},
		{"x@hub.test", "agent://hub.test/x@hub.test"}, // the hub's own domain
		{"x@HUB.test", "agent://hub.test/x@HUB.test"},
		{"bob@", "agent://hub.test/bob@"},
		{"@other.example", "agent://hub.test/@other.example"},
		{"x@-bad.example", "agent://hub.test/x@-bad.example"},
		{"x@other.example:", "agent://hub.test/x@other.example:"},
		{"x@other.example:8a", "agent://hub.test/x@other.example:8a"},
		{"x@a..b", "agent://hub.test/x@a..b"},
	} {
		if got := core.AgentURI("hub.test", c.id); got != c.want {
			t.Errorf("AgentURI(%q) = %q, want %q", c.id, got, c.want)
		}
	}
}
