package mamp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// How callback_url is honoured.
//
// A message sent with callback_url opens a callback record (Options.Records
// kind "mamp.callback", keyed by the message id) once the message is
// accepted. Whenever a message correlated to it arrives (correlation_id =
// that message id, from any protocol; the relay accepts such an answer only
// from the message's receiver), the hub sends a copy of the answer through
// the relay to a callback agent registered with a MAMP webhook endpoint at
// callback_url, so the push is durable and retried like any delivery. The
// callback agent's id is an internal id (core.Relay.InternalID of the
// message id and a random key kept in the record): reserved to the hub,
// hidden, and not to be told in advance from anything public. The copy
// carries the answer's content, its conversation_id and correlation_id in
// the envelope, and an id derived from the answer's (keyed, see
// callbackCopyID) so it is sent at most once. The answer itself still goes to its addressee as
// usual. Answers are noticed from the relay's event stream and, for any the
// stream missed (and those that arrived before the record was written), by
// a sweep every CallbackSweep; the record is dropped CallbackTTL after the
// message. The hub acts here as its own actor "mamp-callbacks".
const callbackKind = "mamp.callback"

// callbackRecord is the state of one pending callback.
type callbackRecord struct {
	URL       string    `json:"url"`
	Sender    string    `json:"sender"`
	ExpiresAt time.Time `json:"expires_at"`
	Forwarded []string  `json:"forwarded,omitempty"`
	// Agent is the callback agent's id (empty in records written before
	// it was kept: then CallbackAgentID's).
	Agent string `json:"agent,omitempty"`
}

// agent is the id of the agent that receives the callback's answers.
func (cb *callbackRecord) agent(relay *core.Relay, messageID string) string {
	if cb.Agent != "" {
		return cb.Agent
	}
	return CallbackAgentID(relay, messageID)
}

// CallbackAgentID is the id of the callback agent of message id in
// callback records that keep none (written before the agent's id was
// kept in the record): an internal id of relay's derived from the message
// id alone. New callbacks add a random key (newCallbackAgentID).
func CallbackAgentID(relay *core.Relay, messageID string) string {
	return relay.InternalID("mamp-cb", messageID)
}

// newCallbackAgentID returns a fresh callback agent id for message id:
// keyed with the relay's id key and 128 random bits.
func newCallbackAgentID(relay *core.Relay, messageID string) string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	return relay.InternalID("mamp-cb", messageID, hex.EncodeToString(nonce[:]))
}

// callbackCopyID is the id of the copy of answer id pushed to a callback:
// the same on every instance, and keyed (core.Relay.InternalID), so that
// nobody can take the id first and stop the copy.
func callbackCopyID(relay *core.Relay, answerID string) string {
	_, key, _ := strings.Cut(relay.InternalID("mamp-cb-copy", answerID), ".")
	return "cb-" + key
}

// openCallback opens the callback of message m, accepted from its sender,
// at url; a callback already open for m (a retry of it) stays as it is.
func (s *Server) openCallback(ctx context.Context, m *core.Message, url string) error {
	if s.opt.Records == nil {
		return fmt.Errorf("callback_url: %w", errNoRecords)
	}
	now := s.relay.Clock().Now()
	data, _ := json.Marshal(callbackRecord{URL: url, Sender: m.Sender, ExpiresAt: now.Add(s.opt.CallbackTTL),
		Agent: newCallbackAgentID(s.relay, m.ID)})
	_, err := s.opt.Records.PutRecord(ctx, core.Record{Kind: callbackKind, ID: m.ID, Index: "open", Data: data, UpdatedAt: now})
	if errors.Is(err, core.ErrConflict) {
		return nil // opened by an earlier attempt of the same message
	}
	if err != nil {
		return fmt.Errorf("open callback: %w", err)
	}
	return nil
}

// closeCallback drops an expired callback: its record and its callback
// agent (the copies sent to it expired with the callback: their TTL ends
// at its ExpiresAt), so the agent table does not keep one per message.
func (s *Server) closeCallback(ctx context.Context, id string, cb *callbackRecord) {
	if err := s.relay.DeregisterAs(ctx, callbacksActor, cb.agent(s.relay, id)); err != nil && !errors.Is(err, core.ErrNotFound) {
		s.log.Warn("drop callback agent", "message", id, "err", err)
	}
	if err := s.opt.Records.DeleteRecord(ctx, callbackKind, id); err != nil && !errors.Is(err, core.ErrNotFound) {
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
	recs, err := s.opt.Records.ListRecordsAfter(ctx, callbackKind, "open", after, sweepPage)
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

// forwardFor forwards the answers to message id not forwarded yet to the
// message's callback URL, if it has one; answerID, when set, is the answer
// that prompted it: if it was forwarded already there is nothing to do.
// The answers are read through the relay (core.Relay.ResultsFor), which
// holds only those of the message's receiver.
func (s *Server) forwardFor(ctx context.Context, id, answerID string) error {
	rec, err := s.opt.Records.GetRecord(ctx, callbackKind, id)
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
		s.closeCallback(ctx, id, &cb)
		return nil
	}
	if answerID != "" && slices.Contains(cb.Forwarded, answerID) {
		return nil
	}
	answers, err := s.relay.ResultsFor(ctx, callbacksActor, id, 0, 100)
	if errors.Is(err, core.ErrNotFound) {
		return nil // the message is gone (purged): the record expires
	}
	if err != nil {
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
	if _, err := s.opt.Records.PutRecord(ctx, rec); err != nil && !errors.Is(err, core.ErrConflict) {
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
	agent := &core.Agent{ID: cb.agent(s.relay, id), Card: core.Card{Name: "callback for message " + id, Description: "receives answers at the message's callback_url"},
		Capabilities: []string{}, Endpoint: core.Endpoint{Kind: core.EndpointMAMP, URL: cb.URL}, Protocol: "mamp"}
	if _, _, err := s.relay.RegisterAs(ctx, callbacksActor, agent, lease); err != nil {
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
	cp := &core.Message{ID: callbackCopyID(s.relay, a.ID), Sender: a.Sender, Receiver: agent.ID, Type: a.Type, Parts: a.Parts,
		Metadata: meta, Protocol: a.Protocol, TTL: min(lease, s.relay.Config().MaxTTL), TraceParent: a.TraceParent}
	if _, err := s.relay.SendAs(ctx, callbacksActor, cp); err != nil {
		return fmt.Errorf("send callback copy of %s: %w", a.ID, err)
	}
	return nil
}
