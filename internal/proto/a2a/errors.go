package a2a

import (
	"errors"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
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
func wireError(err error) error {
	if err == nil {
		return nil
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
	return sdk.NewError(target, err.Error())
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
