package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

// JSON-RPC and A2A error codes (A2A specification, JSON-RPC binding).
const (
	CodeParseError             = -32700
	CodeInvalidRequest         = -32600
	CodeMethodNotFound         = -32601
	CodeInvalidParams          = -32602
	CodeInternal               = -32603
	CodeTaskNotFound           = -32001
	CodeTaskNotCancelable      = -32002
	CodePushNotSupported       = -32003
	CodeUnsupportedOperation   = -32004
	CodeContentTypeUnsupported = -32005
	CodeInvalidAgentResponse   = -32006
	CodeExtendedCardNotConfig  = -32007
	CodeExtensionRequired      = -32008
	CodeVersionNotSupported    = -32009
)

var reasons = map[int]string{
	CodeParseError:             "PARSE_ERROR",
	CodeInvalidRequest:         "INVALID_REQUEST",
	CodeMethodNotFound:         "METHOD_NOT_FOUND",
	CodeInvalidParams:          "INVALID_PARAMS",
	CodeInternal:               "INTERNAL_ERROR",
	CodeTaskNotFound:           "TASK_NOT_FOUND",
	CodeTaskNotCancelable:      "TASK_NOT_CANCELABLE",
	CodePushNotSupported:       "PUSH_NOTIFICATION_NOT_SUPPORTED",
	CodeUnsupportedOperation:   "UNSUPPORTED_OPERATION",
	CodeContentTypeUnsupported: "CONTENT_TYPE_NOT_SUPPORTED",
	CodeInvalidAgentResponse:   "INVALID_AGENT_RESPONSE",
	CodeExtendedCardNotConfig:  "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
	CodeExtensionRequired:      "EXTENSION_SUPPORT_REQUIRED",
	CodeVersionNotSupported:    "VERSION_NOT_SUPPORTED",
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	// retryAfter, when positive, marks an error that passes (the store
	// unavailable, the hub over its memory budget): a single call's answer
	// then carries this HTTP status and Retry-After, so a client backs off
	// and comes back.
	retryAfter int
	status     int
}

// retryable is the error for a refusal that passes: the message says why,
// the HTTP answer asks the client to come back after secs.
func retryable(status, secs int, msg string) *RPCError {
	return &RPCError{Code: CodeInternal, Message: msg, retryAfter: secs, status: status}
}

// writeRPCError writes a single call's error answer: HTTP 200 with the
// JSON-RPC error, or for a refusal that passes its status and Retry-After.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, e *RPCError) {
	status := http.StatusOK
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
		status = e.status
	}
	writeJSON(w, status, Response{ID: id, Error: e})
}

// Error implements error.
func (e *RPCError) Error() string { return fmt.Sprintf("a2a error %d: %s", e.Code, e.Message) }

func rpcErr(code int, format string, args ...any) *RPCError {
	return &RPCError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// withData adds the version's structured details: 1.0 carries a
// google.rpc.ErrorInfo with the error's reason, 0.3 a plain object.
func (e *RPCError) withData(v Version) *RPCError {
	if e.Data != nil {
		return e
	}
	reason := reasons[e.Code]
	if reason == "" {
		reason = "INTERNAL_ERROR"
	}
	if v == V10 {
		e.Data = []map[string]any{{
			"@type":    "type.googleapis.com/google.rpc.ErrorInfo",
			"reason":   reason,
			"domain":   "a2a-protocol.org",
			"metadata": map[string]string{"timestamp": time.Now().UTC().Format(time.RFC3339)},
		}}
	}
	return e
}

// toRPCError maps an error from the core or the task store to its A2A code.
func toRPCError(err error) *RPCError {
	var re *RPCError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, ErrTaskNotFound):
		return rpcErr(CodeTaskNotFound, "%v", err)
	case errors.Is(err, ErrIllegalTransition):
		return rpcErr(CodeUnsupportedOperation, "%v", err)
	case errors.Is(err, core.ErrContentType):
		return rpcErr(CodeContentTypeUnsupported, "%v", err)
	case errors.Is(err, core.ErrTooLarge), errors.Is(err, core.ErrInvalid), errors.Is(err, core.ErrIDConflict):
		return rpcErr(CodeInvalidParams, "%v", err)
	case errors.Is(err, core.ErrUnknownReceiver), errors.Is(err, core.ErrNotFound):
		return rpcErr(CodeInvalidParams, "%v", err)
	case errors.Is(err, core.ErrForbidden), errors.Is(err, auth.ErrNotPermitted):
		return rpcErr(-31403, "%v", err)
	case errors.Is(err, auth.ErrUnauthenticated):
		return rpcErr(-31401, "%v", err)
	case errors.Is(err, core.ErrQueueFull):
		return rpcErr(CodeInternal, "receiver queue is full, try again later")
	case errors.Is(err, ErrTooManyPushConfigs):
		return rpcErr(CodeInvalidParams, "%v (at most %d)", err, MaxPushConfigs)
	case errors.Is(err, core.ErrUnavailable):
		return retryable(http.StatusServiceUnavailable, 2, "the hub's store is unavailable; nothing was stored, retry later")
	case errors.Is(err, core.ErrOverloaded):
		return retryable(http.StatusInsufficientStorage, 1, "the hub holds as much in memory as its budget allows; nothing was stored, retry shortly")
	case errors.Is(err, core.ErrAgentLimit):
		return rpcErr(CodeInternal, "the hub holds as many agents as it may")
	}
	return rpcErr(CodeInternal, "internal error")
}

// Request is one JSON-RPC request.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	// ID is the raw id (string, number or null); nil for a notification.
	ID json.RawMessage `json:"id,omitempty"`
	// hasID distinguishes "id": null from no id.
	hasID bool
}

// Response is one JSON-RPC response.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// MarshalJSON writes "result": null when a successful response has no
// result (JSON-RPC requires one of result and error).
func (r Response) MarshalJSON() ([]byte, error) {
	id := r.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	if r.Error != nil {
		return json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *RPCError       `json:"error"`
		}{"2.0", id, r.Error})
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, r.Result})
}

// ParseBody splits a JSON-RPC body into requests. batch is true for an
// array body. A body that is not JSON gives a parse error; a request that
// is not a valid JSON-RPC request is returned with its error in errs (at
// the same index), so a batch can answer it alone.
func ParseBody(body []byte) (reqs []*Request, errs []*RPCError, batch bool, perr *RPCError) {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return nil, nil, false, rpcErr(CodeParseError, "request body is not valid JSON")
	}
	if len(body) > 0 && body[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, nil, true, rpcErr(CodeParseError, "request body is not valid JSON")
		}
		if len(items) == 0 {
			return nil, nil, false, rpcErr(CodeInvalidRequest, "empty batch")
		}
		for _, it := range items {
			r, e := parseRequest(it)
			reqs, errs = append(reqs, r), append(errs, e)
		}
		return reqs, errs, true, nil
	}
	r, e := parseRequest(body)
	return []*Request{r}, []*RPCError{e}, false, nil
}

func parseRequest(raw json.RawMessage) (*Request, *RPCError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return &Request{hasID: true}, rpcErr(CodeInvalidRequest, "a request must be a JSON object")
	}
	if key, dup := jsonvalue.DuplicateKey(raw); dup {
		// Ambiguous (the last would win here, the first elsewhere), so
		// not read at all, and its id not trusted either.
		return &Request{hasID: true}, rpcErr(CodeInvalidRequest, "key %q appears twice in one object of the request", key)
	}
	r := &Request{}
	if id, ok := fields["id"]; ok {
		r.hasID = true
		switch c := bytes.TrimSpace(id); {
		case len(c) > 0 && (c[0] == '"' || c[0] == '-' || (c[0] >= '0' && c[0] <= '9')):
			r.ID = c
		case string(c) == "null":
			r.ID = c
		default:
			return &Request{hasID: true}, rpcErr(CodeInvalidRequest, "id must be a string, a number or null")
		}
	}
	if v, ok := fields["jsonrpc"]; !ok || string(bytes.TrimSpace(v)) != `"2.0"` {
		return r, rpcErr(CodeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	m, ok := fields["method"]
	if !ok || json.Unmarshal(m, &r.Method) != nil || r.Method == "" {
		return r, rpcErr(CodeInvalidRequest, "method must be a non-empty string")
	}
	if p, ok := fields["params"]; ok {
		p = bytes.TrimSpace(p)
		if len(p) == 0 || (p[0] != '{' && string(p) != "null") {
			return r, rpcErr(CodeInvalidParams, "params must be an object")
		}
		if string(p) != "null" {
			r.Params = p
		}
	}
	return r, nil
}

// decodeParams decodes a request's params into v, refusing unknown
// shapes with invalid params.
func decodeParams(r *Request, v any) *RPCError {
	if len(r.Params) == 0 {
		return rpcErr(CodeInvalidParams, "params are required")
	}
	if err := json.Unmarshal(r.Params, v); err != nil {
		return rpcErr(CodeInvalidParams, "invalid params: %v", err)
	}
	return nil
}
