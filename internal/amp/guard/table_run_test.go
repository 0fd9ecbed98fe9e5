package guard

import (
	"strings"
	"testing"
)

// tableRequest is the setting every table command is checked in: a
// project at /work/proj, run from its root.
func tableRequest(cmd string) Request {
	return Request{Mode: ModeDev, Tool: "Bash", Input: map[string]any{"command": cmd},
		Cwd: "/work/proj", ProjectDir: "/work/proj", Home: "/home/u"}
}

func TestCommandTable(t *testing.T) {
	if n := len(deniedCommands) + len(allowedCommands); n < 200 {
		t.Fatalf("the table has %d commands, want at least 200", n)
	}
	for _, c := range deniedCommands {
		if d := Check(tableRequest(c)); !d.Deny || !strings.HasPrefix(d.Reason, d.Code+": ") {
			t.Errorf("allowed, want denied: %s", c)
		}
	}
	for _, c := range allowedCommands {
		if d := Check(tableRequest(c)); d.Deny {
			t.Errorf("denied, want allowed: %s\n\t%s", c, d.Reason)
		}
	}
}
