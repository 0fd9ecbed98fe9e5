// Package ampapi is the HTTP face of the AMP engine: GET /v4/amp serves the
// spec document and POST /v4/tick runs one tick and returns its envelope.
package ampapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

// MaxBody is the largest accepted request body.
const MaxBody = 1 << 20

// DefaultSessionID is used when a tick request names no session.
const DefaultSessionID = "http-session"

// Paths served by the handler.
const (
	PathSpec = "/v4/amp"
	PathTick = "/v4/tick"
)

// TickRequest is the body of POST /v4/tick. All fields are optional.
type TickRequest struct {
	// Spec, if present, must be AMP/0.1.
	Spec      *string         `json:"spec,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	Event     string          `json:"event,omitempty"`
	Message   string          `json:"message,omitempty"`
	ToolName  string          `json:"tool_name,omitempty"`
	ToolInput map[string]any  `json:"tool_input,omitempty"`
	Result    *amp.ToolResult `json:"tool_result,omitempty"`
	Success   *bool           `json:"success,omitempty"`
	Source    string          `json:"source,omitempty"`
	Trigger   string          `json:"trigger,omitempty"`
	Summary   string          `json:"summary,omitempty"`
	Force     bool            `json:"force,omitempty"`
	// DetectedTriggers are triggers the caller detected (the reference's
	// ids, such as giving_up_language or premature_convergence).
	DetectedTriggers []string `json:"detected_triggers,omitempty"`
}

// TickResponse is the body of a successful POST /v4/tick: a valid AMP
// envelope (its fields are inlined, and nested again as "amp", where the
// reference's clients read it) plus what the host should do.
type TickResponse struct {
	amp.Envelope
	SessionID string `json:"session_id"`
	Event     string `json:"event"`
	Injection string `json:"injection,omitempty"`
	Deny      bool   `json:"deny,omitempty"`
	Block     bool   `json:"block,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// MarshalJSON inlines the envelope (whose own MarshalJSON would otherwise
// hide the other fields).
func (r TickResponse) MarshalJSON() ([]byte, error) {
	env, err := json.Marshal(r.Envelope)
	if err != nil {
		return nil, err
	}
	type extra struct {
		SessionID string          `json:"session_id"`
		Event     string          `json:"event"`
		Injection string          `json:"injection,omitempty"`
		Deny      bool            `json:"deny,omitempty"`
		Block     bool            `json:"block,omitempty"`
		Reason    string          `json:"reason,omitempty"`
		AMP       json.RawMessage `json:"amp"`
	}
	more, err := json.Marshal(extra{r.SessionID, r.Event, r.Injection, r.Deny, r.Block, r.Reason, env})
	if err != nil {
		return nil, err
	}
	// {envelope…} + {extra…} → {envelope…,extra…}
	out := append(env[:len(env)-1:len(env)-1], ',')
	return append(out, more[1:]...), nil
}

// Error is the body of every error response.
type Error struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	StatusCode int    `json:"status_code"`
}

// Handler serves the AMP HTTP face.
type Handler struct {
	engine *amp.Engine
	mux    *http.ServeMux
	log    *slog.Logger
}

// New returns the handler for engine, serving GET /v4/amp and
// POST /v4/tick. Mount it at the server root (or strip nothing). Ticks the
// engine fails are logged to log (slog.Default() when nil); the caller is
// told only that the tick failed.
func New(engine *amp.Engine, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{engine: engine, mux: http.NewServeMux(), log: log}
	h.mux.HandleFunc(PathSpec, h.spec)
	h.mux.HandleFunc(PathTick, h.tick)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such AMP endpoint: "+r.URL.Path)
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// preflight answers a CORS preflight (OPTIONS) with 204, as the
// reference does. Only the public spec document may be read from another
// origin; a tick needs a credential and is not offered to browsers.
func preflight(w http.ResponseWriter, allow string, public bool) {
	w.Header().Set("Allow", allow)
	if public {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Methods", allow)
		w.Header().Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) spec(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions {
		preflight(w, "GET, HEAD, OPTIONS", true)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET "+PathSpec)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(amp.SpecDocumentJSON())
	}
}

func (h *Handler) tick(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions {
		preflight(w, "POST, OPTIONS", false)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST "+PathTick)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("the body exceeds %d bytes", MaxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	var req TickRequest
	if len(bytes.TrimSpace(body)) > 0 {
		// Unmarshal takes one value and white space around it, nothing
		// after it.
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_json", "the body is not a valid tick request: "+err.Error())
			return
		}
		if key, dup := jsonvalue.DuplicateKey(body); dup {
			writeError(w, http.StatusBadRequest, "invalid_json", fmt.Sprintf("key %q appears twice in one object of the JSON body", key))
			return
		}
	}
	if req.Spec != nil && *req.Spec != amp.SpecVersion {
		writeError(w, http.StatusBadRequest, "unknown_spec", fmt.Sprintf("spec %q is not supported (want %s)", *req.Spec, amp.SpecVersion))
		return
	}
	if req.SessionID == "" {
		req.SessionID = DefaultSessionID
	}
	if err := core.CheckStorable("session_id", req.SessionID); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_field", httperr.Text(err))
		return
	}
	ev, ok := amp.ParseHostEvent(req.Event)
	if !ok {
		ev = amp.HostManual // as the reference: an unknown event is a manual tick
	}
	// Each credential has its own sessions: the caller's principal key
	// namespaces the session id (dev mode has none).
	res, err := h.engine.Step(r.Context(), amp.TickInput{
		SessionID: req.SessionID, Owner: auth.From(r.Context()).Key(), Event: ev, Message: req.Message, ToolName: req.ToolName, ToolInput: req.ToolInput,
		Result: req.Result, Success: req.Success, Source: req.Source, Trigger: req.Trigger, Summary: req.Summary, Force: req.Force,
		DetectedTriggers: req.DetectedTriggers,
	})
	if errors.Is(err, amp.ErrUnknownTrigger) {
		writeError(w, http.StatusBadRequest, "unknown_trigger", err.Error())
		return
	}
	if errors.Is(err, core.ErrInvalid) {
		// The session id with the caller's namespace is text the store
		// cannot keep: the caller's to fix.
		writeError(w, http.StatusBadRequest, "invalid_field", fmt.Sprintf(
			"session_id is too long for this caller: with the caller's namespace it must stay within %d bytes", core.MaxStoredText))
		return
	}
	if err != nil {
		if r.Context().Err() != nil {
			return // the caller went away: no one to answer, nothing wrong here
		}
		// The cause (a store's error, with its paths or queries) is for
		// the operator, not the caller.
		h.log.ErrorContext(r.Context(), "amp tick failed", "session_id", req.SessionID, "event", string(ev), "err", err)
		writeError(w, http.StatusInternalServerError, "tick_failed", "the engine could not take the tick; the hub's log has the cause")
		return
	}
	writeJSON(w, http.StatusOK, TickResponse{Envelope: res.Envelope, SessionID: req.SessionID, Event: string(ev),
		Injection: res.Injection, Deny: res.Deny, Block: res.Block, Reason: res.Reason})
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, Error{Error: code, Message: msg, StatusCode: status})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"internal","message":"encoding the response failed","status_code":500}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
