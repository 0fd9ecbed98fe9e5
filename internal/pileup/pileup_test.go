package pileup

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

// hub answers registrations and refuses each message's first refuseFirst
// sends with code, as a hub at its budget does.
type hub struct {
	code, refuseFirst int
	mu                sync.Mutex
	tries             map[string]int
	registered        []string
	sizes             map[int]bool
}

func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m struct {
		AgentID   string            `json:"agent_id"`
		MessageID string            `json:"message_id"`
		Receiver  string            `json:"receiver"`
		TTL       int64             `json:"ttl_ms"`
		Payload   map[string]string `json:"payload"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch r.URL.Path {
	case "/atp/register":
		h.registered = append(h.registered, m.AgentID)
	case "/atp/send":
		if m.TTL != 60000 {
			http.Error(w, "ttl", http.StatusBadRequest)
			return
		}
		h.sizes[len(m.Payload["text"])] = true
		h.tries[m.MessageID]++
		if h.tries[m.MessageID] <= h.refuseFirst {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(h.code)
		}
	default:
		http.NotFound(w, r)
	}
}

func TestLoad(t *testing.T) {
	retryRoom := func(attempt, code int, _ string) (time.Duration, bool) {
		return time.Millisecond, code == http.StatusInsufficientStorage && attempt < 3
	}
	tests := []struct {
		name              string
		code, refuseFirst int
		retry             func(int, int, string) (time.Duration, bool)
		want              Result
	}{
		{"all accepted", 200, 0, retryRoom, Result{Accepted: 20}},
		{"refused once, retried", http.StatusInsufficientStorage, 1, retryRoom, Result{Accepted: 20, Refused: 20, RefusedFirst: 20}},
		{"refused past the retries", http.StatusInsufficientStorage, 5, retryRoom, Result{Refused: 80, RefusedFirst: 20, GaveUp: 20}},
		{"not retryable", http.StatusRequestEntityTooLarge, 1, retryRoom, Result{Refused: 20, RefusedFirst: 20, GaveUp: 20}},
		{"no retry policy", http.StatusInsufficientStorage, 1, nil, Result{Refused: 20, RefusedFirst: 20, GaveUp: 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &hub{code: tt.code, refuseFirst: tt.refuseFirst, tries: map[string]int{}, sizes: map[int]bool{}}
			srv := httptest.NewServer(h)
			defer srv.Close()
			var mu sync.Mutex
			answers := 0
			l := Load{Base: srv.URL, Messages: 20, Size: 1000, Receivers: 3, Senders: 4, TTL: time.Minute, Retry: tt.retry,
				Answered: func(int, string) { mu.Lock(); answers++; mu.Unlock() }}
			ctx := context.Background()
			if err := l.Register(ctx); err != nil {
				t.Fatal(err)
			}
			if got := len(h.registered); got != 4 || h.registered[3] != "sender" {
				t.Errorf("registered %v, want r0, r1, r2, sender", h.registered)
			}
			got := l.Send(ctx)
			got.Took = 0
			if got != tt.want {
				t.Errorf("result %+v, want %+v", got, tt.want)
			}
			if int64(answers) != got.Accepted+got.Refused {
				t.Errorf("Answered called %d times, want %d", answers, got.Accepted+got.Refused)
			}
			if len(h.tries) != 20 || len(h.sizes) != 1 || !h.sizes[1000] {
				t.Errorf("%d messages sent with payload sizes %v, want 20 of 1000 bytes", len(h.tries), h.sizes)
			}
		})
	}
}

func TestRegisterRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer srv.Close()
	if err := (Load{Base: srv.URL, Receivers: 1}).Register(context.Background()); err == nil {
		t.Fatal("a refused registration went unnoticed")
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		name           string
		status         string
		wantCur, wantP int64
		wantErr        bool
	}{
		{"both", "Name:\tx\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\nThreads: 3\n", 1 << 20, 2 << 20, false},
		{"no peak", "VmRSS:\t1024 kB\n", 0, 0, true},
		{"not a number", "VmRSS:\tx kB\nVmHWM:\t1 kB\n", 0, 0, true},
		{"empty", "", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur, peak, err := parseStatus(tt.status)
			if (err != nil) != tt.wantErr || cur != tt.wantCur || peak != tt.wantP {
				t.Errorf("parseStatus = %d, %d, %v; want %d, %d, error %v", cur, peak, err, tt.wantCur, tt.wantP, tt.wantErr)
			}
		})
	}
}

func TestRSSOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	cur, peak, err := RSS(os.Getpid())
	if err != nil || cur <= 0 || peak < cur {
		t.Errorf("RSS = %d, peak %d, %v; want a resident size at most its peak", cur, peak, err)
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add("VmHWM:\t2048 kB\nVmRSS:\t1024 kB\n")
	f.Add("VmRSS: 99999999999999999999 kB\nVmHWM: 1 kB")
	f.Fuzz(func(t *testing.T, s string) {
		cur, peak, err := parseStatus(s)
		if err != nil && (cur != 0 || peak != 0) {
			t.Errorf("an error with values %d, %d", cur, peak)
		}
	})
}
