package mamp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
)

// StatusEvent is the data of a "status" event on a conversation stream: a
// message of the conversation reached a delivery status.
type StatusEvent struct {
	MessageID string      `json:"message_id"`
	Status    core.Status `json:"status"`
	Attempts  int         `json:"attempts,omitempty"`
	Code      int         `json:"code,omitempty"`
}

// streamPage is how many messages a stream reads at a time.
const streamPage = 100

// stream serves a conversation as server-sent events: first the messages
// already stored, then new ones as they are accepted, each as an event
// "message" whose data is the MAMP envelope and whose id is the hub's
// sequence number (a reconnecting client sends it back in Last-Event-ID, or
// passes ?after=, to resume). Delivery outcomes of the conversation's
// messages follow as "status" events. Live events only wake the stream; the
// store is the source of truth, so no message is lost to a slow reader.
//
// Only a member of the conversation (or the operator) may subscribe, and
// every read the stream makes asks the relay again: a stream whose
// caller's identity ends, ends. A caller holds at most Options.MaxStreams
// streams on this instance; one more ends its oldest, which is told so in
// a comment line.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p := caller(r)
	ctx := r.Context()
	if _, err := s.relay.Conversation(ctx, p, id); err != nil {
		return noConversation(id, err)
	}
	after, err := seqParam("Last-Event-ID / after", r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("streaming unsupported by the response writer")
	}
	key := auth.CallerKey(r)
	slot := s.streams.take(key)
	defer s.streams.release(key, slot)
	// Subscribe before the first read so nothing falls between them.
	events, cancel := s.relay.Events().Subscribe(256)
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": conversation %s\n\n", id)
	fl.Flush()

	catchUp := func() error {
		for {
			ms, err := s.relay.ConversationMessages(ctx, p, id, after, streamPage)
			if err != nil {
				return err
			}
			for _, m := range ms {
				env, err := ToEnvelope(s.ad, m)
				if err != nil {
					return err
				}
				b, _ := json.Marshal(env)
				if _, err := fmt.Fprintf(w, "id: %d\nevent: message\ndata: %s\n\n", m.Seq, b); err != nil {
					return err
				}
				after = m.Seq
			}
			fl.Flush()
			if len(ms) < streamPage {
				return nil
			}
		}
	}
	if err := catchUp(); err != nil {
		s.log.Debug("conversation stream", "conversation", id, "err", err)
		return nil // the answer has begun: the stream just ends
	}
	poll := time.NewTicker(s.opt.StreamPoll)
	defer poll.Stop()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-slot.ended:
			fmt.Fprint(w, ": closed: a newer stream of this caller took its place\n\n")
			fl.Flush()
			return nil
		case ev := <-events:
			if ev.ConversationID != id {
				continue
			}
			switch ev.Type {
			case core.EventAccepted:
				err = catchUp()
			case core.EventDelivered, core.EventRejected, core.EventTimeout:
				b, _ := json.Marshal(StatusEvent{MessageID: ev.MessageID, Status: ev.Status, Attempts: ev.Attempts, Code: ev.Code})
				if _, err = fmt.Fprintf(w, "event: status\ndata: %s\n\n", b); err == nil {
					fl.Flush()
				}
			}
		case <-poll.C:
			err = catchUp()
		case <-keep.C:
			if _, err = fmt.Fprint(w, ": keep-alive\n\n"); err == nil {
				fl.Flush()
			}
		}
		if err != nil {
			s.log.Debug("conversation stream", "conversation", id, "err", err)
			return nil
		}
	}
}
