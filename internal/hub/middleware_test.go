package hub_test

import (
	"net/http"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

func TestRateLimitAndHeaders(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{RateLimit: 5, RateBurst: 5})
	get := func(token string) *http.Response {
		req, _ := http.NewRequest("GET", base+"/atp/agents", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	codes := map[int]int{}
	var limited *http.Response
	for i := 0; i < 8; i++ {
		r := get("")
		codes[r.StatusCode]++
		if r.StatusCode == http.StatusTooManyRequests {
			limited = r
		}
	}
	if codes[200] != 5 || codes[429] != 3 {
		t.Fatalf("anonymous caller at burst 5: %v", codes)
	}
	if limited.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	for i := 0; i < 10; i++ {
		if r := get(h.AdminToken); r.StatusCode != 200 {
			t.Fatalf("the operator is not rate limited: %d", r.StatusCode)
		}
	}
	r := get(h.AdminToken)
	for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestDevRefusedOffLoopback(t *testing.T) {
	if _, err := hub.New(t.Context(), hub.Options{Dev: true, Addr: "0.0.0.0:8080", DataDir: t.TempDir()}); err == nil {
		t.Fatal("--dev on a public address must be refused")
	}
}
