package mamp

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// ParticipantView is a conversation participant.
type ParticipantView struct {
	Agent    string    `json:"agent"`
	AgentID  string    `json:"agent_id"`
	TraceID  string    `json:"trace_id,omitempty"`
	JoinedAt time.Time `json:"joined_at"`
}

// ConversationView is GET /mamp/v1/conversations/{id}.
type ConversationView struct {
	ConversationID string            `json:"conversation_id"`
	CreatedAt      time.Time         `json:"created_at"`
	LastMessageAt  time.Time         `json:"last_message_at"`
	MessageCount   int               `json:"message_count"`
	Participants   []ParticipantView `json:"participants"`
	Messages       []*Envelope       `json:"messages,omitempty"`
}

func (s *Server) view(c *core.Conversation) ConversationView {
	v := ConversationView{ConversationID: c.ID, CreatedAt: c.CreatedAt, LastMessageAt: c.LastMessageAt, MessageCount: c.Messages,
		Participants: make([]ParticipantView, 0, len(c.Participants))}
	for _, p := range c.Participants {
		v.Participants = append(v.Participants, ParticipantView{Agent: s.ad.URIOf(p.AgentID), AgentID: p.AgentID, TraceID: p.TraceID, JoinedAt: p.JoinedAt})
	}
	return v
}

// Conversation returns conversation id as GET /mamp/v1/conversations/{id}
// shows it to p, with up to limit of its messages after sequence number
// after. Only a member of the conversation (or the operator) may read it;
// anyone else gets 404 conversation_not_found, as for an unknown one
// (core.Relay.Conversation). The dashboard shows conversations with it.
func (s *Server) Conversation(ctx context.Context, p core.Principal, id string, after int64, limit int) (ConversationView, error) {
	c, err := s.relay.Conversation(ctx, p, id)
	if err != nil {
		return ConversationView{}, noConversation(id, err)
	}
	ms, err := s.relay.ConversationMessages(ctx, p, id, after, limit)
	if err != nil {
		return ConversationView{}, noConversation(id, err)
	}
	v := s.view(c)
	if v.Messages, err = s.envelopes(ms); err != nil {
		return ConversationView{}, err
	}
	return v, nil
}

// Conversations lists, as GET /mamp/v1/conversations shows them, up to
// limit of the conversations agent takes part in, most recent first, to
// the agent itself or the operator; with agent empty every conversation,
// to the operator only (core.Relay.Conversations). The dashboard lists
// conversations with it.
func (s *Server) Conversations(ctx context.Context, p core.Principal, agent string, limit int) ([]ConversationView, error) {
	cs, err := s.relay.Conversations(ctx, p, agent, limit)
	if err != nil {
		if agent == "" {
			return nil, fmt.Errorf("listing every conversation (no ?agent=): %w", err)
		}
		return nil, err
	}
	out := make([]ConversationView, 0, len(cs))
	for _, c := range cs {
		out = append(out, s.view(c))
	}
	return out, nil
}

// conversation is GET /mamp/v1/conversations/{id}.
func (s *Server) conversation(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam(r, "limit", 100, 1000)
	if err != nil {
		return err
	}
	after, err := seqParam("after", r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	v, err := s.Conversation(r.Context(), caller(r), r.PathValue("id"), after, limit)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, v)
	return nil
}

// listConversations is GET /mamp/v1/conversations.
func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) error {
	id, err := s.agentIDParam(r.URL.Query().Get("agent"))
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 100, 1000)
	if err != nil {
		return err
	}
	out, err := s.Conversations(r.Context(), caller(r), id, limit)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"conversations": out})
	return nil
}
