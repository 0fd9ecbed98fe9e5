package integration

import (
	"net/http"
	"sync/atomic"
)

// countingHandler counts every delivery that reaches the worker, before
// deduplication.
func countingHandler(next http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		next.ServeHTTP(w, r)
	})
}
