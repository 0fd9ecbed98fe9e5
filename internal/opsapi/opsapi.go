// Package opsapi serves the operator routes: health and readiness, the live
// event stream that `switchboard tail` and the dashboard read, and the dead
// letter queue.
package opsapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Server serves the operator routes.
type Server struct {
	relay   *core.Relay
	version string
}

// New returns the operator routes for relay.
func New(relay *core.Relay, version string) *Server { return &Server{relay: relay, version: version} }

// Mount adds the routes to mux.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("GET /v1/dlq", s.dlq)
	mux.HandleFunc("POST /v1/dlq/{id}/replay", s.replay)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	httperr.JSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.version})
}

// readyz answers 200 only when the store answers.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.relay.Store().Ping(r.Context()); err != nil {
		httperr.Write(w, http.StatusServiceUnavailable, httperr.CodeUnavailable, "store not ready: "+err.Error())
		return
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"status": "ready"})
}

// events streams relay events as server-sent events. Filters: agent (as
// sender or receiver), type, conversation_id.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if err := auth.Admin(r.Context()); err != nil {
		httperr.From(w, err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		httperr.Write(w, http.StatusInternalServerError, httperr.CodeInternal, "streaming unsupported")
		return
	}
	q := r.URL.Query()
	agent, typ, conv := q.Get("agent"), q.Get("type"), q.Get("conversation_id")
	ch, cancel := s.relay.Events().Subscribe(1024)
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": switchboard events\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		case e := <-ch:
			if agent != "" && e.Sender != agent && e.Receiver != agent && e.Agent != agent {
				continue
			}
			if typ != "" && string(e.Type) != typ {
				continue
			}
			if conv != "" && e.ConversationID != conv {
				continue
			}
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Type, b)
			fl.Flush()
		}
	}
}

func (s *Server) dlq(w http.ResponseWriter, r *http.Request) {
	if err := auth.Admin(r.Context()); err != nil {
		httperr.From(w, err)
		return
	}
	f := core.DeadLetterFilter{Receiver: r.URL.Query().Get("receiver"), Limit: 100}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 10000 {
			httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, "limit must be 1..10000")
			return
		}
		f.Limit = n
	}
	list, err := s.relay.Store().DeadLetters(r.Context(), f)
	if err != nil {
		httperr.From(w, err)
		return
	}
	if list == nil {
		list = []*core.Receipt{}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"dead_letters": list})
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	if err := auth.Admin(r.Context()); err != nil {
		httperr.From(w, err)
		return
	}
	var ttl time.Duration
	if v := r.URL.Query().Get("ttl_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, "ttl_ms must be a positive integer")
			return
		}
		ttl = time.Duration(n) * time.Millisecond
	}
	rc, err := s.relay.Replay(r.Context(), r.PathValue("id"), ttl)
	if err != nil {
		httperr.From(w, err)
		return
	}
	httperr.JSON(w, http.StatusOK, rc)
}
