package hubtest

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// LevelEnv names the environment variable that sets the level of the
// logs of test hubs (debug, info, warn, error); unset, Logger logs at
// warn, so a test's output holds its hub's warnings and errors but not
// one record per request.
const LevelEnv = "SWITCHBOARD_TEST_LOG"

// Logger returns a logger for a hub (or any server) a test runs in
// process: records at or above the level LevelEnv names (warn by
// default) go to the test's own output, which go test shows for a
// failing test (and with -v), not to the binary's stderr. Records
// logged after the test's cleanups have run (by a goroutine that
// outlived its hub) are dropped instead of panicking.
func Logger(t testing.TB) *slog.Logger {
	t.Helper()
	w := &testWriter{w: t.Output()}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level()}))
}

// level is the level LevelEnv names, warn when it is unset or unknown.
func level() slog.Level {
	var l slog.Level
	v := strings.TrimSpace(os.Getenv(LevelEnv))
	if v == "" || l.UnmarshalText([]byte(v)) != nil {
		return slog.LevelWarn
	}
	return l
}

// testWriter writes to a test's output until the test's cleanups run.
type testWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	return w.w.Write(p)
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
