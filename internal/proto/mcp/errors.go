package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// The one place where the core's error kinds become MCP's wire shapes.
//
// A tool whose work fails answers a result with isError set, its text
// "<kind>: <message>" (kinds as core.Kind names them: invalid, forbidden,
// not_found, …). Everything else — resources, prompts, completion, tasks —
// answers a JSON-RPC error whose code follows the kind and whose data is
// {"kind": "<kind>"}. An internal error shows no detail to the caller: it
// is logged, and the caller reads "internal error".

// JSON-RPC codes of the server-defined range used for the kinds that
// JSON-RPC has no code for.
const (
	// CodeForbidden answers kinds forbidden and unauthenticated.
	CodeForbidden = -32001
	// CodeUnavailable answers kinds rate_limited, unavailable and
	// storage_full: retry later.
	CodeUnavailable = -32000
)

// rpcCode is the JSON-RPC code of kind k.
func rpcCode(k core.Kind) int64 {
	switch k {
	case core.KindInvalid, core.KindNotFound, core.KindTooLarge, core.KindUnsupported, core.KindConflict:
		return jsonrpc.CodeInvalidParams
	case core.KindForbidden, core.KindUnauthenticated:
		return CodeForbidden
	case core.KindRateLimited, core.KindUnavailable, core.KindStorageFull:
		return CodeUnavailable
	}
	return jsonrpc.CodeInternalError
}

// describe returns err's kind and the text a caller may see.
func (s *Server) describe(err error) (core.Kind, string) {
	k := core.KindOf(err)
	if k == core.KindInternal {
		s.opt.Logger.Error("mcp: internal error", slog.Any("err", err))
		return k, "internal error"
	}
	// The core's sentinel ends the chain's text with the kind's own name
	// ("…: invalid"), which the answer already gives first.
	return k, strings.TrimSuffix(err.Error(), ": "+core.ErrInvalid.Error())
}

// toolError is the error a tool handler gives the SDK, which makes it the
// text of an isError result.
func (s *Server) toolError(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we // a protocol error stays one
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // the call was cancelled: nothing to report
	}
	k, text := s.describe(err)
	return errors.New(k.String() + ": " + text)
}

// rpcError is err as a JSON-RPC error.
func (s *Server) rpcError(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we
	}
	k, text := s.describe(err)
	data, _ := json.Marshal(map[string]string{"kind": k.String()})
	return &jsonrpc.Error{Code: rpcCode(k), Message: text, Data: data}
}

// handler is a typed tool handler.
type handler[In, Out any] func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error)

// tool adds a typed tool whose errors are mapped by toolError, with
// portable input and output schemas (schema.go).
func tool[In, Out any](s *Server, t *sdk.Tool, h handler[In, Out]) {
	t.InputSchema, t.OutputSchema = schemaFor[In](), schemaFor[Out]()
	sdk.AddTool(s.srv, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		res, out, err := h(ctx, req, in)
		if err != nil {
			var zero Out
			return nil, zero, s.toolError(err)
		}
		return res, out, nil
	})
}

// kindError is an error of this package with a core kind (core.KindOf
// finds it).
type kindError struct {
	kind core.Kind
	msg  string
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Kind() core.Kind { return e.kind }

// invalid is an error of kind invalid.
func invalid(format string, args ...any) error {
	return &kindError{core.KindInvalid, fmt.Sprintf(format, args...)}
}

// notFound is an error of kind not_found.
func notFound(format string, args ...any) error {
	return &kindError{core.KindNotFound, fmt.Sprintf(format, args...)}
}

// errIs is errors.Is (short, for switches).
func errIs(err, target error) bool { return errors.Is(err, target) }
