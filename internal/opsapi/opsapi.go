// Package opsapi serves the operator routes: health and readiness, the live
// event stream that `switchboard tail` and the dashboard read, and the dead
// letter queue. It calls only the relay's operations, which decide who may
// use them (the operator).
package opsapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

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

// Name is the adapter's name (the hub's adapter contract).
func (s *Server) Name() string { return "ops" }

// Run has no background work; it returns when ctx ends.
func (s *Server) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Mount adds the routes to mux.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", httperr.Handle(s.healthz))
	mux.HandleFunc("GET /readyz", httperr.Handle(s.readyz))
	mux.HandleFunc("GET /v1/events", httperr.Handle(s.events))
	mux.HandleFunc("GET /v1/dlq", httperr.Handle(s.dlq))
	mux.HandleFunc("POST /v1/dlq/{id}/replay", httperr.Handle(s.replay))
}

func caller(r *http.Request) core.Principal { return core.PrincipalFrom(r.Context()) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	httperr.JSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.version})
	return nil
}

// readyz answers 200 only when the store answers. Its 503 says why the
// store does not answer (the database file is gone, say): it is written
// here because httperr.From answers every unavailable store with the same
// words to clients, which would leave the operator's probe saying nothing.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if err := s.relay.Ping(r.Context()); err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(httperr.RetryAfter(httperr.CodeUnavailable)))
		httperr.Write(w, http.StatusServiceUnavailable, httperr.CodeUnavailable, "store not ready: "+err.Error())
		return nil
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"status": "ready"})
	return nil
}

// events streams relay events as server-sent events. Filters: agent (as
// sender or receiver), type, conversation_id.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	ch, cancel, err := s.relay.Tail(caller(r), 1024)
	if err != nil {
		return err
	}
	defer cancel()
	fl, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("streaming unsupported by the response writer")
	}
	q := r.URL.Query()
	agent, typ, conv := q.Get("agent"), q.Get("type"), q.Get("conversation_id")
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
			return nil
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

func (s *Server) dlq(w http.ResponseWriter, r *http.Request) error {
	f := core.DeadLetterFilter{Receiver: r.URL.Query().Get("receiver"), Limit: 100}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 10000 {
			return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "limit must be 1..10000")
		}
		f.Limit = n
	}
	list, err := s.relay.DeadLetters(r.Context(), caller(r), f)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*core.Receipt{}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"dead_letters": list})
	return nil
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request) error {
	p := caller(r)
	if err := core.Authorize(p, core.OpOperator, core.RelNone); err != nil {
		return err // before the query is looked at: nothing for non-operators
	}
	var ttl time.Duration
	if v := r.URL.Query().Get("ttl_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "ttl_ms must be a positive integer")
		}
		ttl = time.Duration(n) * time.Millisecond
	}
	rc, err := s.relay.ReplayAs(r.Context(), p, r.PathValue("id"), ttl)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, rc)
	return nil
}
