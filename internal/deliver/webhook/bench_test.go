package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/deliver/webhook"
	"github.com/switchboard-hub/switchboard/internal/proto/atp"
)

// BenchmarkDeliver measures one ATP push to a callback that accepts it, as
// the hub makes it: encoding, headers, HMAC signature, the round trip and
// the classification of the answer.
func BenchmarkDeliver(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	defer srv.Close()
	d := webhook.New(srv.Client(), atp.Encoder{}, &webhook.HMACSigner{Key: []byte("0123456789abcdef0123456789abcdef")})
	a := &core.Agent{ID: "bench-recv", Endpoint: core.Endpoint{Kind: core.EndpointATP, URL: srv.URL + "/atp/inbox"}}
	m := &core.Message{ID: "m-1", Sender: "bench-send", Receiver: a.ID, Type: "bench", Protocol: "atp",
		Parts: []core.Part{{Kind: core.PartText, Text: strings.Repeat("x", 256)}}, TTL: time.Minute,
		SentAt:      time.Unix(1767312000, 500000000),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if got := d.Deliver(ctx, a, m); got.Kind != core.OutcomeDelivered {
			b.Fatalf("delivery: %+v", got)
		}
	}
}
