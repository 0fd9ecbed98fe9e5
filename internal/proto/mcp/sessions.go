package mcp

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Session bounds' defaults (Options.MaxSessions, MaxSessionsPerCaller).
const (
	DefaultMaxSessions          = 10000
	DefaultMaxSessionsPerCaller = 64
)

// sessionBound bounds the Streamable HTTP sessions (protocol revisions
// before 2026-07-28) the hub keeps. A session lives until its client
// deletes it or it idles for SessionTimeout, and each one holds a
// goroutine and some 15 KiB; without a bound, a caller opening sessions as
// fast as its rate limit allows would hold millions within the timeout.
//
// A caller (an agent's credential, the operator, or dev mode's anonymous
// host) opening one more session than MaxSessionsPerCaller ends its own
// oldest (once that session's calls in progress have returned), as an
// agent's event streams do: a host that restarted without
// deleting its sessions gets in at once. When all callers together hold
// MaxSessions, a new session is refused with 503 instead, since ending
// another caller's session would let one caller evict the rest.
type sessionBound struct {
	srv              *sdk.Server
	calls            *sessionCalls // ended by their session's DELETE
	total, perCaller int
	next             http.Handler // the stateful handler, set by wrap

	mu       sync.Mutex
	byCaller map[string][]string // session ids in the order they were opened
	held     int                 // ids in byCaller plus sessions being opened
	pruned   time.Time           // last look for sessions that ended
}

func newSessionBound(srv *sdk.Server, calls *sessionCalls, total, perCaller int) *sessionBound {
	return &sessionBound{srv: srv, calls: calls, total: total, perCaller: perCaller, byCaller: map[string][]string{}}
}

// wrap applies the bound around next, the stateful Streamable HTTP
// handler: a POST without a session id opens a session, a DELETE ends one
// (and its calls in progress, so that it is answered at once).
func (b *sessionBound) wrap(next http.Handler) http.Handler {
	b.next = next
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		switch {
		case r.Method == http.MethodDelete && id != "":
			if b.calls != nil {
				b.calls.end(id, requestUser(r.Context()))
			}
			next.ServeHTTP(w, r)
			b.forget(callerKey(auth.From(r.Context())), id)
			return
		case r.Method != http.MethodPost || id != "":
			next.ServeHTTP(w, r)
			return
		}
		if !b.reserve() {
			w.Header().Set("Retry-After", "60")
			httperr.Write(w, http.StatusServiceUnavailable, httperr.CodeUnavailable,
				"the hub holds as many MCP sessions as it may ("+strconv.Itoa(b.total)+"); retry later, or use protocol revision "+StatelessVersion+", which needs none")
			return
		}
		sw := &sessionWriter{ResponseWriter: w, b: b, r: r}
		next.ServeHTTP(sw, r)
		sw.record()
	})
}

// sessionWriter records the session a request opened as its answer
// starts, before the client can read it: a client that opens sessions one
// after another has them counted in that order.
type sessionWriter struct {
	http.ResponseWriter
	b        *sessionBound
	r        *http.Request
	recorded bool
}

func (w *sessionWriter) record() {
	if !w.recorded {
		w.recorded = true
		w.b.opened(w.r, w.Header().Get("Mcp-Session-Id"))
	}
}

func (w *sessionWriter) WriteHeader(code int) {
	w.record()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionWriter) Write(p []byte) (int, error) {
	w.record()
	return w.ResponseWriter.Write(p)
}

// Flush passes on to the underlying writer (the SDK streams answers).
func (w *sessionWriter) Flush() {
	w.record()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// callerKey names whose session a request opens.
func callerKey(p auth.Principal) string {
	return cmp.Or(p.Key(), "anonymous") // dev mode
}

// reserve takes a place for a session about to be opened. At the bound it
// first forgets sessions that ended without a DELETE (timed out), looking
// at most once a second: the look walks every session.
func (b *sessionBound) reserve() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total > 0 && b.held >= b.total && time.Since(b.pruned) >= time.Second {
		b.prune(b.live())
		b.pruned = time.Now()
	}
	if b.total > 0 && b.held >= b.total {
		return false
	}
	b.held++
	return true
}

// opened records the session id the handler gave r's caller (none: the
// request opened no session, and its place is given back), and ends the
// caller's oldest sessions over its bound.
func (b *sessionBound) opened(r *http.Request, id string) {
	caller := callerKey(auth.From(r.Context()))
	b.mu.Lock()
	if id == "" {
		b.held--
		b.mu.Unlock()
		return
	}
	ids := append(b.byCaller[caller], id)
	var end []string
	if over := len(ids) - b.perCaller; b.perCaller > 0 && over > 0 {
		end = slices.Clone(ids[:over])
		ids = slices.Delete(ids, 0, over)
		b.held -= over
	}
	b.byCaller[caller] = ids
	b.mu.Unlock()
	for _, old := range end {
		// As the caller's own DELETE would: the SDK finds the session by
		// its id and checks it is the caller's. Close lets the session's
		// calls in progress finish first (a wait_for_reply may take
		// minutes), so not on this request's time; then the handler
		// forgets the session and its event stream ends.
		del := r.Clone(context.WithoutCancel(r.Context()))
		del.Method, del.Body, del.ContentLength = http.MethodDelete, http.NoBody, 0
		del.Header.Set("Mcp-Session-Id", old)
		go b.next.ServeHTTP(discardWriter{}, del)
	}
}

// forget gives back the place of a session its caller deleted.
func (b *sessionBound) forget(caller, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := b.byCaller[caller]
	if i := slices.Index(ids, id); i >= 0 {
		b.byCaller[caller] = slices.Delete(ids, i, i+1)
		b.held--
		if len(b.byCaller[caller]) == 0 {
			delete(b.byCaller, caller)
		}
	}
}

// live is the set of the ids of the sessions that are open.
func (b *sessionBound) live() map[string]bool {
	m := map[string]bool{}
	for ss := range b.srv.Sessions() {
		if id := ss.ID(); id != "" {
			m[id] = true
		}
	}
	return m
}

// prune forgets the ids of sessions that ended without a DELETE (timed
// out, or failed to initialize).
func (b *sessionBound) prune(live map[string]bool) {
	for c, ids := range b.byCaller {
		kept := slices.DeleteFunc(ids, func(id string) bool { return !live[id] })
		b.held -= len(ids) - len(kept)
		if len(kept) == 0 {
			delete(b.byCaller, c)
		} else {
			b.byCaller[c] = kept
		}
	}
}

// discardWriter takes the answer to a request the hub makes of itself.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}
