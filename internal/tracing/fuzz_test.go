package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-hub/switchboard/internal/tracing"
)

// FuzzMiddlewareTraceParent feeds any traceparent header to the middleware
// (tracing off) and checks that the handler behind it always sees a valid
// version-00 traceparent, keeping the caller's trace id when the caller's
// header is valid.
func FuzzMiddlewareTraceParent(f *testing.F) {
	for _, s := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var seen string
		h := tracing.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Get("traceparent") }))
		req := httptest.NewRequest("POST", "/atp/send", nil)
		req.Header["Traceparent"] = []string{in}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if !validTP.MatchString(seen) {
			t.Fatalf("input %q: handler saw %q", in, seen)
		}
		hdr := http.Header{}
		hdr.Set("traceparent", in)
		callerSC := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(hdr)))
		if callerSC.IsValid() && seen[3:35] != callerSC.TraceID().String() {
			t.Fatalf("input %q (valid): trace id not kept, handler saw %q", in, seen)
		}
	})
}
