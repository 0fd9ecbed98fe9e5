package tracing_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/internal/tracing"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// validTP is the W3C version-00 traceparent format.
var validTP = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// recorder is a real callback server that records the traceparent of each
// delivery, by message id.
type recorder struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string]string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{got: map[string]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var env struct {
			ID  string `json:"message_id"`
			MID string `json:"id"`
		}
		_ = json.NewDecoder(req.Body).Decode(&env)
		id := env.ID
		if id == "" {
			id = env.MID
		}
		r.mu.Lock()
		r.got[id] = req.Header.Get("traceparent")
		r.mu.Unlock()
		fmt.Fprint(w, `{"status":"accepted"}`)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) wait(t *testing.T, id string) string {
	t.Helper()
	var tp string
	waitfor.True(t, "message "+id+" to reach the worker", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		var ok bool
		tp, ok = r.got[id]
		return ok
	})
	return tp
}

func post(t *testing.T, url, token, traceparent string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		t.Fatalf("POST %s: %d %s", url, res.StatusCode, out)
	}
}

// startHub starts an auth-on hub with an ATP worker and a MAMP agent, both
// pushing to the recorder.
func startHub(t *testing.T, rec *recorder) (base, token, host string) {
	h, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	token = h.AdminToken
	post(t, base+"/atp/register", token, "", map[string]any{"agent_id": "worker", "callback_url": rec.URL, "lease_seconds": 300})
	post(t, base+"/mamp/v1/agents", token, "", map[string]any{"agent_id": "mamp-agent", "name": "m", "endpoint_url": rec.URL})
	return base, token, h.Relay.Config().Host
}

func sendATP(t *testing.T, base, token, id, traceparent string) {
	// wait_ms: the answer comes when the delivery is over (its spans ended).
	post(t, base+"/atp/send?wait_ms=10000", token, traceparent, map[string]any{"atp_version": "1.0", "message_id": id, "sender": "worker",
		"receiver": "worker", "type": "task", "ttl_ms": 30000, "payload": map[string]any{"text": "hello"}})
}

func sendMAMP(t *testing.T, base, token, host, id, traceparent string) {
	post(t, base+"/mamp/v1/messages", token, traceparent, map[string]any{"protocol": "mamp/1.0", "message_id": id,
		"from": "agent://" + host + "/worker", "to": "agent://" + host + "/mamp-agent", "content": "hello",
		"metadata": map[string]any{"timestamp": time.Now().UTC().Format(time.RFC3339)}})
}

func traceID(t *testing.T, tp string) trace.TraceID {
	t.Helper()
	if !validTP.MatchString(tp) {
		t.Fatalf("traceparent %q is not a valid version-00 value", tp)
	}
	h := http.Header{}
	h.Set("traceparent", tp)
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
	if !sc.IsValid() {
		t.Fatalf("traceparent %q does not parse", tp)
	}
	return sc.TraceID()
}

// TestTraceParentCarriedWithTracingOff sends messages through ATP and MAMP
// with and without a traceparent, tracing off, and checks what the
// worker's callback receives.
func TestTraceParentCarriedWithTracingOff(t *testing.T) {
	if tracing.Enabled() {
		t.Fatal("tracing is on at the start of the test")
	}
	rec := newRecorder(t)
	base, token, host := startHub(t, rec)
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	send := map[string]func(id, tp string){
		"atp":  func(id, tp string) { sendATP(t, base, token, id, tp) },
		"mamp": func(id, tp string) { sendMAMP(t, base, token, host, id, tp) },
	}
	for proto, sendFn := range send {
		t.Run(proto+"/kept", func(t *testing.T) {
			sendFn(proto+"-kept", incoming)
			if got := rec.wait(t, proto+"-kept"); got != incoming {
				t.Errorf("worker got traceparent %q, want the sender's %q", got, incoming)
			}
		})
		t.Run(proto+"/fresh", func(t *testing.T) {
			sendFn(proto+"-fresh", "")
			got := rec.wait(t, proto+"-fresh")
			if id := traceID(t, got); id.String() == "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("fresh trace reused another message's trace id")
			}
		})
		t.Run(proto+"/invalid-replaced", func(t *testing.T) {
			for i, bad := range []string{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage",
				"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
				id := fmt.Sprintf("%s-invalid-%d", proto, i)
				sendFn(id, bad)
				got := rec.wait(t, id)
				traceID(t, got)
				if got == bad {
					t.Errorf("invalid traceparent %q was passed on", bad)
				}
			}
		})
	}
}

// collector is a real OTLP/HTTP trace receiver (protobuf).
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected "+r.URL.Path+" "+r.Header.Get("Content-Type"), http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				c.spans = append(c.spans, ss.GetSpans()...)
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

// TestTracingOnExportsSpans turns tracing on through the standard
// environment variable with a real OTLP/HTTP receiver, and checks the
// spans: the hub's server span continues the sender's trace, the delivery
// is a client span under it, and the worker receives that client span as
// its parent.
func TestTracingOnExportsSpans(t *testing.T) {
	col := newCollector(t)
	t.Setenv(tracing.EnvEndpoint, col.URL)
	shutdown, err := tracing.Setup(context.Background(), "switchboard-test", "test")
	if err != nil {
		t.Fatal(err)
	}
	flushed := false
	t.Cleanup(func() {
		if !flushed {
			_ = shutdown(context.Background())
		}
	})
	if !tracing.Enabled() {
		t.Fatal("tracing not enabled with " + tracing.EnvEndpoint + " set")
	}
	rec := newRecorder(t)
	base, token, _ := startHub(t, rec)
	const tid, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	sendATP(t, base, token, "traced-1", "00-"+tid+"-"+parent+"-01")
	got := rec.wait(t, "traced-1")
	if traceID(t, got).String() != tid {
		t.Fatalf("worker got traceparent %q, want trace id %s", got, tid)
	}
	if got[36:52] == parent {
		t.Errorf("worker's parent id is the sender's span; want the hub's delivery span")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("flush spans: %v", err)
	}
	flushed = true
	if tracing.Enabled() {
		t.Error("tracing still enabled after shutdown")
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	var server, client *tracepb.Span
	for _, s := range col.spans {
		if hex.EncodeToString(s.GetTraceId()) != tid {
			continue
		}
		switch {
		case s.GetKind() == tracepb.Span_SPAN_KIND_SERVER && s.GetName() == "POST /atp" && hex.EncodeToString(s.GetParentSpanId()) == parent:
			server = s
		case s.GetKind() == tracepb.Span_SPAN_KIND_CLIENT:
			client = s
		}
	}
	if server == nil {
		t.Fatalf("no server span for POST /atp/send under the sender's span among %d spans", len(col.spans))
	}
	if client == nil {
		t.Fatalf("no client (delivery) span in trace %s", tid)
	}
	if !bytes.Equal(client.GetParentSpanId(), server.GetSpanId()) {
		t.Errorf("delivery span's parent %x, want the server span %x", client.GetParentSpanId(), server.GetSpanId())
	}
	if want := hex.EncodeToString(client.GetSpanId()); got[36:52] != want {
		t.Errorf("worker's parent id %s, want the delivery span %s", got[36:52], want)
	}
}
