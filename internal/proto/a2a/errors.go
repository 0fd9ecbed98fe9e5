package a2a

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Task errors of the adapter, matched with errors.Is.
var (
	// ErrIllegalTransition refuses a state change the state machine forbids.
	ErrIllegalTransition = errors.New("illegal task state transition")
	// ErrTaskNotFound is an unknown task, or one the caller may not see:
	// the two are answered alike. It carries core.KindNotFound.
	ErrTaskNotFound = core.NewError(core.KindNotFound, "task not found")
	// ErrTooManyPushConfigs refuses a config past MaxPushConfigs for a task.
	ErrTooManyPushConfigs = core.NewError(core.KindInvalid, "too many push notification configs for the task")
)

// sdkErrors are the A2A errors the SDK's transports render (a JSON-RPC
// code, an HTTP status, a gRPC code); an error that already is one of them
// is passed on as it is.
var sdkErrors = []error{
	sdk.ErrParseError, sdk.ErrInvalidRequest, sdk.ErrMethodNotFound, sdk.ErrInvalidParams,
	sdk.ErrInternalError, sdk.ErrServerError, sdk.ErrTaskNotFound, sdk.ErrTaskNotCancelable,
	sdk.ErrPushNotificationNotSupported, sdk.ErrUnsupportedOperation, sdk.ErrUnsupportedContentType,
	sdk.ErrInvalidAgentResponse, sdk.ErrExtendedCardNotConfigured, sdk.ErrExtensionSupportRequired,
	sdk.ErrVersionNotSupported, sdk.ErrUnauthenticated, sdk.ErrUnauthorized,
}

// wireError maps an error of the relay or the adapter to the A2A error its
// kind stands for: the one place where core error kinds become A2A's
// (the SDK's transports then render it per binding). Each result wraps
// exactly one A2A sentinel, so every binding picks the same code.
//
//	kind            A2A error               JSON-RPC  HTTP  gRPC
//	invalid         InvalidParams            -32602   400   INVALID_ARGUMENT
//	too_large       InvalidParams            -32602   400   INVALID_ARGUMENT
//	conflict        InvalidParams            -32602   400   INVALID_ARGUMENT
//	unauthenticated Unauthenticated          -31401   401   UNAUTHENTICATED
//	forbidden       Unauthorized             -31403   403   PERMISSION_DENIED
//	not_found       TaskNotFound             -32001   404   NOT_FOUND
//	unsupported     UnsupportedContentType   -32005   400   INVALID_ARGUMENT
//	rate_limited, unavailable, storage_full, internal
//	                InternalError            -32603   500   INTERNAL
//
// An internal error's text is not shown (it may name the store's
// trouble); the others carry the relay's message.
//
// A2A has no error for "come back later", but HTTP has: a refusal that
// may pass (unavailable, rate_limited, storage_full, over budget) is
// noted in ctx, and the HTTP bindings answer it with the status and
// Retry-After the hub's other protocols give (503, 429, 507), the A2A
// error in the body (see retryWriter).
func wireError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if n, _ := ctx.Value(retryNoteKey{}).(*retryNote); n != nil {
		status, code := httperr.Classify(err)
		if secs := httperr.RetryAfter(code); secs > 0 {
			n.status.Store(int32(status))
			n.retryAfter.Store(int32(secs))
		}
	}
	for _, e := range sdkErrors {
		if errors.Is(err, e) {
			return err
		}
	}
	var target error
	switch core.KindOf(err) {
	case core.KindInvalid, core.KindTooLarge, core.KindConflict:
		target = sdk.ErrInvalidParams
	case core.KindUnauthenticated:
		target = sdk.ErrUnauthenticated
	case core.KindForbidden:
		target = sdk.ErrUnauthorized
	case core.KindNotFound:
		target = sdk.ErrTaskNotFound
	case core.KindUnsupported:
		target = sdk.ErrUnsupportedContentType
	case core.KindUnavailable:
		// The store's error may name its address: say only what it means.
		return sdk.NewError(sdk.ErrInternalError, "the hub's store is unavailable; nothing was stored, retry later")
	case core.KindRateLimited, core.KindStorageFull:
		return sdk.NewError(sdk.ErrInternalError, err.Error())
	default:
		return sdk.NewError(sdk.ErrInternalError, "internal error")
	}
	return sdk.NewError(target, httperr.Text(err))
}

// invalid is an invalid-params error with msg.
func invalid(msg string) error { return sdk.NewError(sdk.ErrInvalidParams, msg) }

// JSON-RPC error codes of the A2A errors (the specification's JSON-RPC
// binding), as clients and tests match them.
const (
	CodeParseError             = -32700
	CodeInvalidRequest         = -32600
	CodeMethodNotFound         = -32601
	CodeInvalidParams          = -32602
	CodeInternal               = -32603
	CodeTaskNotFound           = -32001
	CodeTaskNotCancelable      = -32002
	CodeUnsupportedOperation   = -32004
	CodeContentTypeUnsupported = -32005
	CodeExtendedCardNotConfig  = -32007
	CodeVersionNotSupported    = -32009
	CodeUnauthenticated        = -31401
	CodeUnauthorized           = -31403
)

// retryNote is where wireError notes, for the HTTP binding serving the
// request, that the refusal may pass: the HTTP status and Retry-After
// seconds to answer with.
type retryNote struct {
	status, retryAfter atomic.Int32
}

type retryNoteKey struct{}

// retryWriter answers an A2A error that wireError noted as one that may
// pass with its HTTP status and Retry-After instead of the binding's 200
// (JSON-RPC) or 500 (HTTP+JSON); the body is the binding's error as it
// is. A stream that already started (SSE) keeps its status.
type retryWriter struct {
	http.ResponseWriter
	note    *retryNote
	written bool
}

// withRetryNote returns w and r wrapped so that the binding's answer
// carries a noted refusal's status.
func withRetryNote(w http.ResponseWriter, r *http.Request) (*retryWriter, *http.Request) {
	n := new(retryNote)
	return &retryWriter{ResponseWriter: w, note: n}, r.WithContext(context.WithValue(r.Context(), retryNoteKey{}, n))
}

func (w *retryWriter) WriteHeader(status int) {
	if w.written {
		return
	}
	w.written = true
	if noted := int(w.note.status.Load()); noted != 0 && w.Header().Get("Content-Type") != "text/event-stream" {
		w.Header().Set("Retry-After", strconv.Itoa(int(w.note.retryAfter.Load())))
		status = noted
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *retryWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines).
func (w *retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes the stream (SSE) through the wrap.
func (w *retryWriter) Flush() {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}
