package hub

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/audit"
	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/metrics"
)

// RequestIDHeader carries a request's id: taken from the request when a
// proxy set it (up to 64 visible ASCII characters), made up otherwise, and
// always echoed in the answer and written in the request log.
const RequestIDHeader = "X-Request-Id"

// observer writes the request log, counts requests in the metrics, and
// records the refusals it sees in the audit log. It is the outermost
// layer but one (the body deadline), so it sees every answer.
type observer struct {
	mux     *http.ServeMux
	log     *slog.Logger // the request log; nil: none
	audit   *audit.Recorder
	metrics *metrics.HTTP
	prefix  string
	seq     atomic.Uint64
}

func newObserver(mux *http.ServeMux, log *slog.Logger, requests bool, rec *audit.Recorder, m *metrics.HTTP) *observer {
	var b [4]byte
	_, _ = rand.Read(b[:])
	o := &observer{mux: mux, audit: rec, metrics: m, prefix: hex.EncodeToString(b[:]) + "-"}
	if requests {
		o.log = log
	}
	return o
}

// reqState is what the layers inside learn about a request.
type reqState struct {
	audit.Request
	handler     http.Handler // the mux's handler for the request (see unrouted)
	rateLimited bool
	agent       bool // the caller is an agent's credential
}

type stateKey struct{}

func stateFrom(ctx context.Context) *reqState {
	s, _ := ctx.Value(stateKey{}).(*reqState)
	return s
}

// route returns the mux's handler and pattern for r, as the observer
// found them (sparing a second lookup), or asks mux.
func route(mux *http.ServeMux, r *http.Request) (http.Handler, string) {
	if s := stateFrom(r.Context()); s != nil && s.handler != nil {
		return s.handler, s.Route
	}
	return mux.Handler(r)
}

// notePrincipal records who the request acts for.
func notePrincipal(r *http.Request, p auth.Principal) {
	if s := stateFrom(r.Context()); s != nil {
		switch {
		case p.Dev:
			s.Principal = "dev"
		default:
			s.Principal = p.Key()
		}
		s.agent = p.AgentID != ""
	}
}

// noteRateLimited records that the request was refused for its rate.
func noteRateLimited(r *http.Request) {
	if s := stateFrom(r.Context()); s != nil {
		s.rateLimited = true
	}
}

func (o *observer) requestID(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); id != "" && len(id) <= 64 && visibleASCII(id) {
		return id
	}
	return o.prefix + strconv.FormatUint(o.seq.Add(1), 10)
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func (o *observer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &reqState{Request: audit.Request{ID: o.requestID(r), Method: r.Method}}
		st.handler, st.Route = o.mux.Handler(r)
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			st.Remote = host
		} else {
			st.Remote = r.RemoteAddr
		}
		w.Header().Set(RequestIDHeader, st.ID)
		ctx := context.WithValue(r.Context(), stateKey{}, st)
		ctx = audit.Into(audit.WithRequest(ctx, &st.Request), o.audit)
		ow := &observedWriter{ResponseWriter: w}
		next.ServeHTTP(ow, r.WithContext(ctx))
		if ow.status == 0 {
			ow.status = http.StatusOK
		}
		d := time.Since(start)
		if o.metrics != nil {
			o.metrics.Observe(st.Route, r.Method, ow.status, d)
			if st.rateLimited {
				o.metrics.RateLimited(st.agent)
			}
		}
		switch ow.status {
		case http.StatusUnauthorized, http.StatusForbidden:
			o.audit.Record(ctx, audit.Event{Action: audit.ActionRefused, Outcome: audit.Refused, Status: ow.status, Reason: ow.field("error")})
		case http.StatusTooManyRequests:
			if st.rateLimited {
				o.audit.Record(ctx, audit.Event{Action: audit.ActionRefused, Outcome: audit.Refused, Status: ow.status, Reason: "rate_limited"})
			}
		}
		if o.log == nil || !o.log.Enabled(ctx, slog.LevelInfo) {
			return
		}
		attrs := make([]slog.Attr, 0, 12)
		attrs = append(attrs, slog.String("method", r.Method), slog.String("route", routeOr(st.Route)), slog.String("path", r.URL.Path),
			slog.Int("status", ow.status), slog.Float64("duration_ms", float64(d.Microseconds())/1000),
			slog.Int64("bytes", ow.bytes), slog.String("principal", principalOr(st.Principal)),
			slog.String("remote", st.Remote), slog.String("request_id", st.ID))
		if id := ow.messageID(r); id != "" {
			attrs = append(attrs, slog.String("message_id", id))
		}
		if ow.status >= 400 {
			if code := ow.field("error"); code != "" {
				attrs = append(attrs, slog.String("error", code))
			}
		}
		o.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "request", attrs...)
	})
}

func routeOr(r string) string {
	if r == "" {
		return "unmatched"
	}
	return r
}

func principalOr(p string) string {
	if p == "" {
		return "anonymous"
	}
	return p
}

// sniffMax is how much of a JSON answer the observer keeps to read its
// message_id or error code.
const sniffMax = 512

// observedWriter notes an answer's status and size, keeps the start of a
// JSON answer, and adds WWW-Authenticate to every 401 that lacks it.
type observedWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	head   []byte
	json   bool
}

func (w *observedWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		h := w.Header()
		if code == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
			h.Set("WWW-Authenticate", `Bearer realm="switchboard"`)
		}
		ct := h.Get("Content-Type")
		w.json = len(ct) >= 16 && ct[:16] == "application/json"
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *observedWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.json && len(w.head) < sniffMax {
		w.head = append(w.head, b[:min(len(b), sniffMax-len(w.head))]...)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher (event streams).
func (w *observedWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// SetReadDeadline lets the body deadline reach the connection.
func (w *observedWriter) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(w.ResponseWriter).SetReadDeadline(t)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *observedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// field returns a top-level string field of the JSON answer's start, or "".
func (w *observedWriter) field(name string) string {
	key := []byte(`"` + name + `":`)
	i := bytes.Index(w.head, key)
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(w.head[i+len(key):], " ")
	var s string
	dec := json.NewDecoder(bytes.NewReader(rest))
	if dec.Decode(&s) != nil || len(s) > 200 {
		return ""
	}
	return s
}

// messageID names the message a request concerns: the message_id of its
// JSON answer, or the {id} of a receipt, result or dead-letter route.
func (w *observedWriter) messageID(r *http.Request) string {
	if id := w.field("message_id"); id != "" {
		return id
	}
	if s := stateFrom(r.Context()); s != nil {
		switch s.Route {
		case "GET /atp/receipts/{id}", "GET /atp/results/{id}", "POST /v1/dlq/{id}/replay":
			return r.PathValue("id")
		}
	}
	return ""
}

// auditRelay records registrations and deregistrations, whichever protocol
// made them, from the relay's events, until ctx ends.
func auditRelay(ctx context.Context, bus *core.Bus, rec *audit.Recorder) {
	ch, cancel := bus.Subscribe(1024)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-ch:
			switch e.Type {
			case core.EventRegistered:
				rec.Record(ctx, audit.Event{Action: audit.ActionAgentRegistered, Outcome: audit.Allowed, Agent: e.Agent})
			case core.EventDeregistered:
				rec.Record(ctx, audit.Event{Action: audit.ActionAgentDeregistered, Outcome: audit.Allowed, Agent: e.Agent, Reason: e.Detail})
			}
		}
	}
}
