package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// statsAnswer is GET /dashboard/api/stats.
type statsAnswer struct {
	Window  string            `json:"window"`
	BucketS float64           `json:"bucket_s"`
	Since   time.Time         `json:"since"`
	Until   time.Time         `json:"until"`
	Now     time.Time         `json:"now"`
	Buckets []core.FlowBucket `json:"buckets"`
	Note    string            `json:"note"`
}

// totals sums a flow's counts and returns the queue depth at its end.
func (a statsAnswer) totals() (accepted, delivered, dead, queued int) {
	for _, b := range a.Buckets {
		accepted += b.Accepted
		delivered += b.Delivered
		dead += b.DeadLetters
	}
	if len(a.Buckets) > 0 {
		queued = a.Buckets[len(a.Buckets)-1].Queued
	}
	return
}

func readStats(t *testing.T, base, token, query string) statsAnswer {
	t.Helper()
	res, b := req{method: "GET", path: "/dashboard/api/stats" + query, token: token}.do(t, base)
	var a statsAnswer
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil {
		t.Fatalf("stats%s: %d %s", query, res.StatusCode, b)
	}
	return a
}

// TestStatsFromTheStore sends messages that end delivered, dead and
// queued, reads the charts' series, and reads the same series from a hub
// started afresh on the same store: the history is the store's, not the
// process's.
func TestStatsFromTheStore(t *testing.T) {
	dir := t.TempDir()
	opt := hub.Options{DataDir: dir, Callbacks: ssrf.Policy{AllowLoopback: true}}
	h, base, stop := hubtest.StartStop(t, opt)
	tok := h.AdminToken
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"accepted"}`)
	}))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"status":"rejected","code":422,"detail":"no"}`)
	}))
	defer bad.Close()
	for id, cb := range map[string]string{"ok": ok.URL, "bad": bad.URL, "pull": "", "sender": ""} {
		body := map[string]any{"agent_id": id, "lease_seconds": 600}
		if cb != "" {
			body["callback_url"] = cb
		}
		if res, b := (req{method: "POST", path: "/atp/register", token: tok, body: body}).do(t, base); res.StatusCode != 200 {
			t.Fatalf("register %s: %d %s", id, res.StatusCode, b)
		}
	}
	empty := readStats(t, base, tok, "")
	if a, d, x, q := empty.totals(); a+d+x+q != 0 {
		t.Fatalf("a new hub's flow: %+v", empty)
	}
	for i, to := range []string{"ok", "bad", "pull", "pull", "pull"} {
		path := "/atp/send"
		if to != "pull" {
			path += "?wait_ms=10000" // answered once the receiver has
		}
		res, b := req{method: "POST", path: path, token: tok, body: map[string]any{"atp_version": "1.0",
			"message_id": fmt.Sprintf("flow-%d", i), "sender": "sender", "receiver": to, "type": "note", "payload": map[string]any{"text": "hi"}}}.do(t, base)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("send to %s: %d %s", to, res.StatusCode, b)
		}
	}
	// The sends waited for ok's and bad's outcomes; pull's stay queued.
	for _, id := range []string{"flow-0", "flow-1"} {
		var rc struct{ Status string }
		_, b := req{method: "GET", path: "/atp/receipts/" + id, token: tok}.do(t, base)
		if json.Unmarshal(b, &rc) != nil || rc.Status == "queued" {
			t.Fatalf("%s did not end: %s", id, b)
		}
	}
	before := readStats(t, base, tok, "?window=15m")
	if a, d, x, q := before.totals(); a != 5 || d != 1 || x != 1 || q != 3 {
		t.Fatalf("flow: accepted %d, delivered %d, dead %d, queued %d; want 5, 1, 1, 3: %+v", a, d, x, q, before.Buckets)
	}
	if before.BucketS != 10 || len(before.Buckets) != 90 || before.Window != "15m" {
		t.Errorf("15m window: %v s buckets, %d of them, window %q; want 90 of 10 s", before.BucketS, len(before.Buckets), before.Window)
	}
	if before.Note == "" || before.Now.Before(before.Since) || !before.Now.Before(before.Until) {
		t.Errorf("window %s..%s does not hold now %s (note %q)", before.Since, before.Until, before.Now, before.Note)
	}
	stop()

	h2, base2 := hubtest.Start(t, opt)
	after := readStats(t, base2, h2.AdminToken, "?window=15m")
	if a, d, x, q := after.totals(); a != 5 || d != 1 || x != 1 || q != 3 {
		t.Fatalf("flow after a restart: accepted %d, delivered %d, dead %d, queued %d; want 5, 1, 1, 3", a, d, x, q)
	}
}

// TestStatsWindow checks the window parameter: its bounds, the bucket
// width each window gets, and the answer's shape.
func TestStatsWindow(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	tests := []struct {
		query   string
		status  int
		bucketS float64
		buckets int
	}{
		{"", http.StatusOK, 30, 120},
		{"?window=1m", http.StatusOK, 1, 60},
		{"?window=15m", http.StatusOK, 10, 90},
		{"?window=1h", http.StatusOK, 30, 120},
		{"?window=6h", http.StatusOK, 300, 72},
		{"?window=24h", http.StatusOK, 900, 96},
		{"?window=59s", http.StatusBadRequest, 0, 0},
		{"?window=25h", http.StatusBadRequest, 0, 0},
		{"?window=-1h", http.StatusBadRequest, 0, 0},
		{"?window=day", http.StatusBadRequest, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			res, b := req{method: "GET", path: "/dashboard/api/stats" + tt.query, token: h.AdminToken}.do(t, base)
			if res.StatusCode != tt.status {
				t.Fatalf("%d %s, want %d", res.StatusCode, b, tt.status)
			}
			if tt.status != http.StatusOK {
				var e struct{ Error, Message string }
				if json.Unmarshal(b, &e) != nil || e.Error != "invalid_field" || e.Message == "" {
					t.Errorf("error body %s", b)
				}
				return
			}
			var a statsAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatal(err)
			}
			if a.BucketS != tt.bucketS || len(a.Buckets) != tt.buckets {
				t.Errorf("%v s x %d buckets, want %v s x %d", a.BucketS, len(a.Buckets), tt.bucketS, tt.buckets)
			}
			width := time.Duration(a.BucketS * float64(time.Second))
			for i, bk := range a.Buckets {
				if want := a.Since.Add(time.Duration(i) * width); !bk.Start.Equal(want) {
					t.Fatalf("bucket %d starts %s, want %s", i, bk.Start, want)
				}
			}
			if !a.Since.Equal(a.Since.Truncate(width)) {
				t.Errorf("window starts at %s, not on a bucket boundary", a.Since)
			}
		})
	}
}

// TestAPIErrors: each refusal of the dashboard's handlers, with its status,
// code and message (the handlers return their errors, written in one
// place).
func TestAPIErrors(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	tok := h.AdminToken
	_, b := req{method: "POST", path: "/atp/register", body: map[string]any{"agent_id": "a1", "lease_seconds": 60}}.do(t, base)
	var reg struct{ Token string }
	if json.Unmarshal(b, &reg) != nil || reg.Token == "" {
		t.Fatalf("register: %s", b)
	}
	tests := []struct {
		name   string
		r      req
		status int
		code   string
		msg    string
	}{
		{"no credential", req{method: "GET", path: "/dashboard/api/stats"}, 401, "unauthorized",
			"the dashboard API needs the operator: log in with the admin token or send it as a bearer token"},
		{"an agent", req{method: "GET", path: "/dashboard/api/stats", token: reg.Token}, 403, "forbidden",
			"the dashboard API needs the operator, not an agent: log in with the admin token or send it as a bearer token"},
		{"bad before", req{method: "GET", path: "/dashboard/api/messages?before=x", token: tok}, 400, "invalid_field",
			"before must be a message sequence number"},
		{"bad limit", req{method: "GET", path: "/dashboard/api/messages?limit=0", token: tok}, 400, "invalid_field", "limit must be 1..500"},
		{"unknown status", req{method: "GET", path: "/dashboard/api/messages?status=bogus", token: tok}, 400, "invalid_field",
			"status must be queued, delivered, rejected, timeout or expired"},
		{"bad after", req{method: "GET", path: "/dashboard/api/conversations/c?after=-1", token: tok}, 400, "invalid_field",
			"after must be a message sequence number"},
		{"bad conversation limit", req{method: "GET", path: "/dashboard/api/conversations?limit=0", token: tok}, 400, "invalid_field",
			"limit must be 1..1000"},
		{"unknown agent", req{method: "GET", path: "/dashboard/api/agents/nope", token: tok}, 404, "not_found", ""},
		{"unknown receipt", req{method: "GET", path: "/dashboard/api/receipts/nope", token: tok}, 404, "not_found", ""},
		{"bad window", req{method: "GET", path: "/dashboard/api/stats?window=2d", token: tok}, 400, "invalid_field",
			"window must be a duration from 1m to 24h, such as 15m, 1h or 24h"},
		{"cross-site logout", req{method: "POST", path: "/dashboard/logout", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403,
			"forbidden", "logout must come from the dashboard's own page"},
		{"cross-site login", req{method: "POST", path: "/dashboard/login", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403,
			"forbidden", "login must come from the dashboard's own page"},
		{"login form too large", req{method: "POST", path: "/dashboard/login", form: map[string][]string{"token": {string(make([]byte, 9<<10))}}}, 400,
			"invalid_field", "login form: http: request body too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, b := tt.r.do(t, base)
			var e struct {
				Error      string `json:"error"`
				Message    string `json:"message"`
				StatusCode int    `json:"status_code"`
			}
			if res.StatusCode != tt.status || json.Unmarshal(b, &e) != nil || e.Error != tt.code || e.StatusCode != tt.status ||
				(tt.msg != "" && e.Message != tt.msg) {
				t.Errorf("%d %s, want %d %s %q", res.StatusCode, b, tt.status, tt.code, tt.msg)
			}
			if res.Header.Get("Content-Security-Policy") == "" {
				t.Error("an error answer without the security headers")
			}
		})
	}
}
