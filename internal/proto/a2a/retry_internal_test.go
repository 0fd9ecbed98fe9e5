package a2a

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestRetryNote: a refusal that may pass reaches the HTTP bindings as the
// status and Retry-After the hub's other protocols give it, whatever
// status the SDK's binding wrote; other errors, and streams already
// started, keep theirs.
func TestRetryNote(t *testing.T) {
	cases := []struct {
		name        string
		err         error
		contentType string
		sdkStatus   int
		wantStatus  int
		wantRetry   string
	}{
		{"store down, JSON-RPC", fmt.Errorf("send: %w", core.ErrUnavailable), "application/json", 200, 503, "2"},
		{"store down, REST", core.ErrUnavailable, "application/json", 500, 503, "2"},
		{"queue full", core.ErrQueueFull, "application/json", 200, 429, "1"},
		{"disk full", core.ErrStorageFull, "application/json", 500, 507, "30"},
		{"memory budget", core.ErrOverloaded, "application/json", 200, 507, "1"},
		{"invalid", fmt.Errorf("x: %w", core.ErrInvalid), "application/json", 200, 200, ""},
		{"not found", core.ErrNotFound, "application/json", 404, 404, ""},
		{"stream started", core.ErrUnavailable, "text/event-stream", 200, 200, ""},
		{"no error", nil, "application/json", 200, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w, r := withRetryNote(rec, httptest.NewRequest("POST", "/a2a/x", nil))
			err := wireError(r.Context(), c.err)
			if c.err != nil && err == nil {
				t.Fatal("wireError lost the error")
			}
			w.Header().Set("Content-Type", c.contentType)
			w.WriteHeader(c.sdkStatus)
			_, _ = w.Write([]byte("{}"))
			if rec.Code != c.wantStatus || rec.Header().Get("Retry-After") != c.wantRetry {
				t.Errorf("status %d, Retry-After %q; want %d, %q", rec.Code, rec.Header().Get("Retry-After"), c.wantStatus, c.wantRetry)
			}
		})
	}
	t.Run("without a note", func(t *testing.T) {
		// gRPC and in-process callers have no note: the error is the same.
		err := wireError(t.Context(), core.ErrUnavailable)
		if !errors.Is(err, sdk.ErrInternalError) {
			t.Errorf("wireError = %v, want an internal error", err)
		}
	})
}
