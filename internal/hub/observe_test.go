package hub_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// syncBuffer is a log destination safe for the hub's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON log records whose msg is msg.
func (s *syncBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// find returns the first record with every field of want.
func find(recs []map[string]any, want map[string]any) map[string]any {
next:
	for _, r := range recs {
		for k, v := range want {
			if r[k] != v {
				continue next
			}
		}
		return r
	}
	return nil
}

func call(t *testing.T, method, url, token, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func TestRequestAndAuditLogs(t *testing.T) {
	var logs syncBuffer
	h, base := hubtest.Start(t, hub.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	res := call(t, "POST", base+"/atp/register", "", `{"agent_id":"worker","lease_seconds":60}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("register: %d", res.StatusCode)
	}
	call(t, "POST", base+"/atp/send", h.AdminToken,
		`{"atp_version":"1.0","message_id":"m-logged","sender":"admin-probe","receiver":"worker","type":"t","payload":{}}`)
	refused := call(t, "GET", base+"/v1/dlq", "", "", "X-Request-Id", "probe-42")
	badToken := call(t, "GET", base+"/atp/agents", "sbk_made-up", "")

	// Every 401 says how to authenticate, whichever handler answered it.
	for name, r := range map[string]*http.Response{"anonymous": refused, "unknown token": badToken} {
		if r.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: %d, WWW-Authenticate %q; want 401 with a Bearer challenge", name, r.StatusCode, r.Header.Get("WWW-Authenticate"))
		}
	}
	if got := refused.Header.Get(hub.RequestIDHeader); got != "probe-42" {
		t.Errorf("request id echoed as %q, want the caller's probe-42", got)
	}

	requests := logs.records(t, "request")
	tests := []struct {
		name string
		want map[string]any
	}{
		{"registration", map[string]any{"method": "POST", "route": "POST /atp/register", "status": 200.0, "principal": "anonymous"}},
		{"send with its message id", map[string]any{"route": "POST /atp/send", "principal": "admin", "message_id": "m-logged"}},
		{"refusal with the caller's request id", map[string]any{"route": "GET /v1/dlq", "status": 401.0, "request_id": "probe-42", "error": "unauthorized"}},
		{"unknown token, routed before authentication", map[string]any{"route": "GET /atp/agents", "status": 401.0}},
	}
	for _, tt := range tests {
		r := find(requests, tt.want)
		if r == nil {
			t.Errorf("request log: no record %s with %v in\n%v", tt.name, tt.want, requests)
			continue
		}
		if _, ok := r["duration_ms"].(float64); !ok {
			t.Errorf("request log %s: no duration_ms in %v", tt.name, r)
		}
	}

	audits := logs.records(t, "audit")
	for _, want := range []map[string]any{
		{"action": "request.refused", "outcome": "refused", "status": 401.0, "route": "GET /v1/dlq", "principal": "anonymous", "request_id": "probe-42"},
		{"action": "token.invalid", "outcome": "refused", "route": "GET /atp/agents"},
		{"action": "admin.used", "outcome": "allowed", "route": "POST /atp/send", "principal": "admin"},
	} {
		if find(audits, want) == nil {
			t.Errorf("audit log: no record with %v in\n%v", want, audits)
		}
	}
	for _, a := range audits {
		if a["audit"] != true {
			t.Errorf("audit record without audit=true: %v", a)
		}
	}
}

func TestNoRequestLog(t *testing.T) {
	var logs syncBuffer
	_, base := hubtest.Start(t, hub.Options{NoRequestLog: true, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	call(t, "GET", base+"/healthz", "", "")
	call(t, "GET", base+"/v1/dlq", "", "")
	if recs := logs.records(t, "request"); len(recs) != 0 {
		t.Errorf("request log off, yet %d records: %v", len(recs), recs)
	}
	if recs := logs.records(t, "audit"); find(recs, map[string]any{"action": "request.refused"}) == nil {
		t.Errorf("the audit log stays on without the request log; got %v", recs)
	}
}
