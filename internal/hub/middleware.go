package hub

import (
	"fmt"
	"math"
	"net"
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/ratelimit"
)

// rateLimited refuses requests over the limiter's rate with 429 and a
// Retry-After. The key is the caller's agent credential, or its address
// when anonymous; the operator is not limited.
func rateLimited(l *ratelimit.Limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := auth.From(r.Context())
		if p.Admin {
			next.ServeHTTP(w, r)
			return
		}
		key := "agent:" + p.AgentID
		if p.AgentID == "" {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				host = r.RemoteAddr
			}
			key = "addr:" + host
		}
		if ok, wait := l.Allow(key); !ok {
			w.Header().Set("Retry-After", fmt.Sprint(int(math.Ceil(wait.Seconds()))))
			httperr.Write(w, http.StatusTooManyRequests, httperr.CodeRateLimited, "request rate limit exceeded; retry later")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// secureHeaders sets conservative security headers on every answer.
func secureHeaders(next http.Handler, tls bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if tls {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}

// traceContext puts the request's traceparent in its context, for adapters
// whose messages are made far from the request (A2A, MCP).
func traceContext(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get("traceparent"); tp != "" {
			r = r.WithContext(core.WithTraceParent(r.Context(), tp))
		}
		next.ServeHTTP(w, r)
	})
}
