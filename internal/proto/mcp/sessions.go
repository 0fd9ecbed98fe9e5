package mcp

import (
	"net/http"
	"slices"
	"strconv"
	"sync"

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
	total, perCaller int

	mu       sync.Mutex
	byCaller map[string][]string // session ids in the order they were opened
	held     int                 // ids in byCaller plus sessions being opened
}

func newSessionBound(srv *sdk.Server, total, perCaller int) *sessionBound {
	return &sessionBound{srv: srv, total: total, perCaller: perCaller, byCaller: map[string][]string{}}
}

// wrap applies the bound around next, the stateful Streamable HTTP
// handler: a POST without a session id opens a session.
func (b *sessionBound) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		if !b.reserve() {
			w.Header().Set("Retry-After", "60")
			httperr.Write(w, http.StatusServiceUnavailable, httperr.CodeUnavailable,
				"the hub holds as many MCP sessions as it may ("+strconv.Itoa(b.total)+"); retry later, or use protocol revision "+StatelessVersion+", which needs none")
			return
		}
		sw := &sessionWriter{ResponseWriter: w, b: b, caller: callerKey(auth.From(r.Context()))}
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
	caller   string
	recorded bool
}

func (w *sessionWriter) record() {
	if !w.recorded {
		w.recorded = true
		w.b.opened(w.caller, w.Header().Get("Mcp-Session-Id"))
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
	switch {
	case p.Admin:
		return "admin"
	case p.AgentID != "":
		return "agent:" + p.AgentID
	}
	return "anonymous" // dev mode
}

// reserve takes a place for a session about to be opened.
func (b *sessionBound) reserve() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total > 0 && b.held >= b.total {
		b.prune(b.live()) // places of sessions that ended since
	}
	if b.total > 0 && b.held >= b.total {
		return false
	}
	b.held++
	return true
}

// opened records the session id the handler gave caller (none: the
// request opened no session, and its place is given back), ending the
// caller's oldest sessions over its bound.
func (b *sessionBound) opened(caller, id string) {
	b.mu.Lock()
	if id == "" {
		b.held--
		b.mu.Unlock()
		return
	}
	b.byCaller[caller] = append(b.byCaller[caller], id)
	var end []*sdk.ServerSession
	if b.perCaller > 0 && len(b.byCaller[caller]) > b.perCaller {
		live := b.live()
		b.prune(live)
		ids := b.byCaller[caller]
		if over := len(ids) - b.perCaller; over > 0 {
			for _, old := range ids[:over] {
				end = append(end, live[old])
			}
			b.byCaller[caller] = slices.Delete(ids, 0, over)
			b.held -= over
		}
	}
	b.mu.Unlock()
	for _, ss := range end {
		// Close lets the session's calls in progress finish first (a
		// wait_for_reply may take minutes): not on this request's time.
		// Then the handler forgets the session and its event stream ends.
		go ss.Close()
	}
}

// live maps the ids of the sessions that are open to their sessions.
func (b *sessionBound) live() map[string]*sdk.ServerSession {
	m := map[string]*sdk.ServerSession{}
	for ss := range b.srv.Sessions() {
		if id := ss.ID(); id != "" {
			m[id] = ss
		}
	}
	return m
}

// prune forgets the ids of sessions that ended (deleted by their client,
// timed out, or failed to initialize).
func (b *sessionBound) prune(live map[string]*sdk.ServerSession) {
	for c, ids := range b.byCaller {
		kept := slices.DeleteFunc(ids, func(id string) bool { return live[id] == nil })
		b.held -= len(ids) - len(kept)
		if len(kept) == 0 {
			delete(b.byCaller, c)
		} else {
			b.byCaller[c] = kept
		}
	}
}
