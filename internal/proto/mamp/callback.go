package mamp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// How callback_url is honoured.
//
// A message sent with callback_url opens a callback record (RecordStore
// kind "mamp.callback", keyed by the message id). Whenever a message
// correlated to it arrives (correlation_id = that message id, from any
// protocol), the hub sends a copy of the answer through the relay to a
// callback agent, mamp-cb.<hash of the message id>, registered with a MAMP
// webhook endpoint at callback_url; so the push is durable and retried like
// any delivery. The copy carries the answer's content, its conversation_id
// and correlation_id in the envelope, and a deterministic id (cb-<hash of
// the answer id>) so it is sent at most once. The answer itself still goes
// to its addressee as usual. Answers are noticed from the relay's event
// stream and, for any the stream missed, by a sweep every CallbackSweep;
// the record is dropped CallbackTTL after the message.
const callbackKind = "mamp.callback"

// callbackRecord is the state of one pending callback.
type callbackRecord struct {
	URL       string    `json:"url"`
	Sender    string    `json:"sender"`
	ExpiresAt time.Time `json:"expires_at"`
	Forwarded []string  `json:"forwarded,omitempty"`
}

// CallbackAgentID is the id of the agent that receives the answers to
// message id at its callback_url: an internal id of relay's (reserved to
// the hub, keyed, hidden from listings).
func CallbackAgentID(relay *core.Relay, messageID string) string {
	return relay.InternalID("mamp-cb", messageID)
}

// callbackCopyID is the id of the copy of answer id pushed to a callback.
func callbackCopyID(answerID string) string { return "cb-" + hash(answerID)[:40] }

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (s *Server) openCallback(ctx context.Context, m *core.Message, url string) error {
	data, _ := json.Marshal(callbackRecord{URL: url, Sender: m.Sender, ExpiresAt: s.relay.Clock().Now().Add(s.opt.CallbackTTL)})
	_, err := s.relay.Store().PutRecord(ctx, core.Record{Kind: callbackKind, ID: m.ID, Index: "open", Data: data, UpdatedAt: s.relay.Clock().Now()})
	if errors.Is(err, core.ErrConflict) {
		return nil // a concurrent repeat of the same message opened it
	}
	if err != nil {
		return fmt.Errorf("open callback: %w", err)
	}
	return nil
}

// closeCallback drops an expired callback: its record and its callback
// agent (the copies sent to it expired with the callback: their TTL ends
// at its ExpiresAt), so the agent table does not keep one per message.
func (s *Server) closeCallback(ctx context.Context, id string) {
	if err := s.relay.Deregister(ctx, CallbackAgentID(s.relay, id)); err != nil && !errors.Is(err, core.ErrNotFound) {
		s.log.Warn("drop callback agent", "message", id, "err", err)
	}
	if err := s.relay.Store().DeleteRecord(ctx, callbackKind, id); err != nil && !errors.Is(err, core.ErrNotFound) {
		s.log.Warn("drop callback record", "message", id, "err", err)
	}
}

// runCallbacks forwards answers to callback URLs until ctx ends.
func (s *Server) runCallbacks(ctx context.Context, events <-chan core.Event) {
	t := time.NewTicker(s.opt.CallbackSweep)
	defer t.Stop()
	var swept string // the last callback the sweeps checked
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if ev.Type != core.EventAccepted || ev.CorrelationID == "" {
				continue
			}
			if err := s.forwardFor(ctx, ev.CorrelationID, ev.MessageID); err != nil && ctx.Err() == nil {
				s.log.Warn("callback forward", "message", ev.CorrelationID, "answer", ev.MessageID, "err", err)
			}
		case <-t.C:
			var err error
			if swept, err = s.sweepCallbacks(ctx, swept); err != nil && ctx.Err() == nil {
				s.log.Warn("callback sweep", "err", err)
			}
		}
	}
}

// sweepPage is how many open callbacks one sweep checks.
const sweepPage = 1000

// sweepCallbacks checks the open callbacks after the one named after (in
// id order, sweepPage of them), forwarding answers not forwarded yet and
// dropping expired callbacks, and returns where the next sweep goes on
// ("" to start over), so that sweeps go round every open callback however
// many there are. A callback whose forward fails is logged and passed
// over: it is tried again on the next round.
func (s *Server) sweepCallbacks(ctx context.Context, after string) (string, error) {
	recs, err := s.relay.Store().ListRecordsAfter(ctx, callbackKind, "open", after, sweepPage)
	if err != nil {
		return after, err
	}
	for _, rec := range recs {
		if err := s.forwardFor(ctx, rec.ID, ""); err != nil && ctx.Err() == nil {
			s.log.Warn("callback sweep", "message", rec.ID, "err", err)
		}
	}
	if len(recs) < sweepPage {
		return "", nil
	}
	return recs[len(recs)-1].ID, nil
}

// forwardFor forwards the answers to message id (only answerID when it is
// set) to the message's callback URL, if it has one.
func (s *Server) forwardFor(ctx context.Context, id, answerID string) error {
	st := s.relay.Store()
	rec, err := st.GetRecord(ctx, callbackKind, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var cb callbackRecord
	if err := json.Unmarshal(rec.Data, &cb); err != nil {
		return fmt.Errorf("callback record %s: %w", id, err)
	}
	now := s.relay.Clock().Now()
	if !now.Before(cb.ExpiresAt) {
		s.closeCallback(ctx, id)
		return nil
	}
	var answers []*core.Message
	if answerID != "" {
		if slices.Contains(cb.Forwarded, answerID) {
			return nil
		}
		m, err := st.GetMessage(ctx, answerID)
		if err != nil {
			return err
		}
		answers = []*core.Message{m}
	} else if answers, err = st.Results(ctx, id, 100); err != nil {
		return err
	}
	var sent []string
	for _, a := range answers {
		if slices.Contains(cb.Forwarded, a.ID) {
			continue
		}
		if err := s.forward(ctx, id, &cb, a, now); err != nil {
			return err
		}
		sent = append(sent, a.ID)
	}
	if len(sent) == 0 {
		return nil
	}
	cb.Forwarded = append(cb.Forwarded, sent...)
	rec.Data, _ = json.Marshal(cb)
	rec.UpdatedAt = now
	if _, err := st.PutRecord(ctx, rec); err != nil && !errors.Is(err, core.ErrConflict) {
		return err // on conflict another pass recorded it; copies are idempotent anyway
	}
	return nil
}

// forward sends a copy of answer a to the callback agent of message id.
func (s *Server) forward(ctx context.Context, id string, cb *callbackRecord, a *core.Message, now time.Time) error {
	lease := cb.ExpiresAt.Sub(now)
	if max := s.relay.Config().MaxLease; lease > max {
		lease = max
	}
	if lease < time.Second {
		lease = time.Second
	}
	agent := &core.Agent{ID: CallbackAgentID(s.relay, id), Card: core.Card{Name: "callback for message " + id, Description: "receives answers at the message's callback_url"},
		Capabilities: []string{}, Endpoint: core.Endpoint{Kind: core.EndpointMAMP, URL: cb.URL}, Protocol: "mamp"}
	if _, _, err := s.relay.Register(ctx, agent, lease); err != nil {
		return fmt.Errorf("register callback agent: %w", err)
	}
	meta := maps.Clone(a.Metadata)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[metaCallbackCorrelation] = a.CorrelationID
	if a.ConversationID != "" {
		meta[metaCallbackConversation] = a.ConversationID
	}
	cp := &core.Message{ID: callbackCopyID(a.ID), Sender: a.Sender, Receiver: agent.ID, Type: a.Type, Parts: a.Parts,
		Metadata: meta, Protocol: a.Protocol, TTL: min(lease, s.relay.Config().MaxTTL), TraceParent: a.TraceParent}
	if _, err := s.relay.Send(ctx, cp); err != nil {
		return fmt.Errorf("send callback copy of %s: %w", a.ID, err)
	}
	return nil
}
