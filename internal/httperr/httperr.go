// Package httperr writes the hub's JSON error answers,
// {"error": code, "message": text, "status_code": n}, and maps core errors
// to them. Every HTTP face of the hub except JSON-RPC ones (A2A, MCP) uses
// this shape.
package httperr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

// Body is the JSON error answer.
type Body struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	StatusCode int    `json:"status_code"`
}

// Error codes shared by the HTTP faces. docs/errors.md lists them.
const (
	CodeInvalidJSON      = "invalid_json"
	CodeMissingField     = "missing_field"
	CodeInvalidField     = "invalid_field"
	CodeUnsupported      = "unsupported_version"
	CodeTooLarge         = "payload_too_large"
	CodeTimeout          = "request_timeout"
	CodeUnknownReceiver  = "unreachable"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeIDConflict       = "message_id_conflict"
	CodeQueueFull        = "queue_full"
	CodeContentType      = "content_type_not_accepted"
	CodeMessageTooLarge  = "message_too_large"
	CodeForbidden        = "forbidden"
	CodeUnauthorized     = "unauthorized"
	CodeRateLimited      = "rate_limited"
	CodeUnavailable      = "unavailable"
	CodeStorageFull      = "storage_full"
	CodeAgentLimit       = "agent_limit"
	CodeOverBudget       = "over_budget"
	CodeTooManyStreams   = "too_many_streams"
	CodeInternal         = "internal"
)

// Write writes an error answer.
func Write(w http.ResponseWriter, status int, code, msg string) {
	setJSONHeaders(w.Header())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Body{Error: code, Message: msg, StatusCode: status})
}

// Errorf writes an error answer with a formatted message.
func Errorf(w http.ResponseWriter, status int, code, format string, args ...any) {
	Write(w, status, code, fmt.Sprintf(format, args...))
}

// Classify maps an error from the core or a store to an HTTP status and
// error code.
func Classify(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, core.ErrInvalid):
		return http.StatusBadRequest, CodeInvalidField
	case errors.Is(err, core.ErrUnknownReceiver):
		return http.StatusNotFound, CodeUnknownReceiver
	case errors.Is(err, core.ErrNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, core.ErrIDConflict):
		return http.StatusConflict, CodeIDConflict
	case errors.Is(err, core.ErrConflict):
		return http.StatusConflict, CodeConflict
	case errors.Is(err, core.ErrQueueFull):
		return http.StatusTooManyRequests, CodeQueueFull
	case errors.Is(err, core.ErrContentType):
		return http.StatusUnsupportedMediaType, CodeContentType
	case errors.Is(err, core.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, CodeMessageTooLarge
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized, CodeUnauthorized
	case errors.Is(err, auth.ErrNotPermitted):
		return http.StatusForbidden, CodeForbidden
	case errors.Is(err, core.ErrForbidden):
		return http.StatusForbidden, CodeForbidden
	case errors.Is(err, core.ErrStorageFull):
		return http.StatusInsufficientStorage, CodeStorageFull
	case errors.Is(err, core.ErrAgentLimit):
		return http.StatusInsufficientStorage, CodeAgentLimit
	case errors.Is(err, core.ErrOverloaded):
		return http.StatusInsufficientStorage, CodeOverBudget
	case errors.Is(err, core.ErrUnavailable):
		return http.StatusServiceUnavailable, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

// From writes the answer for err. Internal errors are not described to the
// client. Answers that ask the client to come back (429, 503, 507) carry
// Retry-After (see RetryAfter).
func From(w http.ResponseWriter, err error) {
	status, code := Classify(err)
	msg := Text(err)
	switch code {
	case CodeStorageFull:
		msg = "the hub's store is full; nothing was stored, retry later"
	case CodeOverBudget:
		msg = "the hub holds as much in memory as its budget allows; nothing was stored, retry shortly"
	case CodeUnavailable:
		msg = "the hub's store is unavailable; nothing was stored, retry later"
	}
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	if secs := RetryAfter(code); secs > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	Write(w, status, code, msg)
}

// RetryAfter is the Retry-After, in seconds, of an answer with error code
// (0: none): how soon the refusal may have passed.
func RetryAfter(code string) int {
	switch code {
	case CodeOverBudget, CodeQueueFull:
		return 1 // memory and queues drain as messages are delivered
	case CodeUnavailable:
		return 2 // a database restart or failover takes seconds
	case CodeStorageFull, CodeAgentLimit:
		return 30 // needs an operator
	}
	return 0
}

// Text is err's message for a client: without the ": invalid" that
// wrapping core.ErrInvalid leaves at its end (the error code says it).
func Text(err error) string {
	msg := err.Error()
	if errors.Is(err, core.ErrInvalid) {
		msg = strings.TrimSuffix(msg, ": "+core.ErrInvalid.Error())
	}
	return msg
}

// DecodeJSON reads a JSON body of at most max bytes into v, writing the
// error answer itself and returning false on failure: 413 past max, 400
// invalid_json for an empty body, bad syntax, anything but white space
// after the value, or a key named twice in one object (see
// jsonvalue.DuplicateKey), 400 invalid_field for a value of the wrong JSON
// type (naming the field and the type it must be).
func DecodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, max)
	buf := bodies.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			bodies.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(r.Body)
	if err == nil {
		data := buf.Bytes()
		if err = json.Unmarshal(data, v); err == nil {
			key, dup := jsonvalue.DuplicateKey(data)
			if !dup {
				return true
			}
			Errorf(w, http.StatusBadRequest, CodeInvalidJSON, "key %q appears twice in one object of the JSON body", key)
			return false
		}
		err = decodeError(data, v, err)
	}
	var (
		mbe *http.MaxBytesError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		Errorf(w, http.StatusRequestEntityTooLarge, CodeTooLarge, "request body exceeds %d bytes", max)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The connection's read deadline (the hub's --body-timeout) passed
		// while the body was still arriving.
		Write(w, http.StatusRequestTimeout, CodeTimeout, "the request body did not arrive in time")
	case errors.Is(err, io.EOF):
		Write(w, http.StatusBadRequest, CodeInvalidJSON, "request body is empty: want a JSON object")
	case errors.Is(err, errTrailing):
		Write(w, http.StatusBadRequest, CodeInvalidJSON, "trailing data after the JSON body")
	case errors.As(err, &te) && te.Field != "":
		Errorf(w, http.StatusBadRequest, CodeInvalidField, "%s must be %s, not %s", te.Field, jsonKind(te.Type), te.Value)
	case errors.As(err, &te):
		Errorf(w, http.StatusBadRequest, CodeInvalidJSON, "the body must be %s, not %s", jsonKind(te.Type), te.Value)
	case errors.Is(err, core.ErrInvalid):
		Write(w, http.StatusBadRequest, CodeInvalidField, err.Error())
	default:
		Errorf(w, http.StatusBadRequest, CodeInvalidJSON, "malformed JSON body: %v", err)
	}
	return false
}

// decodeError names why data did not decode into v, which json.Unmarshal
// reported as err: reading it again as a stream tells an empty body and
// trailing data from other syntax errors.
func decodeError(data []byte, v any, err error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if derr := dec.Decode(v); derr != nil {
		return derr
	}
	// Only white space may follow: the next token must be the end. (A
	// stray } or ] is an error here, which More would not report.)
	if _, terr := dec.Token(); terr != io.EOF {
		return errTrailing
	}
	return err
}

// bodies holds buffers for request bodies; those that grew past
// maxPooledBody are left to the garbage collector.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 64 << 10

var errTrailing = errors.New("trailing data")

// jsonKind names the JSON type that decodes into t.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a different JSON type"
}

// JSON writes v as a JSON answer with status.
func JSON(w http.ResponseWriter, status int, v any) {
	setJSONHeaders(w.Header())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// setJSONHeaders sets the headers of a JSON answer. The keys are
// canonical, as Header.Set would make them, and the values share one
// allocation.
func setJSONHeaders(h http.Header) {
	v := []string{"application/json", "nosniff"}
	h["Content-Type"] = v[0:1:1]
	h["X-Content-Type-Options"] = v[1:2:2]
}
