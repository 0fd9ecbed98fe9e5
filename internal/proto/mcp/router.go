package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A stdio connection carries one host, which may speak either protocol
// era, and straddling hosts speak both: a current coding-agent host sends
// server/discover (2026-07-28, sessionless: every request carries the
// protocol version in its _meta) and then initialize (the sessions era).
// One SDK session cannot serve both — after discover it counts as
// initialized and refuses initialize — so the router splits the
// connection between two sessions of the same server: requests that carry
// the 2026 era's protocol version in _meta go to a sessionless one,
// everything else to a session of the older revisions.
//
// The router also
//   - answers every error with a valid JSON-RPC code: the SDK sends a plain
//     Go error (its session-state checks) with code 0, which JSON-RPC does
//     not define; it becomes -32600 (a request the session's state does not
//     allow) or -32603;
//   - writes notifications the SDK has no method for
//     (notifications/claude/channel, task status), once the host has
//     initialized: Notify returns when the notification is written.

// metaProtocolVersion is the _meta key a 2026-07-28 request carries.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

type router struct {
	raw            sdk.Connection
	legacy, modern *virtConn

	mu sync.Mutex
	// out maps the wire id of a request a session sent the host to the
	// session and the id it used (the modern session's ids are renamed, so
	// that the two sessions' ids cannot meet).
	out map[string]outgoing
	// in maps the id of a host's request in progress to the session
	// serving it, so that its cancellation reaches the same session.
	in map[string]*virtConn
	// initialized is closed when the host sent notifications/initialized;
	// initParams are the initialize request's params.
	initialized chan struct{}
	initOnce    sync.Once
	initParams  json.RawMessage

	// onListen, when set, serves the 2026-era subscriptions/listen
	// requests that ask for task ids (the SDK's session does not know the
	// field); listens maps those in progress to their cancellation.
	onListen func(ctx context.Context, r *router, req *jsonrpc.Request, lr *listenRequest)
	listens  map[string]context.CancelFunc
	listenWG sync.WaitGroup
}

type outgoing struct {
	to *virtConn
	id jsonrpc.ID
}

func newRouter(raw sdk.Connection) *router {
	r := &router{raw: raw, out: map[string]outgoing{}, in: map[string]*virtConn{}, initialized: make(chan struct{}),
		listens: map[string]context.CancelFunc{}}
	r.legacy = &virtConn{r: r, name: "sessions", msgs: make(chan jsonrpc.Message, 16), done: make(chan struct{})}
	r.modern = &virtConn{r: r, name: "2026-07-28", msgs: make(chan jsonrpc.Message, 16), done: make(chan struct{})}
	return r
}

// run reads the host's messages and hands each to its session until the
// connection ends; then both sessions' connections end.
func (r *router) run(ctx context.Context) {
	defer r.legacy.end()
	defer r.modern.end()
	defer r.listenWG.Wait()
	for {
		msg, err := r.raw.Read(ctx)
		if err != nil {
			return
		}
		if req, ok := msg.(*jsonrpc.Request); ok && r.takeListen(ctx, req) {
			continue
		}
		to, msg := r.route(msg)
		if to == nil {
			continue
		}
		select {
		case to.msgs <- msg:
		case <-to.done:
		case <-ctx.Done():
			return
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "notifications/initialized" {
			r.initOnce.Do(func() { close(r.initialized) })
		}
	}
}

// takeListen serves req if it is a subscriptions/listen asking for task
// ids (see onListen), or the cancellation of one.
func (r *router) takeListen(ctx context.Context, req *jsonrpc.Request) bool {
	if r.onListen == nil {
		return false
	}
	if req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) != nil || p.RequestID == nil {
			return false
		}
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil {
			return false
		}
		r.mu.Lock()
		cancel, ok := r.listens[idKey(id)]
		r.mu.Unlock()
		if ok {
			cancel()
		}
		return ok
	}
	if !req.IsCall() || req.Method != "subscriptions/listen" || !modernMeta(req.Params) {
		return false
	}
	var lr listenRequest
	if json.Unmarshal(req.Params, &lr.Params) != nil || lr.Params.Notifications.TaskIDs == nil {
		return false
	}
	lctx, cancel := context.WithCancel(ctx)
	key := idKey(req.ID)
	r.mu.Lock()
	r.listens[key] = cancel
	r.mu.Unlock()
	r.listenWG.Add(1)
	go func() {
		defer r.listenWG.Done()
		defer cancel()
		r.onListen(lctx, r, req, &lr)
		r.mu.Lock()
		delete(r.listens, key)
		r.mu.Unlock()
	}()
	return true
}

func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

// route picks the session for a message from the host.
func (r *router) route(msg jsonrpc.Message) (*virtConn, jsonrpc.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch m := msg.(type) {
	case *jsonrpc.Response:
		o, ok := r.out[idKey(m.ID)]
		if !ok {
			return nil, nil // an answer to nothing we asked
		}
		delete(r.out, idKey(m.ID))
		cp := *m
		cp.ID = o.id
		return o.to, &cp
	case *jsonrpc.Request:
		to := r.legacy
		if modernMeta(m.Params) {
			to = r.modern
		}
		switch {
		case m.IsCall():
			r.in[idKey(m.ID)] = to
			if to == r.legacy && m.Method == "tools/call" {
				if p, ok := liftTaskParam(m.Params); ok {
					cp := *m
					cp.Params = p
					m = &cp
				}
			}
			if m.Method == "initialize" && to == r.legacy {
				r.initParams = append(json.RawMessage(nil), m.Params...)
			}
		case m.Method == "notifications/cancelled":
			var p struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil && p.RequestID != nil {
				if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
					if s, ok := r.in[idKey(id)]; ok {
						to = s
					}
				}
			}
		}
		return to, m
	}
	return nil, nil
}

// modernMeta reports whether params carry the 2026 era's protocol version
// in _meta.
func modernMeta(params json.RawMessage) bool {
	if len(params) == 0 {
		return false
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	_, ok := p.Meta[metaProtocolVersion]
	return ok
}

// write writes a message of session from to the host.
func (r *router) write(ctx context.Context, from *virtConn, msg jsonrpc.Message) error {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		r.mu.Lock()
		delete(r.in, idKey(m.ID))
		r.mu.Unlock()
		if m.Error != nil {
			cp := *m
			cp.Error = validCode(m.Error)
			msg = &cp
		}
	case *jsonrpc.Request:
		if m.IsCall() {
			cp := *m
			if from == r.modern {
				id, err := jsonrpc.MakeID("2026~" + fmt.Sprint(m.ID.Raw()))
				if err != nil {
					return err
				}
				cp.ID = id
			}
			r.mu.Lock()
			r.out[idKey(cp.ID)] = outgoing{to: from, id: m.ID}
			r.mu.Unlock()
			msg = &cp
		}
	}
	return r.raw.Write(ctx, msg)
}

// validCode gives err a JSON-RPC code: the SDK's session-state errors
// (plain Go errors, code 0 on the wire) become -32600, anything else
// without a code -32603.
func validCode(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != 0 {
		return err
	}
	text := err.Error()
	if we != nil {
		text = we.Message
	}
	code := int64(jsonrpc.CodeInternalError)
	if strings.Contains(text, "initializ") {
		code = jsonrpc.CodeInvalidRequest
	}
	return &jsonrpc.Error{Code: code, Message: text}
}

// Notify writes a notification the SDK has no method for to the host,
// once the host has initialized (it waits for that, or ctx); it returns
// when the notification is written.
func (r *router) Notify(ctx context.Context, method string, params any) error {
	select {
	case <-r.initialized:
	case <-r.legacy.done:
		return io.EOF
	case <-ctx.Done():
		return ctx.Err()
	}
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return r.raw.Write(ctx, &jsonrpc.Request{Method: method, Params: b})
}

// Initialized is closed when the host has initialized a session.
func (r *router) Initialized() <-chan struct{} { return r.initialized }

// InitializeParams returns the params of the host's initialize request
// (nil before it).
func (r *router) InitializeParams() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.initParams
}

// virtConn is one session's side of the router: an sdk.Connection.
type virtConn struct {
	r       *router
	name    string
	msgs    chan jsonrpc.Message
	done    chan struct{}
	endOnce sync.Once
}

func (c *virtConn) end() { c.endOnce.Do(func() { close(c.done) }) }

// Connect makes virtConn an sdk.Transport of itself.
func (c *virtConn) Connect(context.Context) (sdk.Connection, error) { return c, nil }

func (c *virtConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.msgs:
		return m, nil
	case <-c.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *virtConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case <-c.done:
		return sdk.ErrConnectionClosed
	default:
	}
	return c.r.write(ctx, c, msg)
}

func (c *virtConn) Close() error {
	c.end()
	return nil
}

func (c *virtConn) SessionID() string { return "" }

// liftTaskParam moves a 2025-era tools/call's params.task into
// params._meta (metaTaskParams), where the SDK, which drops fields it does
// not know when it decodes the params, keeps it for the tasks middleware.
func liftTaskParam(params json.RawMessage) (json.RawMessage, bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p["task"] == nil {
		return params, false
	}
	var task map[string]any
	if json.Unmarshal(p["task"], &task) != nil {
		return params, false
	}
	meta := map[string]any{}
	if raw, ok := p["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return params, false
	}
	meta[metaTaskParams] = task
	b, err := json.Marshal(meta)
	if err != nil {
		return params, false
	}
	p["_meta"] = b
	delete(p, "task")
	out, err := json.Marshal(p)
	if err != nil {
		return params, false
	}
	return out, true
}
