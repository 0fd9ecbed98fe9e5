package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Tasks through the stdio bridge. The hub keeps the tasks (records in
// its store, owned by the bridge's credential and agent), so the bridge
// only carries the task surface between the host and the hub, in the
// host's era, as raw JSON-RPC (the SDK's client knows neither params.task
// nor the tasks methods):
//
//   - 2026-07-28: each request (a tools/call of send_message or
//     wait_for_reply declaring the extension, tasks/get, tasks/update,
//     tasks/cancel) is posted as it came, sessionless, so a restart of the
//     hub is not even seen; a subscriptions/listen for task ids too, its
//     event stream written to the host until the host cancels it.
//   - 2025-11-25: the bridge holds a session of that era with the hub for
//     the host's tasks (tools/call with params.task, tasks/get,
//     tasks/result, tasks/list, tasks/cancel); when the hub has forgotten
//     it (a restart: 404) it opens another and asks again. The session's
//     standalone stream brings notifications/tasks/status, which are
//     written to the host; it is opened again after a restart.

// hubTasks carries the task surface to the hub.
type hubTasks struct {
	url     string
	hc      *http.Client // adds the bridge's credential and agent
	version string
	log     *slog.Logger

	ids atomic.Int64

	streams chan taskStream // the session's standalone stream, for relayStatus

	mu      sync.Mutex
	session string // the 2025-era session, or ""
}

func newHubTasks(url string, hc *http.Client, version string, log *slog.Logger) *hubTasks {
	return &hubTasks{url: url, hc: hc, version: version, log: log, streams: make(chan taskStream, 1)}
}

// errSessionGone is the hub's answer for a session it does not know.
var errSessionGone = errors.New("the hub does not know the session")

// call makes one JSON-RPC call of era to the hub and returns its result,
// or its JSON-RPC error as a *jsonrpc.Error.
func (h *hubTasks) call(ctx context.Context, era, method string, params map[string]any) (map[string]any, error) {
	if era == era2026 {
		return h.post(ctx, era, "", method, params)
	}
	for attempt := 0; ; attempt++ {
		sid, err := h.ensureSession(ctx)
		if err != nil {
			return nil, err
		}
		res, err := h.post(ctx, era, sid, method, params)
		if errors.Is(err, errSessionGone) && attempt == 0 {
			h.dropSession(sid)
			continue
		}
		return res, err
	}
}

// post posts one request and reads its answer (JSON, or the event stream
// up to the answer).
func (h *hubTasks) post(ctx context.Context, era, sid, method string, params map[string]any) (map[string]any, error) {
	id := h.ids.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	resp, err := h.do(ctx, era, sid, method, params, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && sid != "" {
		return nil, errSessionGone
	}
	var answer struct {
		ID     json.RawMessage `json:"id"`
		Result map[string]any  `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	found := false
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		want := fmt.Sprint(id)
		for !found && sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			found = ok && json.Unmarshal([]byte(d), &answer) == nil && string(answer.ID) == want
		}
	} else {
		// A JSON-RPC error may come with a 4xx status (the sessionless
		// handler answers so).
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		found = json.Unmarshal(b, &answer) == nil && (answer.Result != nil || answer.Error != nil)
		if !found && resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: the hub answered %d: %.200s", method, resp.StatusCode, strings.TrimSpace(string(b)))
		}
	}
	switch {
	case !found:
		return nil, fmt.Errorf("%s: no answer from the hub (%d)", method, resp.StatusCode)
	case answer.Error != nil:
		return nil, answer.Error
	case answer.Result == nil:
		answer.Result = map[string]any{}
	}
	return answer.Result, nil
}

// do sends a JSON-RPC body to the hub with the headers of era.
func (h *hubTasks) do(ctx context.Context, era, sid, method string, params map[string]any, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", era)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if era == era2026 {
		req.Header.Set("Mcp-Method", method)
		if name, ok := params["name"].(string); ok {
			req.Header.Set("Mcp-Name", name)
		} else if tid, ok := params["taskId"].(string); ok {
			req.Header.Set("Mcp-Name", tid)
		}
	}
	return h.hc.Do(req)
}

// ensureSession returns the 2025-era session, opening one if there is
// none.
func (h *hubTasks) ensureSession(ctx context.Context) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.session != "" {
		return h.session, nil
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": h.ids.Add(1), "method": "initialize", "params": map[string]any{
		"protocolVersion": era2025, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "switchboard-mcp-bridge", "version": h.version}}})
	resp, err := h.do(ctx, era2025, "", "initialize", nil, body)
	if err != nil {
		return "", fmt.Errorf("open a session with the hub: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		return "", fmt.Errorf("open a session with the hub: %d", resp.StatusCode)
	}
	body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	resp, err = h.do(ctx, era2025, sid, "notifications/initialized", nil, body)
	if err != nil {
		return "", fmt.Errorf("open a session with the hub: %w", err)
	}
	resp.Body.Close()
	h.openStream(sid)
	h.session = sid
	return sid, nil
}

// close deletes the 2025-era session, if one is open, so that the hub
// does not keep it for its idle hour, counted against the credential's
// sessions. The hub answers at once (its calls in progress end).
func (h *hubTasks) close(ctx context.Context) {
	h.mu.Lock()
	sid := h.session
	h.session = ""
	h.mu.Unlock()
	if sid == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, h.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", era2025)
	resp, err := h.hc.Do(req)
	if err != nil {
		h.log.Debug("mcp bridge: delete the task session", "err", err)
		return
	}
	resp.Body.Close()
}

// dropSession forgets session sid (the hub no longer knows it).
func (h *hubTasks) dropSession(sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.session == sid {
		h.session = ""
	}
}

// taskStream is the standalone stream of a 2025-era session.
type taskStream struct {
	sid  string
	resp *http.Response
}

// openStream opens session sid's standalone stream and hands it to
// relayStatus (replacing one not taken yet). It is open before the
// session is used, so that no status change of a request made in the
// session is missed.
func (h *hubTasks) openStream(sid string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, h.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", era2025)
	resp, err := h.hc.Do(req)
	if err != nil {
		h.log.Debug("mcp bridge: task status stream", "err", err)
		return
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		h.log.Debug("mcp bridge: task status stream", "status", resp.StatusCode)
		return
	}
	for {
		select {
		case h.streams <- taskStream{sid: sid, resp: resp}:
			return
		case old := <-h.streams:
			old.resp.Body.Close()
		}
	}
}

// relayStatus writes the hub's notifications/tasks/status to n until ctx
// ends: from the 2025-era session's standalone stream, and, when the hub
// ends it (a restart), from that of a new session.
func (h *hubTasks) relayStatus(ctx context.Context, n notifier) {
	defer func() {
		select {
		case s := <-h.streams:
			s.resp.Body.Close()
		default:
		}
	}()
	poll := core.NewPoll(250*time.Millisecond, 5*time.Second)
	defer poll.Stop()
	for {
		var s taskStream
		select {
		case <-ctx.Done():
			return
		case s = <-h.streams:
		}
		err := h.read(ctx, s, n)
		if ctx.Err() != nil {
			return
		}
		h.log.Debug("mcp bridge: task status stream ended", "err", err)
		h.dropSession(s.sid)
		// A new session at once, while there is none: the tasks made
		// before the restart are still the host's to hear of.
		for ctx.Err() == nil {
			if sid, _ := h.current(); sid != "" {
				break // opened by a request meanwhile (its stream is waiting)
			}
			if _, err := h.ensureSession(ctx); err == nil {
				poll.Again()
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-poll.C():
				poll.Fired()
			}
		}
	}
}

// current is the 2025-era session, or "".
func (h *hubTasks) current() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.session, h.session != ""
}

// read reads a standalone stream, writing task status notifications to
// n, until it ends.
func (h *hubTasks) read(ctx context.Context, s taskStream, n notifier) error {
	defer s.resp.Body.Close()
	stop := context.AfterFunc(ctx, func() { s.resp.Body.Close() })
	defer stop()
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal([]byte(d), &m) != nil || m.Method != "notifications/tasks/status" {
			continue
		}
		if err := n.Notify(ctx, m.Method, m.Params); err != nil {
			return err
		}
	}
	return sc.Err()
}

// install serves the task surface on the bridge's local server: the
// capabilities of both eras, and the requests carried to the hub.
func (h *hubTasks) install(srv *sdk.Server) {
	for _, method := range tasksMethods {
		// Served by the middleware; the handler runs only if it is skipped.
		_ = sdk.AddReceivingCustomMethod(srv, method, func(context.Context, *sdk.ServerSession, *taskParams) (*rawResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tasks are served by the middleware"}
		})
	}
	srv.AddReceivingMiddleware(h.middleware)
}

func (h *hubTasks) middleware(next sdk.MethodHandler) sdk.MethodHandler {
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
				return res, err
			}
			return &augmented{Result: res, add: addTaskSupport}, nil
		case "tools/call":
			call, ok := req.(*sdk.CallToolRequest)
			if !ok || call.Params == nil || !taskTools[call.Params.Name] {
				return next(ctx, method, req)
			}
			era, _, asked := taskAsked(call.Params.Meta)
			if !asked {
				return next(ctx, method, req)
			}
			meta := map[string]any{}
			for k, v := range call.Params.Meta {
				meta[k] = v
			}
			p := map[string]any{"name": call.Params.Name}
			if len(call.Params.Arguments) > 0 {
				p["arguments"] = call.Params.Arguments
			}
			if t, ok := meta[metaTaskParams]; ok {
				p["task"] = t
				delete(meta, metaTaskParams)
			}
			if len(meta) > 0 {
				p["_meta"] = meta
			}
			return h.forward(ctx, era, method, p)
		case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
			tp, _ := req.GetParams().(*taskParams)
			if tp == nil {
				tp = &taskParams{}
			}
			era := era2025
			if tp.Meta[metaProtocolVersion] != nil {
				era = era2026
			}
			p := map[string]any{}
			if tp.TaskID != "" {
				p["taskId"] = tp.TaskID
			}
			if tp.Cursor != "" {
				p["cursor"] = tp.Cursor
			}
			if len(tp.Meta) > 0 {
				p["_meta"] = map[string]any(tp.Meta)
			}
			return h.forward(ctx, era, method, p)
		}
		return next(ctx, method, req)
	}
}

// forward carries one request to the hub and its answer back.
func (h *hubTasks) forward(ctx context.Context, era, method string, params map[string]any) (sdk.Result, error) {
	res, err := h.call(ctx, era, method, params)
	if err != nil {
		return nil, protocolError(err)
	}
	return &rawResult{fields: res}, nil
}

// taskListen carries the host's 2026-era listens for task ids to the hub
// (which serves them as an event stream), when the hub has tasks.
func (b *remoteBackend) taskListen() func(context.Context, *router, *jsonrpc.Request, *listenRequest) {
	if b.tasks == nil {
		return nil
	}
	return b.tasks.listenStdio
}

// listenStdio posts the host's listen to the hub and writes what the
// stream brings to the host (the notifications, then the result if the
// hub ends the listen) until ctx ends (the host cancelled it, or left).
func (h *hubTasks) listenStdio(ctx context.Context, r *router, req *jsonrpc.Request, lr *listenRequest) {
	fail := func(err error) {
		_ = r.raw.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: protocolError(err)})
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": req.Method, "params": req.Params})
	if err != nil {
		fail(err)
		return
	}
	resp, err := h.do(ctx, era2026, "", req.Method, nil, body)
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	defer resp.Body.Close()
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()
	var lines *bufio.Scanner
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		lines = bufio.NewScanner(resp.Body)
	} else { // an error, as JSON
		lines = bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	}
	lines.Buffer(nil, 16<<20)
	for lines.Scan() {
		d := strings.TrimPrefix(lines.Text(), "data: ")
		msg, err := jsonrpc.DecodeMessage([]byte(d))
		if err != nil {
			continue
		}
		switch m := msg.(type) {
		case *jsonrpc.Request:
			if err := r.raw.Write(ctx, m); err != nil {
				return
			}
		case *jsonrpc.Response:
			m.ID = req.ID // the host's id
			_ = r.raw.Write(ctx, m)
			return
		}
	}
	if ctx.Err() == nil {
		fail(fmt.Errorf("the hub ended the listen (%d)", resp.StatusCode))
	}
}
