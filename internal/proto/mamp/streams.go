package mamp

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// streamBound counts the conversation streams each caller (an agent's
// credential, the operator, or in --dev a client address) holds open on
// this instance: each holds a connection, a goroutine and an event
// subscription, and polls the store, so without a bound one agent could
// hold any number. The bound is the relay's MaxStreams (--max-streams).
type streamBound struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes a place for a stream of caller, false at max (max < 1: no
// bound).
func (b *streamBound) acquire(caller string, max int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if max > 0 && b.open[caller] >= max {
		return false
	}
	if b.open == nil {
		b.open = map[string]int{}
	}
	b.open[caller]++
	return true
}

func (b *streamBound) release(caller string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[caller]--; b.open[caller] <= 0 {
		delete(b.open, caller)
	}
}

// boundStream takes a stream place for r's caller, or answers 429
// too_many_streams with Retry-After and returns nil.
func (s *Server) boundStream(w http.ResponseWriter, r *http.Request) (release func()) {
	caller := auth.CallerKey(r)
	max := s.relay.Config().MaxStreams
	if !s.streams.acquire(caller, max) {
		w.Header().Set("Retry-After", "5")
		httperr.Write(w, http.StatusTooManyRequests, httperr.CodeTooManyStreams,
			"this caller holds "+strconv.Itoa(max)+" conversation streams on this hub, as many as it may (--max-streams); close one")
		return nil
	}
	return func() { s.streams.release(caller) }
}
