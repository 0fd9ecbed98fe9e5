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
	"mime"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"

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
	// CodeReservedID refuses an id of a namespace the caller may not
	// claim (a remote agent's x@host, the hub's internal _… ids).
	CodeReservedID = "reserved_id"
	// CodeNotAnswerable refuses a correlation_id that names a message the
	// sender did not receive.
	CodeNotAnswerable = "not_answerable"
	// CodeConversationNotFound answers every refused conversation
	// operation: unknown, or not open to the caller.
	CodeConversationNotFound = "conversation_not_found"
	// CodeUnsupportedMediaType refuses a body that is not declared JSON.
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeOverBudget           = "over_budget"
	CodeTooManyStreams       = "too_many_streams"
	CodeInternal             = "internal"
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
// error code: by its kind (core.KindOf), with a code of its own for the
// errors that have one. It is the one place where core errors become HTTP
// answers.
func Classify(err error) (int, string) {
	var (
		mbe *http.MaxBytesError
		he  *Error
	)
	switch {
	case errors.As(err, &he):
		return he.Status, he.Code
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, core.ErrUnknownReceiver):
		return http.StatusNotFound, CodeUnknownReceiver
	case errors.Is(err, core.ErrNoConversation):
		return http.StatusNotFound, CodeConversationNotFound
	case errors.Is(err, core.ErrIDConflict):
		return http.StatusConflict, CodeIDConflict
	case errors.Is(err, core.ErrQueueFull):
		return http.StatusTooManyRequests, CodeQueueFull
	case errors.Is(err, core.ErrContentType):
		return http.StatusUnsupportedMediaType, CodeContentType
	case errors.Is(err, core.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, CodeMessageTooLarge
	case errors.Is(err, core.ErrAgentLimit):
		return http.StatusInsufficientStorage, CodeAgentLimit
	case errors.Is(err, core.ErrOverloaded):
		return http.StatusInsufficientStorage, CodeOverBudget
	case errors.Is(err, core.ErrReservedID):
		return http.StatusForbidden, CodeReservedID
	case errors.Is(err, core.ErrNotAnswerable):
		return http.StatusForbidden, CodeNotAnswerable
	}
	switch core.KindOf(err) {
	case core.KindInvalid:
		return http.StatusBadRequest, CodeInvalidField
	case core.KindUnauthenticated:
		return http.StatusUnauthorized, CodeUnauthorized
	case core.KindForbidden:
		return http.StatusForbidden, CodeForbidden
	case core.KindNotFound:
		return http.StatusNotFound, CodeNotFound
	case core.KindConflict:
		return http.StatusConflict, CodeConflict
	case core.KindTooLarge:
		return http.StatusRequestEntityTooLarge, CodeMessageTooLarge
	case core.KindUnsupported:
		return http.StatusUnsupportedMediaType, CodeContentType
	case core.KindRateLimited:
		return http.StatusTooManyRequests, CodeRateLimited
	case core.KindUnavailable:
		return http.StatusServiceUnavailable, CodeUnavailable
	case core.KindStorageFull:
		return http.StatusInsufficientStorage, CodeStorageFull
	}
	return http.StatusInternalServerError, CodeInternal
}

// Error is an HTTP error answer a handler returns for a refusal of its own
// (a malformed field, say) rather than the core's.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// New returns an *Error.
func New(status int, code, format string, args ...any) error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// HandlerFunc is an HTTP handler that returns its error instead of
// writing it: Handle writes it, in one place.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle returns the http.HandlerFunc that runs h and answers its error
// with From. A handler that already wrote its answer must return nil.
func Handle(h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			From(w, err)
		}
	}
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
//
// A body not declared JSON (Content-Type application/json, or
// application/<something>+json) is refused first with 415
// unsupported_media_type: a web page can send a cross-site form or
// text/plain body without the browser asking the hub first, but not a
// JSON one, so JSON only keeps browsers from writing to the hub on a
// visitor's behalf.
func DecodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) bool {
	if err := ReadJSON(w, r, max, v); err != nil {
		From(w, err)
		return false
	}
	return true
}

// ReadJSON is DecodeJSON returning the error (an *Error) instead of
// writing it, for handlers that return their errors (Handle).
func ReadJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	if err := CheckJSON(r); err != nil {
		return err
	}
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
				return nil
			}
			return New(http.StatusBadRequest, CodeInvalidJSON, "key %q appears twice in one object of the JSON body", key)
		}
		err = decodeError(data, v, err)
	}
	var (
		mbe *http.MaxBytesError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return New(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body exceeds %d bytes", max)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The connection's read deadline (the hub's --body-timeout) passed
		// while the body was still arriving.
		return New(http.StatusRequestTimeout, CodeTimeout, "the request body did not arrive in time")
	case errors.Is(err, io.EOF):
		return New(http.StatusBadRequest, CodeInvalidJSON, "request body is empty: want a JSON object")
	case errors.Is(err, errTrailing):
		return New(http.StatusBadRequest, CodeInvalidJSON, "trailing data after the JSON body")
	case errors.As(err, &te) && te.Field != "":
		return New(http.StatusBadRequest, CodeInvalidField, "%s must be %s, not %s", te.Field, jsonKind(te.Type), te.Value)
	case errors.As(err, &te):
		return New(http.StatusBadRequest, CodeInvalidJSON, "the body must be %s, not %s", jsonKind(te.Type), te.Value)
	case errors.Is(err, core.ErrInvalid):
		return New(http.StatusBadRequest, CodeInvalidField, "%s", err.Error())
	}
	return New(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON body: %v", err)
}

// QueryBool reads query parameter name of r: true or 1, false or 0, or
// absent (false). Anything else is 400 invalid_field, so that a filter a
// client misspelt is not silently off.
func QueryBool(r *http.Request, name string) (bool, error) {
	switch r.URL.Query().Get(name) {
	case "true", "1":
		return true, nil
	case "", "false", "0":
		return false, nil
	}
	return false, New(http.StatusBadRequest, CodeInvalidField, "%s must be true or false", name)
}

// CheckJSON refuses (415 unsupported_media_type) a request whose body is
// not declared JSON: Content-Type application/json or
// application/<something>+json, parameters (charset) allowed.
func CheckJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return New(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "the body must be JSON, sent with Content-Type: application/json (got %s)", ct)
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
