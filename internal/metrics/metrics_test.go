package metrics_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/metrics"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

func do(t *testing.T, method, url, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// worker accepts every message, or refuses every one with 422.
func worker(t *testing.T, refuse bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"status":"rejected","code":422}`)
			return
		}
		fmt.Fprint(w, `{"status":"accepted"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func scrape(t *testing.T, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := do(t, "GET", base+"/metrics", token, nil)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse exposition: %v\n%s", err, body)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want (counter, gauge, or a histogram's sample count).
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetricsAfterTraffic(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	tok := h.AdminToken
	register := func(id, url string) {
		code, b := do(t, "POST", base+"/atp/register", tok, map[string]any{"agent_id": id, "callback_url": url, "lease_seconds": 300})
		if code != http.StatusOK && code != http.StatusCreated {
			t.Fatalf("register %s: %d %s", id, code, b)
		}
	}
	register("ok-worker", worker(t, false))
	register("refusing-worker", worker(t, true))
	register("puller", "") // no callback: a pull agent whose queue fills
	send := func(id, to string) {
		wait := "?wait_ms=5000" // until the terminal receipt
		if to == "puller" {
			wait = "" // stays queued
		}
		code, b := do(t, "POST", base+"/atp/send"+wait, tok, map[string]any{"atp_version": "1.0", "message_id": id,
			"sender": "ok-worker", "receiver": to, "type": "task", "ttl_ms": 30000, "payload": map[string]any{"text": "hi"}})
		if code >= 300 {
			t.Fatalf("send %s: %d %s", id, code, b)
		}
	}
	for i := range 3 {
		send(fmt.Sprintf("m-ok-%d", i), "ok-worker")
	}
	send("m-refused", "refusing-worker")
	send("m-queued-1", "puller")
	send("m-queued-2", "puller")

	atp := map[string]string{"protocol": "atp"}
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"switchboard_messages_accepted_total", atp, 6},
		{"switchboard_messages_delivered_total", atp, 3},
		{"switchboard_messages_rejected_total", atp, 1},
		{"switchboard_delivery_latency_seconds", atp, 3},
		{"switchboard_agent_registrations_total", nil, 3},
		{"switchboard_agents", map[string]string{"state": "alive"}, 3},
		{"switchboard_queue_depth", map[string]string{"receiver": "puller"}, 2},
		{"switchboard_queue_depth_total", nil, 2},
		{"switchboard_store_up", nil, 1},
	}
	// Events reach the collector asynchronously: scrape until it caught
	// up (or fail with what the last scrape showed).
	var fams map[string]*dto.MetricFamily
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		fams = scrape(t, base, tok)
		missing = missing[:0]
		for _, w := range want {
			if got, ok := value(fams, w.name, w.labels); !ok || got != w.value {
				missing = append(missing, fmt.Sprintf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		t.Fatalf("metrics not as expected:\n%s", strings.Join(missing, "\n"))
	}
	if _, ok := value(fams, "switchboard_queue_depth", map[string]string{"receiver": "ok-worker"}); ok {
		t.Error("an empty queue has a queue_depth series; only non-empty queues are listed")
	}
	if n, ok := value(fams, "switchboard_store_operation_seconds", map[string]string{"op": "ping"}); !ok || n < 1 {
		t.Errorf("store ping latency not observed: %v %v", n, ok)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "switchboard_events_dropped_total"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
}

func TestMetricsNeedAdminToken(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	if code, _ := do(t, "GET", base+"/metrics", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without token: %d, want 401", code)
	}
	if code, _ := do(t, "GET", base+"/metrics", "sba_wrong", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics with a wrong token: %d, want 401", code)
	}
	// An agent's credential is not the operator's.
	code, b := do(t, "POST", base+"/atp/register", "", map[string]any{"agent_id": "a1", "lease_seconds": 60})
	if code >= 300 {
		t.Fatalf("register: %d %s", code, b)
	}
	var reg struct {
		Token string `json:"token"`
	}
	_ = json.Unmarshal(b, &reg)
	if reg.Token == "" {
		t.Fatalf("no agent token in %s", b)
	}
	if code, _ := do(t, "GET", base+"/metrics", reg.Token, nil); code != http.StatusForbidden {
		t.Errorf("GET /metrics with an agent token: %d, want 403", code)
	}
	if code, _ := do(t, "GET", base+"/metrics", h.AdminToken, nil); code != http.StatusOK {
		t.Errorf("GET /metrics with the admin token: %d, want 200", code)
	}
}

func TestMetricsPublic(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{MetricsPublic: true})
	if code, _ := do(t, "GET", base+"/metrics", "", nil); code != http.StatusOK {
		t.Errorf("GET /metrics (public) without token: %d, want 200", code)
	}
}

// TestObserveLabels checks the protocol label stays bounded.
func TestObserveLabels(t *testing.T) {
	h, _ := hubtest.Start(t, hub.Options{Dev: true})
	m := metrics.New(h.Relay)
	for _, p := range []string{"atp", "mamp", "a2a", "mcp", "", "evil-" + strings.Repeat("x", 10), "another"} {
		m.Observe(core.Event{Type: core.EventAccepted, Protocol: p})
	}
	m.Observe(core.Event{Type: core.EventAccepted, Protocol: "atp", Status: core.StatusExpired})
	m.Observe(core.Event{Type: core.EventDelivered, Protocol: "mamp", Latency: 30 * time.Millisecond, Attempts: 2})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	tests := []struct {
		name, proto string
		want        float64
	}{
		{"switchboard_messages_accepted_total", "atp", 2},
		{"switchboard_messages_accepted_total", "mamp", 1},
		{"switchboard_messages_accepted_total", "unknown", 1},
		{"switchboard_messages_accepted_total", "other", 2},
		{"switchboard_messages_expired_total", "atp", 1},
		{"switchboard_messages_delivered_total", "mamp", 1},
		{"switchboard_delivery_latency_seconds", "mamp", 1},
	}
	for _, tc := range tests {
		got, ok := value(byName, tc.name, map[string]string{"protocol": tc.proto})
		if !ok || got != tc.want {
			t.Errorf("%s{protocol=%q} = %v (present %v), want %v", tc.name, tc.proto, got, ok, tc.want)
		}
	}
	if n := len(byName["switchboard_messages_accepted_total"].GetMetric()); n != 6 {
		t.Errorf("accepted_total has %d series, want 6 (4 protocols, unknown, other)", n)
	}
}
