// Package hubtest starts real hubs for tests.
package hubtest

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/hub"
)

// Start starts a hub with opt on a loopback port, with its own data
// directory, for tests, and returns it with its base URL. Without
// opt.Dev auth is on, with the admin token "sba_test-admin-token" unless
// opt sets one. Without opt.Logger it logs through Logger(t): warnings
// and errors in the test's output, no request log (LevelEnv raises the
// level). The hub is stopped when the test ends.
func Start(t testing.TB, opt hub.Options) (*hub.Hub, string) {
	t.Helper()
	h, base, _ := StartStop(t, opt)
	return h, base
}

// StartStop is Start that also returns a function stopping the hub
// before the test ends (to start another on its data directory, say);
// calling it again, or the test's end after it, does nothing more.
func StartStop(t testing.TB, opt hub.Options) (*hub.Hub, string, func()) {
	t.Helper()
	if opt.DataDir == "" {
		opt.DataDir = t.TempDir()
	}
	opt.Addr = "127.0.0.1:0"
	if opt.Logger == nil {
		opt.Logger = Logger(t)
	}
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
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			_ = h.Close()
		})
	}
	t.Cleanup(stop)
	return h, "http://" + ln.Addr().String(), stop
}
