package mcp

import (
	"context"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionCalls are the calls in progress of each Streamable HTTP session
// (protocol revisions before 2026-07-28), so that the session's DELETE
// can end them. The SDK closes a deleted session only once its calls in
// progress have returned, and answers the DELETE after that: without
// this, a client closing while a wait_for_reply or a waiting check_inbox
// of its session was still running (its cancellation, which the Go SDK
// sends after the call returned to its caller, may come after the
// DELETE) waited for that call's whole timeout, or gave up on the DELETE
// (the Go SDK's client after 5 s). The client that deletes its session
// reads no more answers from it, so the calls are cancelled, as its own
// notifications/cancelled would. Tasks are not calls: they run on, and
// the next session finds them.
type sessionCalls struct {
	mu    sync.Mutex
	calls map[string]map[*sessionCall]struct{} // by session id
}

// sessionCall is one call in progress: who made it (the SDK's user id of
// the credential and agent, to which the session is bound) and how to
// cancel it.
type sessionCall struct {
	user   string
	cancel context.CancelFunc
}

// middleware tracks the calls of sessions that have an id.
func (sc *sessionCalls) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		ss, _ := req.GetSession().(*sdk.ServerSession)
		if ss == nil || ss.ID() == "" {
			return next(ctx, method, req) // stdio, in memory
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c := &sessionCall{user: userOf(req.GetExtra()), cancel: cancel}
		id := ss.ID()
		sc.mu.Lock()
		if sc.calls == nil {
			sc.calls = map[string]map[*sessionCall]struct{}{}
		}
		if sc.calls[id] == nil {
			sc.calls[id] = map[*sessionCall]struct{}{}
		}
		sc.calls[id][c] = struct{}{}
		sc.mu.Unlock()
		defer func() {
			sc.mu.Lock()
			delete(sc.calls[id], c)
			if len(sc.calls[id]) == 0 {
				delete(sc.calls, id)
			}
			sc.mu.Unlock()
		}()
		return next(ctx, method, req)
	}
}

// end cancels the calls in progress of session id that user made (the
// session is bound to one user: another's DELETE, which the SDK refuses,
// ends nothing), and returns how many.
func (sc *sessionCalls) end(id, user string) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	n := 0
	for c := range sc.calls[id] {
		if c.user == user {
			c.cancel()
			n++
		}
	}
	return n
}

// userOf is the SDK's user id of a request (sessions are bound to it).
func userOf(extra *sdk.RequestExtra) string {
	if extra == nil || extra.TokenInfo == nil {
		return ""
	}
	return extra.TokenInfo.UserID
}

// requestUser is the SDK's user id of an HTTP request that went through
// the bearer middleware (authenticate).
func requestUser(ctx context.Context) string {
	if ti := sdkauth.TokenInfoFromContext(ctx); ti != nil {
		return ti.UserID
	}
	return ""
}
