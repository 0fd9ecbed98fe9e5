package atp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/proto/atp"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// issuer issues tokens, or fails with fail when set (the credential store
// failing after the agent was stored).
type issuer struct{ fail error }

func (i *issuer) Issue(_ context.Context, agentID, _ string) (string, error) {
	if i.fail != nil {
		return "", i.fail
	}
	return "sbk_" + agentID, nil
}

// TestRegisterUndoneWhenNoCredential: a first registration whose credential
// cannot be issued leaves no agent behind, so the id can be registered
// again (an agent without a credential would lock its id out for good).
func TestRegisterUndoneWhenNoCredential(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	relay := core.NewRelay(st, nil, core.Config{}, nil)
	iss := &issuer{fail: errors.New("credential store down")}
	mux := http.NewServeMux()
	atp.New(relay, atp.Options{Issuer: iss}).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	r := call(t, "POST", srv.URL+"/atp/register", "", map[string]any{"agent_id": "a"})
	if r.status != 500 || r.body["error"] != "internal" {
		t.Fatalf("register with the issuer failing: %d %s", r.status, r.raw)
	}
	if _, err := st.GetAgent(context.Background(), "a"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("the agent stayed registered without a credential: %v", err)
	}
	iss.fail = nil
	r = call(t, "POST", srv.URL+"/atp/register", "", map[string]any{"agent_id": "a"})
	if r.status != 200 || r.body["created"] != true || r.body["token"] != "sbk_a" {
		t.Fatalf("register again: %d %s", r.status, r.raw)
	}
}
