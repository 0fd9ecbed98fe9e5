package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Mount adds the adapter's routes to mux (the hub's adapter contract):
//
//   - GET /.well-known/agent-card.json (and agent.json): the hub's card, a
//     directory of its agents; GET /a2a/agents: the same directory;
//   - GET /a2a/{agent}/.well-known/agent-card.json: the agent's card (1.0,
//     with the 0.3 fields); …/agent.json: its pure 0.3 card;
//   - POST /a2a/{agent}: the JSON-RPC binding, 1.0 and 0.3 by A2A-Version;
//   - /a2a/{agent}/…: the HTTP+JSON (REST) binding, 1.0 (/message:send,
//     /tasks/…) and 0.3 (/v1/message:send, …);
//   - POST /lf.a2a.v1.A2AService/…: the gRPC binding (1.0), for every
//     agent, each request naming its agent as its tenant.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/agent-card.json", httperr.Handle(s.hubCard))
	mux.HandleFunc("GET /.well-known/agent.json", httperr.Handle(s.hubCard))
	mux.HandleFunc("GET /a2a/agents", httperr.Handle(s.directory))
	mux.HandleFunc("GET /a2a/{agent}/.well-known/agent-card.json", httperr.Handle(s.agentCard))
	mux.HandleFunc("GET /a2a/{agent}/.well-known/agent.json", httperr.Handle(s.legacyAgentCard))
	mux.HandleFunc("POST /a2a/{agent}", s.jsonrpcEndpoint)
	mux.HandleFunc("/a2a/{agent}/{rest...}", s.restEndpoint)
	mux.HandleFunc("POST "+GRPCService, s.grpcEndpoint)
}

// restEndpoint serves the HTTP+JSON binding under /a2a/{agent}/: the
// SDK's handlers (a2asrv.NewRESTHandler, a2av0.NewRESTHandler for the 0.3
// paths under /v1/), with the wraps the JSON-RPC binding has where they
// apply: the A2A-Version header is checked, a body must be JSON and at
// most Options.MaxBody, and pageSize=0 is told from no pageSize.
func (s *Server) restEndpoint(w http.ResponseWriter, r *http.Request) {
	if msg := unauthenticated(w, r); msg != "" {
		restError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "UNAUTHENTICATED", msg)
		return
	}
	agent, rest := r.PathValue("agent"), r.PathValue("rest")
	inner, v := s.rest, V10
	if strings.HasPrefix(rest, "v1/") {
		inner, v = s.rest0, V03
	}
	if hv := r.Header.Get(sdk.SvcParamVersion); hv != "" {
		got, err := ParseVersion(hv)
		if err != nil || (v == V10 && got != V10) {
			restError(w, http.StatusBadRequest, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED",
				fmt.Sprintf("A2A-Version %q is not served at this path (1.0 here; 0.3 under /v1/)", hv))
			return
		}
	}
	if r.Method == http.MethodPost && r.ContentLength != 0 {
		if err := httperr.CheckJSON(r); err != nil {
			restError(w, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", "INVALID_REQUEST", httperr.Text(err))
			return
		}
		body, status, msg := s.readBody(w, r)
		if msg != "" {
			restError(w, status, "INVALID_ARGUMENT", "INVALID_REQUEST", msg)
			return
		}
		body = camelKeys(body)
		r.Body, r.ContentLength = readCloser{bytes.NewReader(body)}, int64(len(body))
	}
	ctx := withVersion(withRequest(r.Context(), r, agent), v)
	if q := r.URL.Query(); q.Has("pageSize") && strings.TrimSpace(q.Get("pageSize")) == "0" {
		ctx = withZeroPageSize(ctx)
	}
	rw, r2 := withRetryNote(&unroutedWriter{ResponseWriter: w, r: r}, r.Clone(ctx))
	r2.URL = &url.URL{Path: "/" + rest, RawQuery: r.URL.RawQuery}
	r2.RequestURI = r2.URL.RequestURI()
	inner.ServeHTTP(rw, r2)
}

// unroutedWriter turns the plain-text 404 and 405 of the SDK's REST
// router (a path under /a2a/{agent}/ that names no operation) into the
// hub's JSON errors.
type unroutedWriter struct {
	http.ResponseWriter
	r       *http.Request
	discard bool
}

func (u *unroutedWriter) WriteHeader(code int) {
	plain := strings.HasPrefix(u.Header().Get("Content-Type"), "text/plain")
	switch {
	case plain && code == http.StatusNotFound:
		u.discard = true
		httperr.Write(u.ResponseWriter, code, httperr.CodeNotFound, "no A2A operation at "+u.r.Method+" "+u.r.URL.Path)
	case plain && code == http.StatusMethodNotAllowed:
		u.discard = true
		httperr.Write(u.ResponseWriter, code, httperr.CodeMethodNotAllowed, "method "+u.r.Method+" not allowed for "+u.r.URL.Path)
	default:
		u.ResponseWriter.WriteHeader(code)
	}
}

func (u *unroutedWriter) Write(b []byte) (int, error) {
	if u.discard {
		return len(b), nil
	}
	return u.ResponseWriter.Write(b)
}

// Flush lets the SDK's streams flush through the wrapper.
func (u *unroutedWriter) Flush() {
	if f, ok := u.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (u *unroutedWriter) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// camelKeys renames the proto field names of a JSON body (message_id)
// to their JSON names (messageId): proto3's JSON mapping has parsers
// accept both, and the SDK's HTTP+JSON handler accepts only the JSON
// names. The values of metadata, data and other free-form members are
// left as they are. A body that is not JSON is passed on unchanged.
func camelKeys(body []byte) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return body
	}
	out, err := json.Marshal(camel(v))
	if err != nil {
		return body
	}
	return out
}

// freeForm are the members whose values are the client's, not the
// protocol's.
var freeForm = map[string]bool{"metadata": true, "data": true, "params": true, "header": true}

func camel(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			ck := k
			if strings.Contains(k, "_") {
				parts := strings.Split(k, "_")
				for i := 1; i < len(parts); i++ {
					if parts[i] != "" {
						parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
					}
				}
				ck = strings.Join(parts, "")
			}
			if freeForm[ck] {
				out[ck] = val
			} else {
				out[ck] = camel(val)
			}
		}
		return out
	case []any:
		for i := range x {
			x[i] = camel(x[i])
		}
		return x
	}
	return v
}

// restError writes an error the REST wrap found, in the binding's shape
// (google.rpc.Status with an ErrorInfo).
func restError(w http.ResponseWriter, status int, grpcStatus, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": status, "status": grpcStatus, "message": msg,
		"details": []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": sdk.ProtocolDomain}},
	}})
}
