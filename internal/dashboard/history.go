package dashboard

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// MessageView is one stored message in GET /dashboard/api/messages.
type MessageView struct {
	Seq            int64       `json:"seq"`
	MessageID      string      `json:"message_id"`
	Sender         string      `json:"sender"`
	Receiver       string      `json:"receiver"`
	Type           string      `json:"type"`
	Protocol       string      `json:"protocol,omitempty"`
	ConversationID string      `json:"conversation_id,omitempty"`
	CorrelationID  string      `json:"correlation_id,omitempty"`
	Status         core.Status `json:"status"`
	Attempts       int         `json:"attempts"`
	Code           int         `json:"code,omitempty"`
	LastError      string      `json:"last_error,omitempty"`
	ReceivedAt     time.Time   `json:"received_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
	// Preview is the start of the message's text parts.
	Preview string `json:"preview,omitempty"`
}

const maxPreview = 160

func viewOf(sm core.StoredMessage) MessageView {
	m, r := sm.Message, sm.Receipt
	v := MessageView{Seq: m.Seq, MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Type: m.Type, Protocol: m.Protocol,
		ConversationID: m.ConversationID, CorrelationID: m.CorrelationID, Status: r.Status, Attempts: r.Attempts, Code: r.Code,
		LastError: r.LastError, ReceivedAt: m.ReceivedAt, UpdatedAt: r.UpdatedAt}
	for _, p := range m.Parts {
		if p.Kind == core.PartText || p.Kind == core.PartCode {
			if v.Preview != "" {
				v.Preview += " "
			}
			v.Preview += p.Text
		}
	}
	if r := []rune(v.Preview); len(r) > maxPreview {
		v.Preview = string(r[:maxPreview]) + "…"
	}
	return v
}

// messages serves GET /dashboard/api/messages: the stored messages, newest
// first, filtered (q, agent, sender, receiver, status, protocol,
// conversation_id) and paged (limit, before: the next_before of the
// previous page).
func (d *Dashboard) messages(w http.ResponseWriter, r *http.Request) error {
	qv := r.URL.Query()
	q := core.MessageQuery{Text: qv.Get("q"), Agent: qv.Get("agent"), Sender: qv.Get("sender"), Receiver: qv.Get("receiver"),
		Status: core.Status(qv.Get("status")), Protocol: qv.Get("protocol"), ConversationID: qv.Get("conversation_id")}
	switch q.Status {
	case "", core.StatusQueued, core.StatusDelivered, core.StatusRejected, core.StatusTimeout, core.StatusExpired:
	default: // unreachable messages are never stored
		return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField,
			"status must be queued, delivered, rejected, timeout or expired")
	}
	for name, dst := range map[string]*int64{"before": &q.BeforeSeq} {
		if v := qv.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "%s must be a message sequence number", name)
			}
			*dst = n
		}
	}
	if v := qv.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 500 {
			return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "limit must be 1..500")
		}
		q.Limit = n
	}
	q = q.Normalized()
	// One more than the page tells whether there is a next one.
	q.Limit++
	found, err := d.relay.SearchMessages(r.Context(), auth.From(r.Context()), q)
	if errors.Is(err, core.ErrSearchUnsupported) {
		return httperr.New(http.StatusNotImplemented, httperr.CodeInternal, "%s", err.Error())
	}
	if err != nil {
		return err
	}
	more := len(found) == q.Limit
	if more {
		found = found[:q.Limit-1]
	}
	out := make([]MessageView, 0, len(found))
	for _, sm := range found {
		out = append(out, viewOf(sm))
	}
	resp := map[string]any{"messages": out, "more": more}
	if more && len(out) > 0 {
		resp["next_before"] = out[len(out)-1].Seq
	}
	httperr.JSON(w, http.StatusOK, resp)
	return nil
}

// agentDetail serves GET /dashboard/api/agents/{id}: the agent, its queue,
// its latest messages and its dead letters.
func (d *Dashboard) agentDetail(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p := auth.From(r.Context())
	a, err := d.relay.LookupAgent(r.Context(), p, id)
	if err != nil {
		return err
	}
	now := d.relay.Clock().Now()
	v := AgentView{ID: a.ID, URI: d.relay.URI(a.ID), Status: "expired", Protocol: a.Protocol, Endpoint: a.Endpoint.Kind,
		Capabilities: a.Capabilities, Card: a.Card, LastSeen: a.LastSeen, ExpiresAt: a.ExpiresAt, RegisteredAt: a.RegisteredAt}
	if v.Capabilities == nil {
		v.Capabilities = []string{}
	}
	if a.Alive(now) {
		v.Status = "alive"
	}
	if v.Queued, err = d.relay.QueueDepth(r.Context(), p, a.ID); err != nil {
		return err
	}
	recent := []MessageView{}
	found, err := d.relay.SearchMessages(r.Context(), p, core.MessageQuery{Agent: id, Limit: 20})
	if err != nil && !errors.Is(err, core.ErrSearchUnsupported) {
		return err
	}
	for _, sm := range found {
		recent = append(recent, viewOf(sm))
	}
	dead, err := d.relay.DeadLetters(r.Context(), p, core.DeadLetterFilter{Receiver: id, Limit: 20})
	if err != nil {
		return err
	}
	if dead == nil {
		dead = []*core.Receipt{}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agent": v, "messages": recent, "dead_letters": dead, "endpoint_url": a.Endpoint.URL})
	return nil
}
