package hubbin

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitReady(t *testing.T) {
	tests := []struct {
		name       string
		notReadyN  int64 // answers 503 this many times, then 200
		limit      time.Duration
		wantErr    error
		wantAsksGE int64
	}{
		{"ready at once", 0, time.Minute, nil, 1},
		{"ready after a while", 3, time.Minute, nil, 4},
		{"never ready", 1 << 40, 20 * time.Millisecond, ErrNotReady, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asks atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/readyz" {
					http.NotFound(w, r)
					return
				}
				if asks.Add(1) <= tt.notReadyN {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			defer srv.Close()
			err := (&Hub{Base: srv.URL}).WaitReady(time.Millisecond, tt.limit)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("WaitReady: %v, want %v", err, tt.wantErr)
			}
			if asks.Load() < tt.wantAsksGE {
				t.Errorf("asked /readyz %d times, want at least %d", asks.Load(), tt.wantAsksGE)
			}
		})
	}
}

func TestFreeAddr(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Errorf("FreeAddr = %q (%v), want a port on 127.0.0.1", addr, err)
	}
}

func TestBuildKeepsAGivenBinary(t *testing.T) {
	if got, err := Build("/some/switchboard", t.TempDir()); err != nil || got != "/some/switchboard" {
		t.Errorf("Build = %q, %v; want the given binary", got, err)
	}
}

// TestWaitReadyNoticesExit: a hub whose process ends before it is ready
// (here a command that exits at once) makes WaitReady return ErrExited
// rather than wait out its limit.
func TestWaitReadyNoticesExit(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	h, err := Start(sh, addr, "-c", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	if err := h.WaitReady(time.Millisecond, time.Hour); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitReady: %v, want ErrExited", err)
	}
}
