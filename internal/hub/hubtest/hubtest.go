// Package hubtest starts real hubs for tests.
package hubtest

import (
	"context"
	"net"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/hub"
)

// Start starts a hub with opt on a loopback port, with its own data
// directory, for tests, and returns it with its base URL. Without
// opt.Dev auth is on, with the admin token "sba_test-admin-token" unless
// opt sets one. The hub is stopped when the test ends.
func Start(t testing.TB, opt hub.Options) (*hub.Hub, string) {
	t.Helper()
	if opt.DataDir == "" {
		opt.DataDir = t.TempDir()
	}
	opt.Addr = "127.0.0.1:0"
	if opt.AdminToken == "" && !opt.Dev {
		opt.AdminToken = "sba_test-admin-token"
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := hub.New(ctx, opt)
	if err != nil {
		cancel()
		t.Fatalf("hub: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("listen: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = h.Close()
	})
	return h, "http://" + ln.Addr().String()
}
