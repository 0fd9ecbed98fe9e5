package hub

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

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
		if ok, wait := l.Allow(auth.CallerKey(r)); !ok {
			tooManyRequests(w, wait)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func tooManyRequests(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	httperr.Write(w, http.StatusTooManyRequests, httperr.CodeRateLimited, "request rate limit exceeded; retry later")
}

// bodyDeadline bounds how long a request body may take to arrive. Without
// it a client that trickles a body (a byte a second stays within every size
// limit) holds a connection and a goroutine for as long as it likes:
// net/http's ReadHeaderTimeout covers only the headers, and its
// ReadTimeout cannot serve, since it would also cut the streams that a
// POST opens (A2A and MCP answer some with an event stream).
//
// The connection's read deadline is set when a request with a body
// starts and lifted as soon as the body has been read to its end; a body
// still arriving at the deadline fails to read, the handler answers 408
// (see httperr.DecodeJSON), and the connection is closed. A body left
// unread keeps the deadline, so what net/http reads of it after the handler
// is bounded too.
func bodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		// net/http's writers (HTTP/1 and HTTP/2) have the method that
		// http.ResponseController calls; asking for it directly saves
		// the controller's allocation on every request.
		rd, ok := w.(readDeadliner)
		if !ok || rd.SetReadDeadline(time.Now().Add(d)) != nil {
			next.ServeHTTP(w, r) // a writer without deadlines (tests' recorders)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rd: rd}
		next.ServeHTTP(w, r)
	})
}

type readDeadliner interface{ SetReadDeadline(time.Time) error }

// deadlineBody lifts the read deadline once the body has been read.
type deadlineBody struct {
	io.ReadCloser
	rd readDeadliner
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		// The whole body is in: what the connection reads next (the next
		// request, or nothing while a stream is answered) is not bound by
		// this body's deadline. (net/http's HTTP/1 server lifts it too when
		// it starts watching for the client to hang up; this does not
		// depend on that, and serves HTTP/2 as well.)
		_ = b.rd.SetReadDeadline(time.Time{})
	}
	return n, err
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
//
// A request whose credential is refused counts against its address's rate,
// as an anonymous request would: without that, requests with made-up
// tokens (each one a store lookup) would be the one kind no limit bounds.
func authenticated(a *auth.Authenticator, l *ratelimit.Limiter, challenges []Challenger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			if errors.Is(err, auth.ErrUnauthenticated) {
				if ok, wait := l.Allow(auth.AddrKey(r)); !ok {
					tooManyRequests(w, wait)
					return
				}
				for _, c := range challenges {
					if ch, ok := c.Challenge(r); ok {
						w.Header().Set("WWW-Authenticate", ch)
						break
					}
				}
			}
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
