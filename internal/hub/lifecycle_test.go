package hub

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// failing is an adapter whose background work fails when told to.
type failing struct{ fail chan struct{} }

func (failing) Name() string             { return "failing" }
func (failing) Mount(mux *http.ServeMux) {}
func (f failing) Run(ctx context.Context) error {
	select {
	case <-f.fail:
		return errors.New("broken")
	case <-ctx.Done():
		return nil
	}
}

// TestShutdownOrder: Serve stops in the documented order (stop accepting
// and end the requests in flight, drain the background work, stop the
// deliverers, close the store) whether its context ends or an adapter
// fails, and every goroutine it started has returned when it does.
func TestShutdownOrder(t *testing.T) {
	for _, c := range []struct {
		name    string
		fail    bool
		wantErr string
	}{
		{"context ends", false, ""},
		{"an adapter fails", true, "adapter failing: broken"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Warnings and errors in the test's output, no request log
			// (hubtest.Logger, which this package cannot import).
			logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			h, err := New(ctx, Options{Dev: true, DataDir: t.TempDir(), Addr: "127.0.0.1:0", Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var stages []string
			h.stage = func(s string) { mu.Lock(); stages = append(stages, s); mu.Unlock() }
			f := failing{fail: make(chan struct{})}
			if c.fail {
				h.adapters = append(h.adapters, f)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			base := "http://" + ln.Addr().String()
			served := make(chan error, 1)
			go func() { served <- h.Serve(ctx, ln) }()

			// A request in flight when the hub stops: an open stream.
			reg, err := http.Post(base+"/atp/register", "application/json", strings.NewReader(`{"agent_id":"reader","delivery":"stream"}`))
			if err != nil {
				t.Fatal(err)
			}
			reg.Body.Close()
			stream, err := http.Get(base + "/atp/stream/reader")
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Body.Close()
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				sc := bufio.NewScanner(stream.Body)
				for sc.Scan() {
				}
			}()
			if c.fail {
				close(f.fail)
			} else {
				cancel()
			}
			select {
			case err = <-served:
			case <-time.After(ShutdownTimeout + 5*time.Second):
				t.Fatal("Serve did not return")
			}
			if got := ""; err != nil {
				got = err.Error()
				if got != c.wantErr {
					t.Errorf("Serve: %v, want %q", err, c.wantErr)
				}
			} else if c.wantErr != "" {
				t.Errorf("Serve: nil, want %q", c.wantErr)
			}
			mu.Lock()
			got := slices.Clone(stages)
			mu.Unlock()
			if want := []string{"http", "workers", "deliverers", "store"}; !slices.Equal(got, want) {
				t.Errorf("stages %v, want %v", got, want)
			}
			select {
			case <-ended:
			case <-time.After(5 * time.Second):
				t.Error("the stream in flight did not end")
			}
			if err := h.Store.Ping(context.Background()); err == nil {
				t.Error("the store still answers after Serve returned")
			}
			if conn, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
				conn.Close()
				t.Error("the listener still accepts")
			}
			if err := h.Close(); err != nil {
				t.Errorf("Close after Serve: %v", err)
			}
		})
	}
}
