package opsapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/opsapi"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// TestOperatorRoutes: dead letters and replay are the operator's; an agent
// is refused 403, an anonymous caller 401; health answers everyone.
func TestOperatorRoutes(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	relay := core.NewRelay(st, nil, core.Config{}, nil)
	mux := http.NewServeMux()
	opsapi.New(relay, "test").Mount(mux)
	agent := core.AgentPrincipal("alice", "")
	for _, c := range []struct {
		method, path string
		who          core.Principal
		want         int
	}{
		{"GET", "/healthz", core.Anonymous(), 200},
		{"GET", "/readyz", core.Anonymous(), 200},
		{"GET", "/v1/dlq", core.AdminPrincipal(), 200},
		{"GET", "/v1/dlq", agent, 403},
		{"GET", "/v1/dlq", core.Anonymous(), 401},
		{"GET", "/v1/dlq?limit=0", core.AdminPrincipal(), 400},
		{"POST", "/v1/dlq/nope/replay", core.AdminPrincipal(), 404},
		{"POST", "/v1/dlq/nope/replay", agent, 403},
		{"POST", "/v1/dlq/nope/replay?ttl_ms=x", agent, 403},
		{"GET", "/v1/events", agent, 403},
		{"GET", "/v1/events", core.Anonymous(), 401},
	} {
		t.Run(c.method+" "+c.path+" "+c.who.String(), func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, nil)
			req = req.WithContext(core.WithPrincipal(req.Context(), c.who))
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Errorf("%d %s, want %d", rec.Code, rec.Body, c.want)
			}
		})
	}
}
