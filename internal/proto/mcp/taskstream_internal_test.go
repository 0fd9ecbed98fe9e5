package mcp

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzTaskListen checks that taskListen never panics, loses nothing of
// the body (the SDK reads it next), and takes only a listen naming task
// ids with a request id.
func FuzzTaskListen(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["a"]}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`,
		`{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{"taskIds":[]}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, `{"id":null}`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		r2, lr := taskListen(r, 1<<10)
		got, err := io.ReadAll(r2.Body)
		if err != nil || string(got) != body {
			t.Fatalf("body %q read back as %q, %v", body, got, err)
		}
		if lr != nil && (lr.Method != "subscriptions/listen" || lr.Params.Notifications.TaskIDs == nil || len(lr.ID) == 0) {
			t.Fatalf("took %q", body)
		}
	})
}

// TestSentVersions: a stream sends each state of a task once, and never
// an older one after a newer, whatever order the changes arrive in (its
// own, another instance's announcement, its first read).
func TestSentVersions(t *testing.T) {
	s := sentVersions{}
	for i, c := range []struct {
		id      string
		version int64
		want    bool
	}{
		{"a", 1, true},
		{"a", 1, false}, // the same state again
		{"b", 1, true},  // another task
		{"a", 3, true},
		{"a", 2, false}, // older than the one sent
		{"b", 2, true},
		{"a", 3, false},
	} {
		if got := s.fresh(taskNote{id: c.id, version: c.version}); got != c.want {
			t.Errorf("step %d: fresh(%s v%d) = %v, want %v", i, c.id, c.version, got, c.want)
		}
	}
}
