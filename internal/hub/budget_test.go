package hub

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func TestBudgeted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const body = 1000
		share := int64(body*bodyFactor + 4096) // what one request takes
		b := core.NewBudget(2 * share)
		release := make(chan struct{})
		h := budgeted(b, 1<<20, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/stream" {
				w.(http.Flusher).Flush()
			}
			<-release
			w.WriteHeader(200)
		}))
		post := func(path string) *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(strings.Repeat("x", body))))
			return w
		}
		results := make(chan *httptest.ResponseRecorder, 10)
		for range 2 {
			go func() { results <- post("/send") }()
		}
		synctest.Wait()
		if b.Used() != 2*share {
			t.Fatalf("two requests in flight hold %d, want %d", b.Used(), 2*share)
		}
		// A third waits for room, and gets it when one ends.
		go func() { results <- post("/send") }()
		synctest.Wait()
		if len(results) != 0 {
			t.Fatal("a request past the budget was not held back")
		}
		release <- struct{}{}
		if w := <-results; w.Code != 200 {
			t.Fatalf("first: %d", w.Code)
		}
		synctest.Wait()
		if b.Used() != 2*share {
			t.Fatalf("after one ended and the waiting one started: %d held", b.Used())
		}
		// A fourth finds no room within budgetWait: 507 with Retry-After.
		start := time.Now()
		w := post("/send")
		var e struct{ Error string }
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != 507 || e.Error != "over_budget" || w.Header().Get("Retry-After") != "1" {
			t.Errorf("over the budget: %d %q Retry-After %q", w.Code, w.Body.String(), w.Header().Get("Retry-After"))
		}
		if time.Since(start) != budgetWait {
			t.Errorf("refused after %v, want %v", time.Since(start), budgetWait)
		}
		close(release)
		for range 2 {
			<-results
		}
		if b.Used() != 0 {
			t.Errorf("all done, %d still held", b.Used())
		}
		// A stream gives its share back when it first flushes.
		hold := make(chan struct{})
		release = hold
		go func() { results <- post("/stream") }()
		synctest.Wait()
		if b.Used() != 0 {
			t.Errorf("a flushed stream still holds %d", b.Used())
		}
		close(hold)
		<-results
		// Requests without a body take nothing.
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	})
}

func TestParseSize(t *testing.T) {
	cases := map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "1048576": 1 << 20, "1.5 GiB": 3 << 29, "10KB": 10000, "64m": 64 << 20, "0": 0}
	for in, want := range cases {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1GiB", "lots", "1e30"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if d := DefaultMemoryBudget(); d < 64<<20 {
		t.Errorf("DefaultMemoryBudget() = %d", d)
	}
}
