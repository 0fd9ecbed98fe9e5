package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

// The JSON-RPC binding is the SDK's (a2asrv.NewJSONRPCHandler for 1.0,
// a2av0.NewJSONRPCHandler for 0.3), wrapped by jsonrpcEndpoint for what it
// does not do (docs/a2a.md lists each wrap):
//
//   - it ignores the A2A-Version header: the wrap chooses the version per
//     request (a missing header is 0.3, but a 1.0 method name is served as
//     1.0) and answers an unsupported one -32009;
//   - it answers params that do not decode into the method's request with
//     -32700 (parse error), and a missing params member too: the wrap
//     decodes them first and answers -32602 (invalid params), as JSON-RPC
//     2.0 says; ListTasks and GetExtendedAgentCard may omit params;
//   - it cannot tell "pageSize": 0 from no pageSize: the wrap marks the
//     request, and ListTasks refuses it;
//   - it answers neither batches nor notifications as JSON-RPC 2.0 says:
//     the wrap answers a batch with an array of answers (streaming methods
//     cannot be batched: -32004), and a notification with nothing (204);
//   - a request naming a key twice is ambiguous: -32600, the method not run.

// rpcError is a JSON-RPC error object the wrap answers.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// rpcResponse is a JSON-RPC response the wrap writes.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func errResponse(id json.RawMessage, code int, format string, args ...any) rpcResponse {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return rpcResponse{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// rpcRequest is one JSON-RPC request as the wrap reads it.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
	hasID   bool
}

// Methods by version, each with a function that decodes its params (the
// SDK's request type) or says why they do not.
var (
	streaming = map[string]bool{"SendStreamingMessage": true, "SubscribeToTask": true, "message/stream": true, "tasks/resubscribe": true}
	// noParams are the methods whose params may be left out.
	noParams  = map[string]bool{"ListTasks": true, "GetExtendedAgentCard": true, "agent/getAuthenticatedExtendedCard": true}
	methods10 = map[string]func(json.RawMessage) error{
		"SendMessage":                      decodeInto[sdk.SendMessageRequest],
		"SendStreamingMessage":             decodeInto[sdk.SendMessageRequest],
		"GetTask":                          decodeInto[sdk.GetTaskRequest],
		"ListTasks":                        decodeInto[sdk.ListTasksRequest],
		"CancelTask":                       decodeInto[sdk.CancelTaskRequest],
		"SubscribeToTask":                  decodeInto[sdk.SubscribeToTaskRequest],
		"CreateTaskPushNotificationConfig": decodeInto[sdk.PushConfig],
		"GetTaskPushNotificationConfig":    decodeInto[sdk.GetTaskPushConfigRequest],
		"ListTaskPushNotificationConfigs":  decodeInto[sdk.ListTaskPushConfigRequest],
		"DeleteTaskPushNotificationConfig": decodeInto[sdk.DeleteTaskPushConfigRequest],
		"GetExtendedAgentCard":             decodeInto[sdk.GetExtendedAgentCardRequest],
	}
	methods03 = map[string]func(json.RawMessage) error{
		"message/send":                        decodeSend03,
		"message/stream":                      decodeSend03,
		"tasks/get":                           decodeInto[a2alegacy.TaskQueryParams],
		"tasks/cancel":                        decodeInto[a2alegacy.TaskIDParams],
		"tasks/resubscribe":                   decodeInto[a2alegacy.TaskIDParams],
		"tasks/pushNotificationConfig/set":    decodeInto[a2alegacy.TaskPushConfig],
		"tasks/pushNotificationConfig/get":    decodeInto[a2alegacy.GetTaskPushConfigParams],
		"tasks/pushNotificationConfig/list":   decodeInto[a2alegacy.ListTaskPushConfigParams],
		"tasks/pushNotificationConfig/delete": decodeInto[a2alegacy.DeleteTaskPushConfigParams],
		"agent/getAuthenticatedExtendedCard":  func(json.RawMessage) error { return nil },
	}
)

func decodeInto[T any](raw json.RawMessage) error {
	var v T
	return json.Unmarshal(raw, &v)
}

func decodeSend03(raw json.RawMessage) error {
	var p a2alegacy.MessageSendParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	if p.Message == nil {
		return errors.New("message is required")
	}
	_, err := a2av0.ToV1SendMessageRequest(&p)
	return err
}

// jsonrpcEndpoint serves POST /a2a/{agent}: the JSON-RPC binding of
// both versions (see the wraps above).
func (s *Server) jsonrpcEndpoint(w http.ResponseWriter, r *http.Request) {
	if err := httperr.CheckJSON(r); err != nil {
		writeRPC(w, http.StatusUnsupportedMediaType, errResponse(nil, CodeInvalidRequest, "%s", httperr.Text(err)))
		return
	}
	if msg := unauthenticated(w, r); msg != "" {
		writeRPC(w, http.StatusUnauthorized, errResponse(nil, CodeUnauthenticated, "%s", msg))
		return
	}
	hv, hasHeader := r.Header.Get(sdk.SvcParamVersion), len(r.Header.Values(sdk.SvcParamVersion)) > 0
	v, verr := ParseVersion(hv)
	body, status, msg := s.readBody(w, r)
	if msg != "" {
		writeRPC(w, status, errResponse(nil, CodeInvalidRequest, "%s", msg))
		return
	}
	trimmed := bytes.TrimSpace(body)
	if !json.Valid(trimmed) {
		writeRPC(w, http.StatusOK, errResponse(nil, CodeParseError, "the body is not JSON"))
		return
	}
	if k, dup := jsonvalue.DuplicateKey(trimmed); dup {
		writeRPC(w, http.StatusOK, errResponse(nil, CodeInvalidRequest, "the request names %q twice: ambiguous", k))
		return
	}
	if trimmed[0] != '[' {
		rw, r := withRetryNote(w, r)
		s.rpcOne(rw, r, trimmed, v, verr, hasHeader, false)
		return
	}
	var elems []json.RawMessage
	_ = json.Unmarshal(trimmed, &elems)
	if len(elems) == 0 {
		writeRPC(w, http.StatusOK, errResponse(nil, CodeInvalidRequest, "an empty batch"))
		return
	}
	var out []json.RawMessage
	for _, e := range elems {
		rec := httptest.NewRecorder()
		s.rpcOne(rec, r, e, v, verr, hasHeader, true)
		if b := bytes.TrimSpace(rec.Body.Bytes()); rec.Code == http.StatusOK && len(b) > 0 {
			out = append(out, append(json.RawMessage(nil), b...))
		}
	}
	if len(out) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// rpcOne serves one JSON-RPC request (of a batch when inBatch).
func (s *Server) rpcOne(w http.ResponseWriter, r *http.Request, raw json.RawMessage, v Version, verr error, hasHeader, inBatch bool) {
	var req rpcRequest
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		writeRPC(w, http.StatusOK, errResponse(nil, CodeInvalidRequest, "a request must be a JSON object"))
		return
	}
	req.ID, req.hasID = members["id"]
	if err := json.Unmarshal(raw, &req); err != nil || req.JSONRPC != "2.0" || req.Method == "" || !validID(req.ID) {
		id := req.ID
		if !validID(id) {
			id = nil
		}
		writeRPC(w, http.StatusOK, errResponse(id, CodeInvalidRequest, `not a JSON-RPC 2.0 request ("jsonrpc": "2.0", a method, an id that is a string, a number or null)`))
		return
	}
	if verr != nil {
		writeRPC(w, http.StatusOK, errResponse(req.ID, CodeVersionNotSupported, "%v", verr))
		return
	}
	if !hasHeader {
		if _, ok := methods10[req.Method]; ok {
			v = V10 // a 1.0 method name cannot be mistaken for a 0.3 one
		}
	}
	table, inner := methods10, s.jsonrpc
	if v == V03 {
		table, inner = methods03, s.jsonrpc0
	}
	if decode, ok := table[req.Method]; ok {
		if len(req.Params) == 0 || string(req.Params) == "null" {
			if !noParams[req.Method] {
				s.answer(w, req, errResponse(req.ID, CodeInvalidParams, "params are required"))
				return
			}
			req.Params = json.RawMessage("{}")
		}
		if err := decode(req.Params); err != nil {
			s.answer(w, req, errResponse(req.ID, CodeInvalidParams, "invalid params: %v", err))
			return
		}
	}
	if inBatch && streaming[req.Method] {
		writeRPC(w, http.StatusOK, errResponse(req.ID, CodeUnsupportedOperation, "streaming method %q cannot be part of a batch", req.Method))
		return
	}
	if !req.hasID && streaming[req.Method] {
		w.WriteHeader(http.StatusNoContent) // a notification gets no answer, and no stream is started
		return
	}
	ctx := withVersion(withRequest(r.Context(), r, r.PathValue("agent")), v)
	if req.Method == "ListTasks" {
		var p struct {
			PageSize *int `json:"pageSize"`
		}
		if json.Unmarshal(req.Params, &p) == nil && p.PageSize != nil && *p.PageSize == 0 {
			ctx = withZeroPageSize(ctx)
		}
	}
	id := req.ID
	if !req.hasID {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: req.Method, Params: req.Params, ID: id})
	r2 := r.Clone(ctx)
	r2.Body = readCloser{bytes.NewReader(b)}
	r2.ContentLength = int64(len(b))
	if !req.hasID {
		inner.ServeHTTP(httptest.NewRecorder(), r2)
		w.WriteHeader(http.StatusNoContent) // a notification gets no answer
		return
	}
	if req.Method == "tasks/pushNotificationConfig/list" {
		// The 0.3 handler answers no configs with a null result; 0.3
		// says an array (and @a2a-js/sdk's legacy client fails on null).
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r2)
		var resp rpcResponse
		if json.Unmarshal(rec.Body.Bytes(), &resp) == nil && resp.Error == nil && (len(resp.Result) == 0 || string(resp.Result) == "null") {
			resp.Result = json.RawMessage("[]")
			writeRPC(w, http.StatusOK, resp)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	inner.ServeHTTP(w, r2)
}

// unauthenticated answers whether r's caller may not reach any agent
// (every operation on an agent looks it up first, which the table refuses
// to a caller without a credential when auth is on): it then returns why
// and sets WWW-Authenticate, so that the refusal is HTTP's 401, as the
// cards' bearer scheme announces.
func unauthenticated(w http.ResponseWriter, r *http.Request) string {
	err := core.Authorize(core.PrincipalFrom(r.Context()), core.OpListAgents, core.RelNone)
	if core.KindOf(err) != core.KindUnauthenticated {
		return ""
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
	return "this hub needs a bearer token (an agent's token or the admin token)"
}

// answer writes an error the wrap found, unless req is a notification.
func (s *Server) answer(w http.ResponseWriter, req rpcRequest, resp rpcResponse) {
	if !req.hasID {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeRPC(w, http.StatusOK, resp)
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// validID reports whether a request id is a string, a number or null (or
// absent).
func validID(id json.RawMessage) bool {
	t := bytes.TrimSpace(id)
	if len(t) == 0 || string(t) == "null" {
		return true
	}
	switch t[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func writeRPC(w http.ResponseWriter, status int, resp rpcResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}

// readBody reads r's body, at most Options.MaxBody bytes. It returns a
// status and a message instead when the body is too large, cut off or too
// slow.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, string) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.opt.MaxBody))
	switch {
	case err == nil:
		return buf.Bytes(), 0, ""
	case errors.As(err, new(*http.MaxBytesError)):
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.opt.MaxBody)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, http.StatusRequestTimeout, "the request body did not arrive in time"
	}
	return nil, http.StatusBadRequest, "the request body could not be read"
}

// withRequest adds to ctx what the handler needs of the HTTP request: the
// agent its path names and who calls (for per-caller bounds).
func withRequest(ctx context.Context, r *http.Request, agent string) context.Context {
	return context.WithValue(withAgent(ctx, agent), callerKey{}, callerOf(r))
}

// callerKey keys the caller's name for per-caller bounds in a context.
type callerKey struct{}

func callerOf(r *http.Request) string { return auth.CallerKey(r) }
