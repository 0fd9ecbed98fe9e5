package hub

import (
	"math"
	"net"
	"net/http"
	"strconv"

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
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			httperr.Write(w, http.StatusTooManyRequests, httperr.CodeRateLimited, "request rate limit exceeded; retry later")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// secureHeaders sets conservative security headers on every answer.
func secureHeaders(next http.Handler, tls bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The keys are canonical, as Header.Set would make them, and the
		// values share one allocation.
		v := []string{"nosniff", "DENY", "no-referrer", "max-age=31536000"}
		h := w.Header()
		h["X-Content-Type-Options"] = v[0:1:1]
		h["X-Frame-Options"] = v[1:2:2]
		h["Referrer-Policy"] = v[2:3:3]
		if tls {
			h["Strict-Transport-Security"] = v[3:4:4]
		}
		next.ServeHTTP(w, r)
	})
}

// authenticated authenticates every request, answering an invalid token
// with the error, and puts its principal in its context, with its
// traceparent for adapters whose messages are made far from the request
// (A2A, MCP): one derived request carries both.
func authenticated(a *auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			httperr.From(w, err)
			return
		}
		ctx := auth.With(r.Context(), p)
		if tp := r.Header.Get("Traceparent"); tp != "" { // canonical key: Get need not allocate one
			ctx = core.WithTraceParent(ctx, tp)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// unrouted answers requests no route of mux matches with the hub's JSON
// error (404 not_found, or 405 method_not_allowed keeping the Allow header
// the mux computes) instead of ServeMux's plain text. Everything else of
// the mux is kept: a matched request goes to mux.ServeHTTP as before (the
// only added cost is the route lookup of mux.Handler), and the mux's own
// redirects (unclean paths, trailing slashes) pass through unchanged.
func unrouted(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" || r.RequestURI == "*" {
			mux.ServeHTTP(w, r)
			return
		}
		// No pattern: h is the mux's 404, 405 or redirect handler, none of
		// which reads path values, so it can run without the mux.
		h.ServeHTTP(&unroutedWriter{ResponseWriter: w, r: r}, r)
	})
}

// unroutedWriter turns the mux's plain-text 404 and 405 into JSON errors
// and drops their text; any other answer passes through.
type unroutedWriter struct {
	http.ResponseWriter
	r       *http.Request
	discard bool
}

func (u *unroutedWriter) WriteHeader(code int) {
	switch code {
	case http.StatusNotFound:
		u.discard = true
		httperr.Write(u.ResponseWriter, code, httperr.CodeNotFound, "no route for "+u.r.Method+" "+u.r.URL.Path)
	case http.StatusMethodNotAllowed:
		u.discard = true
		httperr.Write(u.ResponseWriter, code, httperr.CodeMethodNotAllowed,
			"method "+u.r.Method+" not allowed for "+u.r.URL.Path+" (allowed: "+u.Header().Get("Allow")+")")
	default:
		u.ResponseWriter.WriteHeader(code)
	}
}

func (u *unroutedWriter) Write(b []byte) (int, error) {
	if u.discard {
		return len(b), nil
	}
	return u.ResponseWriter.Write(b)
}

// members lets only a caller with a credential (any agent's, or the admin
// token) through when auth is on; an anonymous one gets 401.
func members(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.Member(r.Context()); err != nil {
			httperr.From(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
