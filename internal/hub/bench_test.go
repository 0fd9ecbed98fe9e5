package hub_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// BenchmarkATPSend measures POST /atp/send served by the hub's whole
// handler (tracing, auth, rate limit, headers, the ATP adapter and an
// embedded store without fsync) as the load test sends it: a small text
// payload with a bearer token, the operator's or the sending agent's.
func BenchmarkATPSend(b *testing.B) {
	for _, who := range []string{"admin", "agent"} {
		b.Run(who, func(b *testing.B) { benchmarkATPSend(b, who == "agent") })
	}
}

func benchmarkATPSend(b *testing.B, asAgent bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := hub.New(ctx, hub.Options{DataDir: b.TempDir(), Addr: "127.0.0.1:0", AdminToken: "sba_bench-admin-token",
		NoSync: true, RateLimit: 1e9, Relay: core.Config{MaxQueue: -1}, Logger: hubtest.Logger(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	post := func(path, token, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.Handler.ServeHTTP(rec, req)
		return rec
	}
	for _, id := range []string{"bench-recv", "bench-send"} {
		if rec := post("/atp/register", h.AdminToken, `{"agent_id":"`+id+`"}`); rec.Code != http.StatusOK {
			b.Fatalf("register %s: %d %s", id, rec.Code, rec.Body)
		}
	}
	token := h.AdminToken
	if asAgent {
		a, err := h.Relay.LookupAgent(ctx, core.AdminPrincipal(), "bench-send")
		if err != nil {
			b.Fatal(err)
		}
		if token, err = h.Creds.Issue(ctx, "bench-send", a.Generation); err != nil {
			b.Fatal(err)
		}
	}
	text := strings.Repeat("x", 256)
	ts := strconv.FormatFloat(float64(time.Now().UnixMicro())/1e6, 'f', -1, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		body := `{"atp_version":"1.0","message_id":"m-` + strconv.Itoa(i) + `","sender":"bench-send","receiver":"bench-recv",` +
			`"type":"bench","timestamp":` + ts + `,"ttl_ms":60000,"payload":{"text":"` + text + `"}}`
		rec := post("/atp/send", token, body)
		if rec.Code != http.StatusOK {
			b.Fatalf("send: %d %s", rec.Code, rec.Body)
		}
		if i == 0 {
			var out struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Status != "queued" {
				b.Fatalf("send answered %s", rec.Body)
			}
		}
	}
}
