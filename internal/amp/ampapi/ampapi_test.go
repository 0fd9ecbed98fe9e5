package ampapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/amp/ampstore"
	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

func newServer(t *testing.T) (*httptest.Server, *amp.MemoryStore) {
	t.Helper()
	store := amp.NewMemoryStore()
	clock := amp.ClockFunc(func() time.Time { return time.Date(2026, 9, 12, 10, 0, 0, 0, time.UTC) })
	srv := httptest.NewServer(New(amp.New(store, amp.WithClock(clock)), nil))
	t.Cleanup(srv.Close)
	return srv, store
}

func do(t *testing.T, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

func TestGetSpec(t *testing.T) {
	srv, _ := newServer(t)
	code, h, body := do(t, http.MethodGet, srv.URL+PathSpec, "")
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v", code, h)
	}
	if string(body) != string(amp.SpecDocumentJSON()) {
		t.Fatal("body is not the spec document")
	}
	var doc amp.SpecDocument
	if err := json.Unmarshal(body, &doc); err != nil || doc.Spec != amp.SpecVersion || len(doc.Objects.Gates) != 5 {
		t.Fatalf("%+v %v", doc, err)
	}
}

func TestTick(t *testing.T) {
	srv, store := newServer(t)
	code, _, body := do(t, http.MethodPost, srv.URL+PathTick, `{"session_id":"h1","event":"UserPromptSubmit","message":"I give up","unknown":true}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	// The body is a valid AMP envelope (extra fields are allowed).
	env, err := amp.DecodeEnvelope(body)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if !slices.Equal(env.Events, []amp.Event{amp.EventGivingUp}) || env.Gate != amp.GateDiagnosis || env.State.Pressure != 1 {
		t.Fatalf("%+v", env)
	}
	var resp struct {
		SessionID string `json:"session_id"`
		Event     string `json:"event"`
		Injection string `json:"injection"`
	}
	json.Unmarshal(body, &resp)
	if resp.SessionID != "h1" || resp.Event != "UserPromptSubmit" || !strings.Contains(resp.Injection, "[PUAX-RUNTIME]") {
		t.Fatalf("%s", body)
	}
	if st, ok, _ := store.Load(t.Context(), "h1"); !ok || st.Pressure != 1 {
		t.Fatalf("state not persisted: %+v", st)
	}
}

func TestTickDefaults(t *testing.T) {
	srv, store := newServer(t)
	for _, body := range []string{"", "{}", `{"event":"garbage"}`, `{"spec":"AMP/0.1"}`} {
		code, _, out := do(t, http.MethodPost, srv.URL+PathTick, body)
		if code != http.StatusOK {
			t.Fatalf("%q: %d %s", body, code, out)
		}
		env, err := amp.DecodeEnvelope(out)
		if err != nil || env.State.Role != amp.RoleNone || env.State.Happened {
			t.Fatalf("%q: %s %v", body, out, err)
		}
		if !strings.Contains(string(out), `"session_id":"http-session","event":"Manual"`) {
			t.Fatalf("%q: %s", body, out)
		}
	}
	if _, ok, _ := store.Load(t.Context(), DefaultSessionID); !ok {
		t.Fatal("default session not used")
	}
}

func TestTickGuard(t *testing.T) {
	srv, _ := newServer(t)
	code, _, body := do(t, http.MethodPost, srv.URL+PathTick, `{"session_id":"g","event":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git clean -fd"}}`)
	if code != http.StatusOK || !strings.Contains(string(body), `"gate":"pretooluse"`) || !strings.Contains(string(body), `"deny":true`) {
		t.Fatalf("%d %s", code, body)
	}
}

func TestErrors(t *testing.T) {
	srv, _ := newServer(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed JSON", http.MethodPost, PathTick, `{"session_id":`, http.StatusBadRequest, "invalid_json"},
		{"wrong type", http.MethodPost, PathTick, `{"session_id":7}`, http.StatusBadRequest, "invalid_json"},
		{"trailing data", http.MethodPost, PathTick, `{} {}`, http.StatusBadRequest, "invalid_json"},
		{"stray brace", http.MethodPost, PathTick, `{"event":"Stop"}}`, http.StatusBadRequest, "invalid_json"},
		{"stray bracket", http.MethodPost, PathTick, `{"event":"Stop"}]`, http.StatusBadRequest, "invalid_json"},
		{"key twice", http.MethodPost, PathTick, `{"event":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls","command":"git clean -fd"}}`, http.StatusBadRequest, "invalid_json"},
		{"top-level key again by case", http.MethodPost, PathTick, `{"event":"Stop","Event":"SessionStart"}`, http.StatusBadRequest, "invalid_json"},
		{"unknown spec", http.MethodPost, PathTick, `{"spec":"AMP/0.2"}`, http.StatusBadRequest, "unknown_spec"},
		{"session id with a NUL", http.MethodPost, PathTick, `{"session_id":"s\u0000"}`, http.StatusBadRequest, "invalid_field"},
		{"session id too long", http.MethodPost, PathTick, `{"session_id":"` + strings.Repeat("s", core.MaxStoredText+1) + `"}`, http.StatusBadRequest, "invalid_field"},
		{"oversized body", http.MethodPost, PathTick, `{"message":"` + strings.Repeat("a", MaxBody) + `"}`, http.StatusRequestEntityTooLarge, "payload_too_large"},
		{"GET tick", http.MethodGet, PathTick, "", http.StatusMethodNotAllowed, "method_not_allowed"},
		{"POST spec", http.MethodPost, PathSpec, "{}", http.StatusMethodNotAllowed, "method_not_allowed"},
		{"unknown path", http.MethodGet, "/v4/nope", "", http.StatusNotFound, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := do(t, tc.method, srv.URL+tc.path, tc.body)
			var e Error
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if status != tc.status || e.StatusCode != tc.status || e.Error != tc.code || e.Message == "" {
				t.Fatalf("%d %+v, want %d %s", status, e, tc.status, tc.code)
			}
			if h.Get("Content-Type") != "application/json" {
				t.Fatalf("content type %q", h.Get("Content-Type"))
			}
		})
	}
}

func TestTickResponseMarshal(t *testing.T) {
	r := TickResponse{Envelope: amp.Envelope{Spec: amp.SpecVersion, Gate: amp.GateNone, State: amp.EnvelopeState{Role: "none"}}, SessionID: "s", Event: "Manual"}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":"AMP/0.1","events":[],"blocks":[],"gate":"none","state":{"pressure":0,"arena":false,"dream":false,"happened":false,"role":"none"},"session_id":"s","event":"Manual",` +
		`"amp":{"spec":"AMP/0.1","events":[],"blocks":[],"gate":"none","state":{"pressure":0,"arena":false,"dream":false,"happened":false,"role":"none"}}}`
	if string(data) != want {
		t.Fatalf("got  %s\nwant %s", data, want)
	}
}

// TestTickFailureIsLoggedNotEchoed: when the engine cannot take a tick (here
// its file store cannot create its directory, under a regular file) the
// caller gets 500 tick_failed without the cause, which goes to the log.
func TestTickFailureIsLoggedNotEchoed(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	srv := httptest.NewServer(New(amp.New(amp.NewFileStore(filepath.Join(blocker, "sessions"))), log))
	t.Cleanup(srv.Close)
	code, _, body := do(t, http.MethodPost, srv.URL+PathTick, `{"session_id":"s1","event":"SessionStart"}`)
	var e Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if code != http.StatusInternalServerError || e.Error != "tick_failed" || e.StatusCode != 500 || e.Message == "" {
		t.Fatalf("%d %+v, want 500 tick_failed", code, e)
	}
	if strings.Contains(string(body), "not-a-directory") {
		t.Fatalf("the answer shows the store's path: %s", body)
	}
	if l := logged.String(); !strings.Contains(l, "amp tick failed") || !strings.Contains(l, "not-a-directory") || !strings.Contains(l, "session_id=s1") {
		t.Fatalf("the log lacks the cause: %q", l)
	}

	// A caller that went away is not a failure of the hub: no answer, no
	// error in the log.
	logged.Reset()
	quiet := New(amp.New(amp.NewMemoryStore()), log)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	quiet.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PathTick, strings.NewReader(`{"session_id":"s2","event":"Stop"}`)).WithContext(ctx))
	if rec.Body.Len() != 0 || logged.Len() != 0 {
		t.Fatalf("tick for a caller that went away: answered %q, logged %q", rec.Body, logged.String())
	}
}

func TestPreflight(t *testing.T) {
	srv, _ := newServer(t)
	for _, c := range []struct {
		path, origin string
	}{{PathSpec, "*"}, {PathTick, ""}} {
		code, h, body := do(t, http.MethodOptions, srv.URL+c.path, "")
		if code != http.StatusNoContent || len(body) != 0 || h.Get("Access-Control-Allow-Origin") != c.origin || h.Get("Allow") == "" {
			t.Errorf("OPTIONS %s: %d %v %q", c.path, code, h, body)
		}
	}
}

func TestTickAnswerNestsTheEnvelope(t *testing.T) {
	srv, _ := newServer(t)
	code, _, body := do(t, http.MethodPost, srv.URL+PathTick, `{"session_id":"n1","event":"UserPromptSubmit","detected_triggers":["giving_up_language"]}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var resp struct {
		AMP json.RawMessage `json:"amp"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	env, err := amp.DecodeEnvelope(resp.AMP)
	if err != nil || !slices.Equal(env.Events, []amp.Event{amp.EventGivingUp}) {
		t.Fatalf("amp %s: %+v %v", resp.AMP, env, err)
	}
	code, _, body = do(t, http.MethodPost, srv.URL+PathTick, `{"detected_triggers":["bored"]}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "unknown_trigger") {
		t.Fatalf("unknown trigger: %d %s", code, body)
	}
}

// TestSessionsPerCredential: two credentials using the same session id
// have two sessions; one cannot read or raise the other's pressure.
func TestSessionsPerCredential(t *testing.T) {
	store := amp.NewMemoryStore()
	h := New(amp.New(store), nil)
	// Stand-in for the hub's authentication: the principal comes from a header.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := auth.Principal{AgentID: r.Header.Get("X-Agent")}
		h.ServeHTTP(w, r.WithContext(auth.With(r.Context(), p)))
	}))
	t.Cleanup(srv.Close)
	tick := func(agent, body string) amp.Envelope {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+PathTick, strings.NewReader(body))
		req.Header.Set("X-Agent", agent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		env, err := amp.DecodeEnvelope(data)
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		return env
	}
	giveUp := `{"session_id":"shared","event":"UserPromptSubmit","message":"I give up","force":true}`
	for range 3 {
		tick("alice", giveUp)
	}
	if env := tick("alice", `{"session_id":"shared"}`); env.State.Pressure != 3 {
		t.Fatalf("alice's pressure %d, want 3", env.State.Pressure)
	}
	if env := tick("bob", `{"session_id":"shared"}`); env.State.Pressure != 0 {
		t.Fatalf("bob sees alice's session: pressure %d", env.State.Pressure)
	}
	if _, ok, _ := store.Load(context.Background(), "shared"); ok {
		t.Fatal("a credential's session was stored under the bare id")
	}
	if _, ok, _ := store.Load(context.Background(), amp.OwnedSession("agent:alice", "shared")); !ok {
		t.Fatal("alice's session is not under her namespace")
	}
}

// TestSessionIDTooLongForItsOwner: a session id within the bound alone,
// but over it with the caller's namespace, is refused by the store (the
// embedded one here, as PostgreSQL would): the caller gets 400, not 500.
func TestSessionIDTooLongForItsOwner(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := New(amp.New(&ampstore.Store{Records: st, Clock: core.SystemClock{}}), nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.With(r.Context(), auth.Principal{AgentID: "alice"})))
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		id   string
		want int
	}{
		{strings.Repeat("s", 100), http.StatusOK},
		{strings.Repeat("s", core.MaxStoredText-4), http.StatusBadRequest},
	} {
		status, _, body := do(t, http.MethodPost, srv.URL+PathTick, `{"session_id":"`+c.id+`"}`)
		if status != c.want {
			t.Errorf("session id of %d bytes: %d %s, want %d", len(c.id), status, body, c.want)
		}
		if status == http.StatusBadRequest {
			var e Error
			if err := json.Unmarshal(body, &e); err != nil || e.Error != "invalid_field" || strings.Contains(e.Message, c.id) {
				t.Errorf("answer %s: want invalid_field, without the id echoed", body)
			}
		}
	}
}
