// Package httperr writes the hub's JSON error answers,
// {"error": code, "message": text, "status_code": n}, and maps core errors
// to them. Every HTTP face of the hub except JSON-RPC ones (A2A, MCP) uses
// this shape.
package httperr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
)

// Body is the JSON error answer.
type Body struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	StatusCode int    `json:"status_code"`
}

// Error codes shared by the HTTP faces. docs/errors.md lists them.
const (
	CodeInvalidJSON     = "invalid_json"
	CodeMissingField    = "missing_field"
	CodeInvalidField    = "invalid_field"
	CodeUnsupported     = "unsupported_version"
	CodeTooLarge        = "payload_too_large"
	CodeUnknownReceiver = "unreachable"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeIDConflict      = "message_id_conflict"
	CodeQueueFull       = "queue_full"
	CodeContentType     = "content_type_not_accepted"
	CodeMessageTooLarge = "message_too_large"
	CodeForbidden       = "forbidden"
	CodeUnauthorized    = "unauthorized"
	CodeRateLimited     = "rate_limited"
	CodeUnavailable     = "unavailable"
	CodeStorageFull     = "storage_full"
	CodeInternal        = "internal"
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
	}
	return http.StatusInternalServerError, CodeInternal
}

// From writes the answer for err. Internal errors are not described to the
// client.
func From(w http.ResponseWriter, err error) {
	status, code := Classify(err)
	msg := err.Error()
	if status == http.StatusInsufficientStorage {
		msg = "the hub's store is full; nothing was stored, retry later"
	}
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	Write(w, status, code, msg)
}

// DecodeJSON reads a JSON body of at most max bytes into v, writing the
// error answer itself and returning false on failure.
func DecodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, max)
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			Errorf(w, http.StatusRequestEntityTooLarge, CodeTooLarge, "request body exceeds %d bytes", max)
			return false
		}
		Errorf(w, http.StatusBadRequest, CodeInvalidJSON, "malformed JSON body: %v", err)
		return false
	}
	if dec.More() {
		Write(w, http.StatusBadRequest, CodeInvalidJSON, "trailing data after the JSON body")
		return false
	}
	return true
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
