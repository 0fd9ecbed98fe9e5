package mamp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// StatusEvent is the data of a "status" event on a conversation stream: a
// message of the conversation reached a delivery status.
type StatusEvent struct {
	MessageID string      `json:"message_id"`
	Status    core.Status `json:"status"`
	Attempts  int         `json:"attempts,omitempty"`
	Code      int         `json:"code,omitempty"`
}

// stream serves a conversation as server-sent events: first the messages
// already stored, then new ones as they are accepted, each as an event
// "message" whose data is the MAMP envelope and whose id is the hub's
// sequence number (a reconnecting client sends it back in Last-Event-ID, or
// passes ?after=, to resume). Delivery outcomes of the conversation's
// messages follow as "status" events. Live events only wake the stream; the
// store is the source of truth, so no message is lost to a slow reader.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	c, err := s.getConversation(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	var after int64
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, "Last-Event-ID / after must be a non-negative sequence number")
			return
		}
		break
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		httperr.Write(w, http.StatusInternalServerError, httperr.CodeInternal, "streaming unsupported")
		return
	}
	release := s.boundStream(w, r)
	if release == nil {
		return
	}
	defer release()
	// Subscribe before the first read so nothing falls between them.
	events, cancel := s.relay.Events().Subscribe(256)
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": conversation %s\n\n", c.ID)
	fl.Flush()

	ctx := r.Context()
	catchUp := func() error {
		for {
			ms, err := s.relay.Store().ConversationMessages(ctx, c.ID, after, 100)
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
			if len(ms) < 100 {
				return nil
			}
		}
	}
	if err := catchUp(); err != nil {
		s.log.Debug("conversation stream", "conversation", c.ID, "err", err)
		return
	}
	poll := time.NewTicker(s.opt.StreamPoll)
	defer poll.Stop()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if ev.ConversationID != c.ID {
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
			s.log.Debug("conversation stream", "conversation", c.ID, "err", err)
			return
		}
	}
}
