package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// MCP tasks: send_message and wait_for_reply can run as tasks that the
// host gets, lists, cancels and takes the result of later, across a
// restart of the hub. Both protocol eras are served:
//
//   - 2025-11-25 (tasks in the core spec, experimental): the host asks for
//     a task with params.task ({"ttl": ms}) on tools/call, which the server
//     declares in capabilities.tasks and in each tool's
//     execution.taskSupport; the answer is {"task": Task}; tasks/get,
//     tasks/result (waits for the end, then the tool's result),
//     tasks/list and tasks/cancel; notifications/tasks/status on each
//     change (stdio, and the standalone SSE stream over HTTP).
//   - 2026-07-28 (the io.modelcontextprotocol/tasks extension): the host
//     declares the extension in the request's _meta client capabilities,
//     the server decides: these two tools then answer a CreateTaskResult
//     (resultType "task", the Task flat); tasks/get (the result inlined
//     once completed), tasks/update, tasks/cancel; a tasks method from a
//     host that did not declare the extension is refused -32021;
//     notifications/tasks on a subscriptions/listen naming the task ids
//     (over HTTP: taskstream.go).
//
// A task is a record in the relay's record store (kind mcp_task, indexed
// by its owner): who asked (the principal and the agent it acts as), the
// tool and its arguments, the status and the result. The work itself is
// the relay's: send_message as a task sends (with a message id fixed when
// the task is made, so that doing it again is a retry) and ends when the
// message's receipt is final; wait_for_reply waits for the answer (until
// timeout_ms, by default until the task's TTL). A hub that starts finds
// the tasks still working and does them again. Only the owner sees a
// task: anyone else is answered as for a task that does not exist.
//
// The SDK knows none of this: the tasks methods are registered as custom
// methods and served by a receiving middleware (which, unlike a custom
// method's handler, sees the request's credential), and since the SDK
// drops params.task when it decodes tools/call, the transports move it
// into _meta first (liftTaskParam).

// Task wire names.
const (
	// TasksExtension is the 2026-07-28 tasks extension's identifier.
	TasksExtension = "io.modelcontextprotocol/tasks"
	// CodeMissingCapability is the extension's Missing Required Client
	// Capability error.
	CodeMissingCapability = -32021

	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaRelatedTask        = "io.modelcontextprotocol/related-task"
	// metaTaskParams is where the transports put a 2025-era tools/call's
	// params.task.
	metaTaskParams = "switchboard.dev/task"
	taskRecordKind = "mcp_task"

	era2025 = "2025-11-25"
	era2026 = StatelessVersion
)

// Task statuses.
const (
	TaskWorking   = "working"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
)

// Task bounds.
const (
	defaultTaskTTL = time.Hour
	maxTaskTTL     = 24 * time.Hour
	taskPoll       = time.Second
)

// taskTools are the tools that may run as tasks.
var taskTools = map[string]bool{"send_message": true, "wait_for_reply": true}

// taskRecord is a task as the record store keeps it.
type taskRecord struct {
	ID            string          `json:"id"`
	Era           string          `json:"era"`
	Tool          string          `json:"tool"`
	Args          json.RawMessage `json:"args"`
	Owner         string          `json:"owner"`
	Principal     core.Principal  `json:"principal"`
	AgentID       string          `json:"agent_id"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"status_message,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         *jsonrpc.Error  `json:"error,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	TTLMs         int64           `json:"ttl_ms"`

	version int64
}

func (r *taskRecord) terminal() bool { return r.Status != TaskWorking }

func (r *taskRecord) expired(now time.Time) bool {
	return now.After(r.CreatedAt.Add(time.Duration(r.TTLMs) * time.Millisecond))
}

// wire is the Task of the record's era, with the status's payload
// (2026: the result or error inlined).
func (r *taskRecord) wire(inline bool) map[string]any {
	t := map[string]any{"taskId": r.ID, "status": r.Status, "createdAt": r.CreatedAt.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt": r.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	if r.StatusMessage != "" {
		t["statusMessage"] = r.StatusMessage
	}
	if r.Era == era2026 {
		t["ttlMs"], t["pollIntervalMs"] = r.TTLMs, taskPoll.Milliseconds()
		if inline {
			switch {
			case r.Status == TaskCompleted:
				t["result"] = r.Result
			case r.Status == TaskFailed && r.Error != nil:
				t["error"] = r.Error
			}
		}
	} else {
		t["ttl"], t["pollInterval"] = r.TTLMs, taskPoll.Milliseconds()
	}
	return t
}

// taskManager makes, runs, finds and ends the tasks of a server.
type taskManager struct {
	s     *Server
	store core.RecordStore

	ctx    context.Context // ends when the server stops
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	cancel map[string]context.CancelFunc // tasks running here
	ended  map[string]chan struct{}      // closed when the task ends (tasks/result waits)
	notify notifier                      // 2025-era status notifications (stdio), or nil
	// notifyOwner is the owner whose tasks notify tells of: the stdio
	// session's caller.
	notifyOwner string
	// remote holds the tasks other instances announced a write of,
	// for the follower to read (taskremote.go).
	remote remoteTasks
	// listeners are the HTTP streams hearing of status changes
	// (taskstream.go).
	listeners listeners
}

func newTaskManager(s *Server, store core.RecordStore) *taskManager {
	ctx, stop := context.WithCancel(context.Background())
	return &taskManager{s: s, store: store, ctx: ctx, stop: stop,
		cancel: map[string]context.CancelFunc{}, ended: map[string]chan struct{}{},
		remote: remoteTasks{kick: make(chan struct{}, 1)}}
}

// install registers the tasks methods and the middleware serving them.
func (m *taskManager) install(srv *sdk.Server) {
	for _, method := range tasksMethods {
		// Served by the middleware; the handler runs only if it is skipped.
		_ = sdk.AddReceivingCustomMethod(srv, method, func(context.Context, *sdk.ServerSession, *taskParams) (*rawResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tasks are served by the middleware"}
		})
	}
	srv.AddReceivingMiddleware(m.middleware)
}

// taskParams are the params of the tasks methods.
type taskParams struct {
	sdk.ParamsBase
	TaskID string `json:"taskId"`
	Cursor string `json:"cursor,omitempty"`
}

// rawResult is a result of the tasks surface: its fields, and _meta.
type rawResult struct {
	sdk.ResultBase
	fields map[string]any
}

func (r *rawResult) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(r.fields)+1)
	for k, v := range r.fields {
		out[k] = v
	}
	if len(r.Meta) > 0 {
		out["_meta"] = r.Meta
	}
	return json.Marshal(out)
}

// augmented is a result of the SDK with fields added to its JSON.
type augmented struct {
	sdk.Result
	add func(map[string]any)
}

func (a *augmented) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(a.Result)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	a.add(m)
	return json.Marshal(m)
}

// middleware serves the tasks surface (see the package comment above).
func (m *taskManager) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			return &augmented{Result: res, add: addTasksCapability}, nil
		case "tools/list":
			res, err := next(ctx, method, req)
			if err != nil || modernRequest(req) {
				// Under the extension the server decides per call: tools
				// declare nothing (and the SDK's result keeps its
				// resultType and cache fields).
				return res, err
			}
			return &augmented{Result: res, add: addTaskSupport}, nil
		case "tools/call":
			call, ok := req.(*sdk.CallToolRequest)
			if !ok || call.Params == nil || !taskTools[call.Params.Name] {
				return next(ctx, method, req)
			}
			era, ttl, asked := taskAsked(call.Params.Meta)
			if !asked {
				return next(ctx, method, req)
			}
			rec, err := m.create(ctx, m.s.callerOf(req.GetExtra()), era, call.Params.Name, call.Params.Arguments, ttl)
			if err != nil {
				return nil, m.s.rpcError(err)
			}
			if era == era2026 {
				f := rec.wire(false)
				f["resultType"] = "task"
				return &rawResult{fields: f}, nil
			}
			return &rawResult{fields: map[string]any{"task": rec.wire(false)}}, nil
		case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
			p, _ := req.GetParams().(*taskParams)
			if p == nil {
				p = &taskParams{}
			}
			modern := p.Meta[metaProtocolVersion] != nil
			if modern && !declaresTasks(p.Meta) {
				data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
				return nil, &jsonrpc.Error{Code: CodeMissingCapability, Message: "Missing required client capability: " + TasksExtension, Data: data}
			}
			res, err := m.serve(ctx, method, m.s.callerOf(req.GetExtra()), p, modern)
			if err != nil {
				return nil, m.s.rpcError(err)
			}
			return res, nil
		}
		return next(ctx, method, req)
	}
}

// addTasksCapability declares the 2025-era tasks in an initialize result.
func addTasksCapability(v map[string]any) {
	caps, _ := v["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
		v["capabilities"] = caps
	}
	caps["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
		"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
}

// addTaskSupport marks the tools that may run as tasks in a 2025-era
// tools/list result.
func addTaskSupport(v map[string]any) {
	tools, _ := v["tools"].([]any)
	for _, t := range tools {
		if tm, ok := t.(map[string]any); ok && taskTools[fmt.Sprint(tm["name"])] {
			tm["execution"] = map[string]any{"taskSupport": "optional"}
		}
	}
}

// tasksMethods are the methods of the tasks surface, of both eras.
var tasksMethods = []string{"tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update"}

// modernRequest reports whether req is of the 2026-07-28 era (its _meta
// carries the protocol version).
func modernRequest(req sdk.Request) bool {
	p := req.GetParams()
	return p != nil && p.GetMeta()[metaProtocolVersion] != nil
}

// taskAsked tells whether a tools/call asks for a task: a 2026 request
// declaring the extension, or a 2025 one with params.task (moved to
// _meta by the transport), and the TTL asked for.
func taskAsked(meta sdk.Meta) (era string, ttl time.Duration, ok bool) {
	if declaresTasks(meta) {
		return era2026, 0, true
	}
	t, ok := meta[metaTaskParams].(map[string]any)
	if !ok {
		return "", 0, false
	}
	if v, ok := t["ttl"].(float64); ok && v > 0 {
		ttl = time.Duration(v) * time.Millisecond
	}
	return era2025, ttl, true
}

// declaresTasks reports whether a request's _meta declares the tasks
// extension among the client's capabilities.
func declaresTasks(meta map[string]any) bool {
	caps, _ := meta[metaClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// ownerOf is the key of the tasks a caller owns.
func ownerOf(c caller) string {
	k := c.p.Key()
	if c.p.Dev {
		k = "dev"
	}
	return k + "/" + c.agentID
}

// create makes a task for c running tool with args, stores it, and
// starts it.
func (m *taskManager) create(ctx context.Context, c caller, era, tool string, args json.RawMessage, ttl time.Duration) (*taskRecord, error) {
	if c.agentID == "" {
		return nil, fmt.Errorf("a task needs a caller: %w", core.ErrUnauthenticated)
	}
	switch {
	case ttl <= 0:
		ttl = defaultTaskTTL
	case ttl > maxTaskTTL:
		ttl = maxTaskTTL
	case ttl < time.Second:
		ttl = time.Second
	}
	if tool == "send_message" {
		// Fix the message id now, so that doing the task again (after a
		// restart) is a retry of the same message.
		var a map[string]any
		if len(args) > 0 && json.Unmarshal(args, &a) != nil {
			return nil, invalid("arguments must be an object")
		}
		if a == nil {
			a = map[string]any{}
		}
		if id, _ := a["message_id"].(string); id == "" {
			a["message_id"] = core.NewID()
		}
		args, _ = json.Marshal(a)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	now := m.s.relay.Clock().Now()
	rec := &taskRecord{ID: hex.EncodeToString(id), Era: era, Tool: tool, Args: args, Owner: ownerOf(c), Principal: c.p,
		AgentID: c.agentID, Status: TaskWorking, StatusMessage: "The tool call is running.", CreatedAt: now, UpdatedAt: now,
		TTLMs: ttl.Milliseconds()}
	if err := m.put(ctx, rec); err != nil {
		return nil, err
	}
	m.start(rec, false)
	return rec, nil
}

// put stores rec, creating it (version 0) or replacing the version read.
func (m *taskManager) put(ctx context.Context, rec *taskRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	stored, err := m.store.PutRecord(ctx, core.Record{Kind: taskRecordKind, ID: rec.ID, Index: rec.Owner, Data: data,
		Version: rec.version, UpdatedAt: rec.UpdatedAt})
	if err != nil {
		return err
	}
	rec.version = stored.Version
	return nil
}

// load reads task id; the owner's only: any other caller, an unknown and
// an expired task are all not found.
func (m *taskManager) load(ctx context.Context, id, owner string) (*taskRecord, error) {
	notFound := notFound("Failed to retrieve task: Task not found")
	if id == "" {
		return nil, invalid("taskId is required")
	}
	r, err := m.store.GetRecord(ctx, taskRecordKind, id)
	if errIs(err, core.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	rec, err := decodeTask(r)
	if err != nil {
		return nil, err
	}
	if owner != "" && rec.Owner != owner {
		return nil, notFound
	}
	if rec.expired(m.s.relay.Clock().Now()) {
		_ = m.store.DeleteRecord(ctx, taskRecordKind, id)
		return nil, notFound
	}
	return rec, nil
}

func decodeTask(r core.Record) (*taskRecord, error) {
	var rec taskRecord
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return nil, fmt.Errorf("task %s: %w", r.ID, err)
	}
	rec.version = r.Version
	return &rec, nil
}

// serve answers a tasks method for c.
func (m *taskManager) serve(ctx context.Context, method string, c caller, p *taskParams, modern bool) (sdk.Result, error) {
	owner := ownerOf(c)
	switch method {
	case "tasks/list":
		if modern {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/list is not part of the tasks extension"}
		}
		return m.list(ctx, owner, p.Cursor)
	case "tasks/result":
		if modern {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/result is not part of the tasks extension: tasks/get inlines the result"}
		}
		return m.result(ctx, p.TaskID, owner)
	case "tasks/update":
		if _, err := m.load(ctx, p.TaskID, owner); err != nil {
			return nil, err
		}
		// These tasks never ask for input: nothing is outstanding, and
		// responses to requests never issued are ignored.
		return &rawResult{fields: map[string]any{"resultType": "complete"}}, nil
	case "tasks/cancel":
		rec, err := m.cancelTask(ctx, p.TaskID, owner, modern)
		if err != nil {
			return nil, err
		}
		if modern {
			return &rawResult{fields: map[string]any{"resultType": "complete"}}, nil
		}
		return &rawResult{fields: rec.wire(false)}, nil
	}
	rec, err := m.load(ctx, p.TaskID, owner)
	if err != nil {
		return nil, err
	}
	f := rec.wire(modern)
	if modern {
		f["resultType"] = "complete"
	}
	return &rawResult{fields: f}, nil
}

// list answers tasks/list: the owner's 2025-era tasks a page at a time,
// in id order, the cursor being the last id of the page before.
func (m *taskManager) list(ctx context.Context, owner, cursor string) (sdk.Result, error) {
	const page = 50
	now := m.s.relay.Clock().Now()
	tasks := []any{}
	after := cursor
	for len(tasks) < page {
		rs, err := m.store.ListRecordsAfter(ctx, taskRecordKind, owner, after, page)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			after = r.ID
			rec, err := decodeTask(r)
			if err != nil || rec.expired(now) || rec.Era != era2025 {
				continue // tasks/list is of the 2025 era: its tasks only
			}
			tasks = append(tasks, rec.wire(false))
			if len(tasks) == page {
				break
			}
		}
		if len(rs) < page {
			after = ""
			break
		}
	}
	f := map[string]any{"tasks": tasks}
	if after != "" {
		f["nextCursor"] = after
	}
	return &rawResult{fields: f}, nil
}

// result answers tasks/result (2025): it waits until the task ends, then
// gives what the tool call gave: its result (with the related-task
// _meta), or its JSON-RPC error.
func (m *taskManager) result(ctx context.Context, id, owner string) (sdk.Result, error) {
	for {
		rec, err := m.load(ctx, id, owner)
		if err != nil {
			return nil, err
		}
		switch rec.Status {
		case TaskCompleted:
			var f map[string]any
			if err := json.Unmarshal(rec.Result, &f); err != nil {
				return nil, err
			}
			res := &rawResult{fields: f}
			res.Meta = sdk.Meta{metaRelatedTask: map[string]any{"taskId": rec.ID}}
			return res, nil
		case TaskFailed:
			if rec.Error != nil {
				return nil, rec.Error
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: rec.StatusMessage}
		case TaskCancelled:
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task " + id + " was cancelled: it has no result"}
		}
		t := time.NewTimer(taskPoll)
		select {
		case <-m.endedChan(id):
		case <-t.C: // another instance may have ended it
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// cancelTask ends a working task as cancelled; a task already ended
// stays as it is (2025: an error; 2026: the acknowledgement is the same).
func (m *taskManager) cancelTask(ctx context.Context, id, owner string, modern bool) (*taskRecord, error) {
	for attempt := 0; attempt < 5; attempt++ {
		rec, err := m.load(ctx, id, owner)
		if err != nil {
			return nil, err
		}
		if rec.terminal() {
			if modern {
				return rec, nil
			}
			return nil, invalid("task %s is already %s: it cannot be cancelled", id, rec.Status)
		}
		rec.Status, rec.StatusMessage, rec.UpdatedAt = TaskCancelled, "Cancelled at the requestor's request.", m.s.relay.Clock().Now()
		if err := m.put(ctx, rec); errIs(err, core.ErrConflict) {
			continue // it changed meanwhile: look again
		} else if err != nil {
			return nil, err
		}
		m.mu.Lock()
		if stop := m.cancel[id]; stop != nil {
			stop()
		}
		m.mu.Unlock()
		m.changed(rec)
		return rec, nil
	}
	return nil, fmt.Errorf("task %s keeps changing: %w", id, core.ErrConflict)
}

// endedChan is closed when task id ends on this instance.
func (m *taskManager) endedChan(id string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, ok := m.ended[id]
	if !ok {
		ch = make(chan struct{})
		m.ended[id] = ch
	}
	return ch
}

// changed tells the waiters, the streams listening and, for a 2025 task
// on stdio, the host that rec's status changed, here and (through the
// relay's store, when it is shared) on the other hub instances.
func (m *taskManager) changed(rec *taskRecord) {
	m.s.relay.AnnounceRecord(core.RecordEvent{Kind: taskRecordKind, ID: rec.ID, Index: rec.Owner, Version: rec.version})
	m.notifyLocal(rec)
}

// notifyLocal tells the waiters, the streams listening on this instance
// and, for a 2025 task of the stdio session's caller, its host that rec's
// status changed.
func (m *taskManager) notifyLocal(rec *taskRecord) {
	m.mu.Lock()
	if rec.terminal() {
		if ch, ok := m.ended[rec.ID]; ok {
			close(ch)
			delete(m.ended, rec.ID)
		}
	}
	n := m.notify
	if rec.Owner != m.notifyOwner {
		n = nil // another caller's task (one the sweep took up, say)
	}
	m.mu.Unlock()
	if dropped := m.listeners.notify(rec); dropped > 0 {
		m.s.opt.Logger.Warn("mcp: task status notification dropped for a slow stream", "task", rec.ID, "streams", dropped)
	}
	if n != nil && rec.Era == era2025 {
		if err := n.Notify(m.ctx, "notifications/tasks/status", rec.wire(false)); err != nil {
			m.s.opt.Logger.Debug("mcp: task status notification", "task", rec.ID, "err", err)
		}
	}
}

// notifyOver sends 2025-era task status notifications through n (the
// stdio router) until ctx ends.
func (m *taskManager) notifyOver(ctx context.Context, n notifier) {
	m.mu.Lock()
	m.notify, m.notifyOwner = n, ownerOf(m.s.callerOf(nil))
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.notify = nil
	m.mu.Unlock()
}

// start runs rec's work in the background. With recheck (rec was read
// before it was listed as running here: the sweep), the task is read
// again first and left alone if it ended meanwhile: a tasks/cancel that
// stored the end between the sweep's read and the listing found nothing
// to stop, and the task must not run after it.
func (m *taskManager) start(rec *taskRecord, recheck bool) {
	ctx, cancel := context.WithCancel(m.ctx)
	m.mu.Lock()
	m.cancel[rec.ID] = cancel
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer func() {
			cancel()
			m.mu.Lock()
			delete(m.cancel, rec.ID)
			m.mu.Unlock()
		}()
		if recheck {
			// A store that fails here does the task as read (its end is
			// written by version, so a cancellation still wins).
			if cur, err := m.load(ctx, rec.ID, ""); err == nil {
				if cur.terminal() {
					return
				}
				rec = cur
			}
		}
		res, err := m.run(ctx, rec)
		if m.ctx.Err() != nil {
			return // the server stops: the task is done again at the next start
		}
		m.finish(rec.ID, res, err)
	}()
}

// run does a task's tool call and returns its result (a tool error is a
// result with isError, as the tool would give it).
func (m *taskManager) run(ctx context.Context, rec *taskRecord) (*sdk.CallToolResult, error) {
	c := caller{p: rec.Principal, agentID: rec.AgentID}
	switch rec.Tool {
	case "send_message":
		var in SendMessageInput
		if err := json.Unmarshal(rec.Args, &in); err != nil {
			return toolErrorResult(m.s, invalid("arguments: %v", err)), nil
		}
		to, err := m.s.agentID(in.To)
		if err != nil {
			return toolErrorResult(m.s, err), nil
		}
		out, err := m.s.send(ctx, c, to, in)
		if err != nil {
			return toolErrorResult(m.s, err), nil
		}
		rc, err := m.s.relay.WaitReceiptFor(ctx, c.p, out.MessageID)
		if err != nil {
			return nil, err
		}
		out.Status, out.Receipt = string(rc.Status), receiptView(rc)
		text := fmt.Sprintf("Message %s to %s ended %s.", out.MessageID, out.Receiver, rc.Status)
		return structured(text, out)
	case "wait_for_reply":
		var in WaitInput
		if err := json.Unmarshal(rec.Args, &in); err != nil {
			return toolErrorResult(m.s, invalid("arguments: %v", err)), nil
		}
		timeout := time.Until(rec.CreatedAt.Add(time.Duration(rec.TTLMs) * time.Millisecond))
		if in.TimeoutMs > 0 {
			timeout = time.Duration(in.TimeoutMs)*time.Millisecond - m.s.relay.Clock().Now().Sub(rec.CreatedAt)
		}
		w, err := m.s.waiterFor(ctx, c, in.MessageID)
		if err != nil {
			return toolErrorResult(m.s, err), nil
		}
		start := rec.CreatedAt
		r, err := m.s.wait(ctx, nil, w, max(timeout, time.Millisecond))
		if err != nil {
			return nil, err
		}
		r.WaitedMs = m.s.relay.Clock().Now().Sub(start).Milliseconds()
		res, err := structured("", r.WaitOutput)
		if err != nil {
			return nil, err
		}
		res.Content = r.content()
		return res, nil
	}
	return nil, fmt.Errorf("tool %q cannot run as a task", rec.Tool)
}

// structured is a tool result with text and structured content out.
func structured(text string, out any) (*sdk.CallToolResult, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	res := &sdk.CallToolResult{StructuredContent: json.RawMessage(b)}
	if text != "" {
		res.Content = []sdk.Content{&sdk.TextContent{Text: text}}
	}
	return res, nil
}

// toolErrorResult is err as the tool's isError result.
func toolErrorResult(s *Server, err error) *sdk.CallToolResult {
	res := &sdk.CallToolResult{}
	res.SetError(s.toolError(err))
	return res
}

// finish records the end of task id: completed with res, or failed with
// err as a JSON-RPC error. A task ended meanwhile (cancelled) stays so.
func (m *taskManager) finish(id string, res *sdk.CallToolResult, err error) {
	ctx := context.WithoutCancel(m.ctx)
	for attempt := 0; attempt < 5; attempt++ {
		rec, lerr := m.load(ctx, id, "")
		if lerr != nil || rec.terminal() {
			return
		}
		rec.UpdatedAt = m.s.relay.Clock().Now()
		if err != nil {
			var we *jsonrpc.Error
			if !errors.As(m.s.rpcError(err), &we) {
				we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
			rec.Status, rec.StatusMessage, rec.Error = TaskFailed, we.Message, we
		} else {
			b, merr := json.Marshal(res)
			if merr != nil {
				rec.Status, rec.StatusMessage = TaskFailed, "internal error"
				rec.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			} else {
				rec.Status, rec.StatusMessage, rec.Result = TaskCompleted, "The tool call returned.", b
				if res.IsError {
					rec.StatusMessage = "The tool call returned an error result."
				}
			}
		}
		if perr := m.put(ctx, rec); errIs(perr, core.ErrConflict) {
			continue
		} else if perr != nil {
			m.s.opt.Logger.Error("mcp: store a task's end", "task", id, "err", perr)
			return
		}
		m.changed(rec)
		return
	}
}

// resume starts again the tasks left working when a hub stopped, and
// deletes expired ones, now and every minute, until ctx ends.
func (m *taskManager) resume(ctx context.Context) {
	m.sweep(ctx, true)
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.sweep(ctx, false)
		}
	}
}

// sweep walks every task: expired ones are deleted; with start, working
// ones not running here are started.
func (m *taskManager) sweep(ctx context.Context, start bool) {
	after := ""
	for {
		rs, err := m.store.ListRecordsAfter(ctx, taskRecordKind, "", after, 200)
		if err != nil {
			if ctx.Err() == nil {
				m.s.opt.Logger.Warn("mcp: list tasks", "err", err)
			}
			return
		}
		now := m.s.relay.Clock().Now()
		for _, r := range rs {
			after = r.ID
			rec, err := decodeTask(r)
			if err != nil {
				continue
			}
			if rec.expired(now) {
				_ = m.store.DeleteRecord(ctx, taskRecordKind, rec.ID)
				continue
			}
			m.mu.Lock()
			_, running := m.cancel[rec.ID]
			m.mu.Unlock()
			if start && !rec.terminal() && !running {
				m.start(rec, true)
			}
		}
		if len(rs) < 200 {
			return
		}
	}
}

// shutdown stops the tasks running here (they stay working in the store,
// to be done again at the next start) and waits for them.
func (m *taskManager) shutdown() {
	m.stop()
	m.wg.Wait()
}
