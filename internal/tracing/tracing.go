// Package tracing carries W3C trace context through the hub and, when
// enabled, records OpenTelemetry spans exported over OTLP/HTTP.
//
// Tracing is off by default. Setup turns it on when the standard
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// environment variable is set; the exporter then honours the other standard
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression).
//
// The trace context travels with the message, on or off:
//
//  1. Middleware reads the request's traceparent header. With tracing on it
//     starts a server span as the child of that context; with tracing off
//     it keeps the caller's context, or creates a fresh random one when the
//     request has none (or an invalid one), so every accepted message has a
//     trace id. Either way it rewrites the request's traceparent header to
//     the current context, and the protocol adapters store that header in
//     core.Message.TraceParent.
//  2. The store keeps TraceParent with the message.
//  3. The deliverers set the outgoing request's traceparent header from
//     TraceParent; Transport, wrapped around the hub's outbound HTTP
//     client, starts a client span for it when tracing is on and rewrites
//     the header to that span, so the receiver sees the same trace id.
package tracing

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceParent is the W3C trace context header.
const HeaderTraceParent = "traceparent"

// ScopeName is the instrumentation scope of the hub's spans.
const ScopeName = "github.com/switchboard-hub/switchboard"

// EnvEndpoint and EnvTracesEndpoint are the standard OTLP variables that
// turn tracing on.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// propagator is the W3C trace context propagator (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// provider is the tracer provider in force; nil while tracing is off.
var provider atomic.Pointer[sdktrace.TracerProvider]

// Enabled reports whether spans are being recorded.
func Enabled() bool { return provider.Load() != nil }

// Setup turns tracing on when the OTLP endpoint variable is set, exporting
// spans for serviceName and version over OTLP/HTTP. It returns a function
// that flushes and stops the exporter (a no-op when tracing is off).
func Setup(ctx context.Context, serviceName, version string) (shutdown func(context.Context) error, err error) {
	if os.Getenv(EnvEndpoint) == "" && os.Getenv(EnvTracesEndpoint) == "" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	return Enable(exp, serviceName, version), nil
}

// Enable records spans with the given exporter from now on (batched) and
// returns the function that flushes and stops it. Setup calls it; tests
// may call it with their own exporter.
func Enable(exp sdktrace.SpanExporter, serviceName, version string) (shutdown func(context.Context) error) {
	res := resource.NewSchemaless(
		attribute.String("service.name", serviceName),
		attribute.String("service.version", version),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	provider.Store(tp)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		provider.CompareAndSwap(tp, nil)
		return tp.Shutdown(ctx)
	}
}

func tracer() trace.Tracer {
	if tp := provider.Load(); tp != nil {
		return tp.Tracer(ScopeName)
	}
	return nil
}

// Middleware makes sure every request the hub handles carries a valid W3C
// traceparent header, so messages accepted from it keep their trace; with
// tracing on it also records a server span per request.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		t := tracer()
		if t == nil {
			sc := trace.SpanContextFromContext(ctx)
			if !sc.IsValid() {
				if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
					next.ServeHTTP(w, r) // reads accept no message: nothing to carry
					return
				}
				sc = NewSpanContext()
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
			}
			setHeader(ctx, r.Header)
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		ctx, span := t.Start(ctx, spanName(r), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("url.path", r.URL.Path),
			))
		defer span.End()
		setHeader(ctx, r.Header)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// setHeader writes ctx's span context as the request's traceparent (and
// tracestate), replacing what the caller sent.
func setHeader(ctx context.Context, h http.Header) {
	h.Del(HeaderTraceParent)
	h.Del("tracestate")
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// spanName is a low-cardinality name: the method and the first path
// segment (the protocol or operator area), never ids.
func spanName(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	if len(p) > 32 {
		p = p[:32]
	}
	return r.Method + " /" + p
}

// NewSpanContext returns a fresh, random, unsampled span context: a new
// trace for a message that arrived without one while the hub records
// nothing itself (the sampled flag stays 0 because no span was recorded).
func NewSpanContext() trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		_, _ = rand.Read(tid[:])
	}
	for !sid.IsValid() {
		_, _ = rand.Read(sid[:])
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true})
}

// NewTraceParent returns a fresh traceparent header value.
func NewTraceParent() string {
	return Format(NewSpanContext())
}

// Format renders a span context as a version-00 traceparent value.
func Format(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%02x", sc.TraceID(), sc.SpanID(), byte(sc.TraceFlags()))
}

// Transport wraps an outbound round tripper: when tracing is on and the
// request carries a traceparent (the deliverers set it from the message),
// it records a client span as that context's child and rewrites the header
// to the span, so the receiver's work joins the same trace. With tracing
// off it passes requests through unchanged. A signer that signs the
// traceparent header must run after it.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := tracer()
	if tr == nil || req.Header.Get(HeaderTraceParent) == "" {
		return t.base.RoundTrip(req)
	}
	ctx := propagator.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	ctx, span := tr.Start(ctx, "deliver "+req.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", req.Method),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.String("switchboard.message_id", req.Header.Get("X-Switchboard-Message-Id")),
		))
	defer span.End()
	req = req.Clone(ctx)
	setHeader(ctx, req.Header)
	resp, err := t.base.RoundTrip(req)
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	default:
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		if resp.StatusCode >= 500 {
			span.SetStatus(codes.Error, resp.Status)
		}
	}
	return resp, err
}

// statusWriter remembers the response status for the server span; it
// keeps streaming (Flush) working and lets http.ResponseController reach
// the underlying writer.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
