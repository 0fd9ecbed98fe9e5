package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// FuzzPageToken: a page token either is refused with invalid params or
// names a cursor whose own token reads back to the same cursor.
func FuzzPageToken(f *testing.F) {
	f.Add(cursor{at: time.Unix(1, 2), id: "t"}.token())
	f.Add("")
	f.Add("!!")
	f.Add("MTIz")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := parseCursor(tok)
		if err != nil {
			return
		}
		again, err := parseCursor(c.token())
		if err != nil || !again.at.Equal(c.at) || again.id != c.id {
			t.Fatalf("cursor %+v of %q does not round-trip: %+v %v", c, tok, again, err)
		}
	})
}

// FuzzJSONRPCEndpoint: whatever body reaches POST /a2a/{agent}, the
// endpoint answers without panicking, with 204 (notifications) or a JSON
// answer, each response a JSON-RPC 2.0 response.
func FuzzJSONRPCEndpoint(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ListTasks"},{"jsonrpc":"2.0","method":"GetTask","params":{}}]`,
		`{"jsonrpc":"2.0","id":"a","method":"tasks/get","params":{"id":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"id":2}`, `[]`, `{`, `null`, `[1,2]`,
	} {
		f.Add([]byte(s), "1.0")
		f.Add([]byte(s), "")
	}
	st := openStore(f)
	relay := core.NewRelay(st, nil, core.Config{}, nil)
	s := New(relay, Options{Records: st})
	if _, _, err := relay.RegisterAs(context.Background(), core.DevPrincipal(), &core.Agent{ID: "w"}, time.Minute); err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Mount(mux)
	f.Fuzz(func(t *testing.T, body []byte, version string) {
		req := httptest.NewRequest(http.MethodPost, "/a2a/w", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", version)
		// Never a stream: the fuzzed requests are sent with no wait.
		ctx, cancel := context.WithTimeout(core.WithPrincipal(req.Context(), core.DevPrincipal()), time.Second)
		defer cancel()
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req.WithContext(ctx))
		if rec.Code == http.StatusNoContent {
			return
		}
		out := bytes.TrimSpace(rec.Body.Bytes())
		if rec.Header().Get("Content-Type") == "text/event-stream" {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%q → %d %q: not JSON", body, rec.Code, out)
		}
		var one map[string]any
		var many []map[string]any
		if json.Unmarshal(out, &one) == nil {
			many = []map[string]any{one}
		} else if json.Unmarshal(out, &many) != nil {
			t.Fatalf("%q → %q: neither a response nor a batch", body, out)
		}
		for _, r := range many {
			if r["jsonrpc"] != "2.0" || (r["result"] == nil) == (r["error"] == nil) {
				t.Fatalf("%q → %q: not a JSON-RPC 2.0 response", body, out)
			}
		}
	})
}
