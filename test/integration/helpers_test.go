package integration

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/proctest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// fullLane skips t under go test -short: every test here runs hub
// processes under load for seconds to minutes.
func fullLane(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs hub processes under load (full lane; not with -short)")
	}
}

// countingHandler counts every delivery that reaches the worker, before
// deduplication.
func countingHandler(next http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		next.ServeHTTP(w, r)
	})
}
