package metrics_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/metrics"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
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
		{"switchboard_receiver_queued_messages", map[string]string{"receiver": "puller"}, 2},
		{"switchboard_queued_messages", nil, 2},
		{"switchboard_build_info", nil, 1},
		{"switchboard_http_requests_total", map[string]string{"route": "POST /atp/send", "method": "POST", "code": "200"}, 6},
		{"switchboard_http_request_duration_seconds", map[string]string{"route": "POST /atp/send", "code": "200"}, 6},
		{"switchboard_store_up", nil, 1},
	}
	// Events reach the collector asynchronously: scrape until it caught
	// up (or fail with what the last scrape showed).
	var fams map[string]*dto.MetricFamily
	waitfor.OK(t, "the metrics to show the events", func() error {
		fams = scrape(t, base, tok)
		var missing []string
		for _, w := range want {
			if got, ok := value(fams, w.name, w.labels); !ok || got != w.value {
				missing = append(missing, fmt.Sprintf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not as expected:\n%s", strings.Join(missing, "\n"))
		}
		return nil
	})
	if _, ok := value(fams, "switchboard_receiver_queued_messages", map[string]string{"receiver": "ok-worker"}); ok {
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

// TestNamingConventions holds every series to Prometheus's naming rules:
// _total on counters and only on counters, and no unitless durations.
func TestNamingConventions(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{})
	// One request of each kind so the request series exist.
	do(t, "GET", base+"/healthz", "", nil)
	do(t, "GET", base+"/v1/dlq", "", nil)
	fams := scrape(t, base, h.AdminToken)
	for _, name := range []string{"switchboard_build_info", "switchboard_http_requests_total", "switchboard_http_request_duration_seconds",
		"switchboard_http_requests_refused_total", "switchboard_queued_messages"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if v, ok := value(fams, "switchboard_http_requests_refused_total", map[string]string{"route": "GET /v1/dlq", "code": "401"}); !ok || v != 1 {
		t.Errorf("refused counter for GET /v1/dlq = %v (present %v), want 1", v, ok)
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, metrics.Namespace+"_") {
			continue
		}
		counter := f.GetType() == dto.MetricType_COUNTER
		if total := strings.HasSuffix(name, "_total"); total != counter {
			t.Errorf("%s is a %s: _total belongs to counters and only to them", name, f.GetType())
		}
		if strings.Contains(name, "latency") || strings.Contains(name, "duration") {
			if !strings.Contains(name, "_seconds") {
				t.Errorf("%s measures time without _seconds", name)
			}
		}
	}
	bi := fams["switchboard_build_info"].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range bi.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] == "" || !strings.HasPrefix(labels["goversion"], "go") {
		t.Errorf("build_info labels %v", labels)
	}
}

// TestGrafanaDashboard checks that every series the Grafana dashboard in
// docs/ queries is one the hub exports.
func TestGrafanaDashboard(t *testing.T) {
	h, _ := hubtest.Start(t, hub.Options{Dev: true})
	m := metrics.New(h.Relay)
	descs := make(chan *prometheus.Desc, 256)
	go func() { m.Registry().Describe(descs); close(descs) }()
	known := map[string]bool{"switchboard_connections_open": true, "switchboard_connections_max": true, "switchboard_connections_refused_total": true}
	nameRE := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		if mm := nameRE.FindStringSubmatch(d.String()); mm != nil {
			known[mm[1]] = true
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	if len(dash.Panels) < 8 {
		t.Fatalf("%d panels", len(dash.Panels))
	}
	seriesRE := regexp.MustCompile(`\b((?:switchboard|process)_[a-z_]+)`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, mm := range seriesRE.FindAllStringSubmatch(tg.Expr, -1) {
				name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(mm[1], "_bucket"), "_count"), "_sum")
				if !known[name] {
					t.Errorf("panel %q queries %s, which the hub does not export", p.Title, mm[1])
				}
			}
		}
	}
}
