package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Task status notifications over Streamable HTTP (and the 2026 listen on
// stdio), for the tasks a caller
// owns (tasks belong to the credential and agent that made them, not to
// one session, so a session opened after a restart of the hub hears of
// the tasks made before it):
//
//   - 2025-11-25: notifications/tasks/status (the Task) on the session's
//     standalone SSE stream (the GET with Mcp-Session-Id), for every status
//     change of the caller's 2025-era tasks. The SDK cannot send a
//     notification it does not know, so the handler writes these events
//     itself, between the SDK's (sseInjector: the SDK writes each event in
//     one Write).
//   - 2026-07-28: subscriptions/listen with notifications.taskIds (a field
//     the SDK does not know, so the handler serves such a listen itself):
//     notifications/subscriptions/acknowledged names the task ids agreed to
//     (the caller's own; others are left out as if they did not exist),
//     then notifications/tasks (the DetailedTask, as tasks/get gives it)
//     carries the current state of each and every later change, until the
//     host ends the stream. Such a listen agrees to task ids only. On
//     stdio (an embedded hub) the router hands such a listen to the same
//     code, and its cancellation ends it.

// metaSubscriptionID is the _meta key naming a listen stream.
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// taskNote is one notification for a listener, of task id at version
// (none for the acknowledgement).
type taskNote struct {
	method  string
	params  map[string]any
	id      string
	version int64
}

// sentVersions is the version of each task a stream last sent, so that a
// stream sends each state once and never an older one after a newer (a
// change seen both here and as another instance's announcement, or both
// in a listen's first read and as a change).
type sentVersions map[string]int64

// fresh reports whether n is newer than what was sent of its task, and
// notes it as sent if so.
func (s sentVersions) fresh(n taskNote) bool {
	if n.version <= s[n.id] {
		return false
	}
	s[n.id] = n.version
	return true
}

// taskListener is an open stream that wants the status changes of its
// owner's tasks: of era2025, all of them; of era2026, those in ids.
type taskListener struct {
	owner string
	era   string
	ids   map[string]bool
	ch    chan taskNote
}

// listeners are the open streams of a task manager.
type listeners struct {
	mu  sync.Mutex
	set map[*taskListener]struct{}
}

func (ls *listeners) add(l *taskListener) (remove func()) {
	ls.mu.Lock()
	if ls.set == nil {
		ls.set = map[*taskListener]struct{}{}
	}
	ls.set[l] = struct{}{}
	ls.mu.Unlock()
	return func() {
		ls.mu.Lock()
		delete(ls.set, l)
		ls.mu.Unlock()
	}
}

// notify hands rec's status to the listeners that want it. It never
// blocks: a listener whose buffer is full misses the notification (the
// host can still poll tasks/get), and it is logged by the caller.
func (ls *listeners) notify(rec *taskRecord) (dropped int) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for l := range ls.set {
		if l.owner != rec.Owner || l.era != rec.Era || (l.ids != nil && !l.ids[rec.ID]) {
			continue
		}
		n := statusNote(rec)
		select {
		case l.ch <- n:
		default:
			dropped++
		}
	}
	return dropped
}

// hasOwner reports whether a stream listens to owner's tasks.
func (ls *listeners) hasOwner(owner string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for l := range ls.set {
		if l.owner == owner {
			return true
		}
	}
	return false
}

// statusNote is the status notification of rec, of its era.
func statusNote(rec *taskRecord) taskNote {
	if rec.Era == era2026 {
		return taskNote{method: "notifications/tasks", params: rec.wire(true), id: rec.ID, version: rec.version}
	}
	return taskNote{method: "notifications/tasks/status", params: rec.wire(false), id: rec.ID, version: rec.version}
}

// requestCaller is the caller an HTTP request acts for (as callerOf finds
// it for the SDK's requests).
func (s *Server) requestCaller(r *http.Request) caller {
	p := core.PrincipalFrom(r.Context())
	return caller{p: p, agentID: s.agentFor(p, strings.TrimSpace(r.Header.Get(AgentHeader)))}
}

// sseInjector is the ResponseWriter of a session's standalone SSE stream,
// on which notifications the SDK does not know are written between the
// SDK's events, once the SDK has started the stream.
type sseInjector struct {
	http.ResponseWriter
	mu      sync.Mutex
	headers bool // the status line is written
	started bool // it is 200 with an event stream
}

// header notes the status the SDK writes (200 when it writes or flushes
// without WriteHeader). w.mu is held.
func (w *sseInjector) header(code int) {
	if !w.headers {
		w.headers = true
		w.started = code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
	}
}

func (w *sseInjector) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.header(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *sseInjector) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.header(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

func (w *sseInjector) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.header(http.StatusOK)
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *sseInjector) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// inject writes n as an SSE event, if the SDK has started an event stream.
func (w *sseInjector) inject(n taskNote) error {
	b, err := noteEvent(n)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		return fmt.Errorf("no event stream yet")
	}
	if _, err := w.ResponseWriter.Write(b); err != nil {
		return err
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// noteEvent is n as an SSE event of a JSON-RPC notification.
func noteEvent(n taskNote) ([]byte, error) {
	data, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": n.method, "params": n.params})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("event: message\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes(), nil
}

// serveStandalone serves a 2025-era session's standalone SSE stream with
// next, adding the status notifications of the caller's tasks.
func (m *taskManager) serveStandalone(w http.ResponseWriter, r *http.Request, next http.Handler) {
	inj := &sseInjector{ResponseWriter: w}
	l := &taskListener{owner: ownerOf(m.s.requestCaller(r)), era: era2025, ch: make(chan taskNote, 32)}
	remove := m.listeners.add(l)
	defer remove()
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent := sentVersions{}
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-l.ch:
				if !sent.fresh(n) {
					continue
				}
				if err := inj.inject(n); err != nil {
					m.s.opt.Logger.Debug("mcp: task status notification", "err", err)
				}
			}
		}
	}()
	next.ServeHTTP(inj, r)
	cancel()
	wg.Wait()
}

// listenRequest is the part of a subscriptions/listen request that the
// task notifications need.
type listenRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta          map[string]any `json:"_meta"`
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	} `json:"params"`
}

// taskListen reads a 2026-era POST's body and reports whether it is a
// subscriptions/listen asking for task ids; r's body can be read again
// either way. A body past maxBody is left for the SDK to refuse.
func taskListen(r *http.Request, maxBody int64) (*http.Request, *listenRequest) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || int64(len(body)) > maxBody {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		return r, nil
	}
	r.Body.Close()
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	var lr listenRequest
	if json.Unmarshal(body, &lr) != nil || lr.Method != "subscriptions/listen" || lr.Params.Notifications.TaskIDs == nil || len(lr.ID) == 0 {
		return r, nil
	}
	return r, &lr
}

// missingTasksCapability is the -32021 error of a host that did not
// declare the tasks extension.
func missingTasksCapability() *jsonrpc.Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
	return &jsonrpc.Error{Code: CodeMissingCapability, Message: "Missing required client capability: " + TasksExtension, Data: data}
}

// listen serves a 2026-era subscriptions/listen asking for the task ids
// of c (see the comment at the top of this file), writing its
// notifications with send, until ctx ends (the host ended the listen:
// false) or the server stops (true: the listen ends with its result).
// Over one listen it agrees to at most 100 tasks.
func (m *taskManager) listen(ctx context.Context, c caller, subID any, ids []string, send func(taskNote) error) bool {
	owner := ownerOf(c)
	// Listening starts before the tasks are read, so that a change made
	// between the two is not missed (sentVersions drops the repeats); the
	// listener takes the owner's tasks among those asked for, the stream
	// those agreed to.
	l := &taskListener{owner: owner, era: era2026, ids: map[string]bool{}, ch: make(chan taskNote, 32)}
	for _, tid := range ids {
		l.ids[tid] = true
	}
	remove := m.listeners.add(l)
	defer remove()
	agreed, isAgreed := []string{}, map[string]bool{}
	var current []*taskRecord
	for _, tid := range ids {
		if isAgreed[tid] || len(agreed) >= 100 {
			continue
		}
		rec, err := m.load(ctx, tid, owner)
		if err != nil || rec.Era != era2026 {
			continue // not the caller's (or gone): not agreed, as if it did not exist
		}
		isAgreed[tid] = true
		agreed = append(agreed, tid)
		current = append(current, rec)
	}
	if send(taskNote{method: "notifications/subscriptions/acknowledged", params: map[string]any{
		"notifications": map[string]any{"taskIds": agreed}, "_meta": map[string]any{metaSubscriptionID: subID}}}) != nil {
		return false
	}
	if len(agreed) == 0 {
		return true // nothing to listen to: the listen ends at once
	}
	// The state now of each task, then every change: a task that ended
	// between the host's last poll and this listen is not missed.
	sent := sentVersions{}
	for _, rec := range current {
		n := statusNote(rec)
		sent.fresh(n)
		if send(n) != nil {
			return false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-m.ctx.Done():
			return true
		case n := <-l.ch:
			if !isAgreed[n.id] || !sent.fresh(n) {
				continue
			}
			if send(n) != nil {
				return false
			}
		}
	}
}

// listenResult is the result ending a listen the server ended.
func listenResult(id jsonrpc.ID) *jsonrpc.Response {
	res, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]any{metaSubscriptionID: id.Raw()}})
	return &jsonrpc.Response{ID: id, Result: res}
}

// serveListen serves a 2026-era subscriptions/listen asking for task ids
// over HTTP, as an event stream.
func (m *taskManager) serveListen(w http.ResponseWriter, r *http.Request, lr *listenRequest) {
	var raw any
	_ = json.Unmarshal(lr.ID, &raw)
	id, err := jsonrpc.MakeID(raw)
	if err != nil || !id.IsValid() {
		http.Error(w, "bad request id", http.StatusBadRequest)
		return
	}
	if !declaresTasks(lr.Params.Meta) {
		writeJSONRPC(w, &jsonrpc.Response{ID: id, Error: missingTasksCapability()})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		return http.NewResponseController(w).Flush()
	}
	send := func(n taskNote) error {
		b, err := noteEvent(n)
		if err != nil {
			return err
		}
		return write(b)
	}
	if !m.listen(r.Context(), m.s.requestCaller(r), id.Raw(), lr.Params.Notifications.TaskIDs, send) {
		return
	}
	b, _ := jsonrpc.EncodeMessage(listenResult(id))
	_ = write(append(append([]byte("event: message\ndata: "), b...), '\n', '\n'))
}

// serveListenStdio serves a 2026-era subscriptions/listen asking for task
// ids on a stdio connection, for the server's own caller, until ctx ends
// (the host cancelled it, or left).
func (m *taskManager) serveListenStdio(ctx context.Context, r *router, req *jsonrpc.Request, lr *listenRequest) {
	if !declaresTasks(lr.Params.Meta) {
		_ = r.raw.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: missingTasksCapability()})
		return
	}
	send := func(n taskNote) error {
		b, err := json.Marshal(n.params)
		if err != nil {
			return err
		}
		return r.raw.Write(ctx, &jsonrpc.Request{Method: n.method, Params: b})
	}
	if m.listen(ctx, m.s.callerOf(nil), req.ID.Raw(), lr.Params.Notifications.TaskIDs, send) {
		_ = r.raw.Write(ctx, listenResult(req.ID))
	}
}

// writeJSONRPC answers a POST with one JSON-RPC message.
func writeJSONRPC(w http.ResponseWriter, msg jsonrpc.Message) {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// compile-time check: the injector is still a flusher for the SDK.
var _ http.Flusher = (*sseInjector)(nil)
