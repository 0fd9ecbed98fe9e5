package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// CreateConversation implements core.Store.
func (s *Store) CreateConversation(ctx context.Context, c *core.Conversation) error {
	if err := core.CheckStorableConversation(c); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO conversations (id, created_at, last_message_at, messages) VALUES ($1, $2, $2, 0)
			ON CONFLICT (id) DO NOTHING`, c.ID, c.CreatedAt)
		if err != nil {
			return wrap("create conversation", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("conversation %q: %w", c.ID, core.ErrConflict)
		}
		if len(c.Participants) == 0 {
			return nil
		}
		agents := make([]string, len(c.Participants))
		traces := make([]string, len(c.Participants))
		for i, p := range c.Participants {
			agents[i], traces[i] = p.AgentID, p.TraceID
		}
		if _, err := tx.Exec(ctx, `INSERT INTO participants (conversation_id, agent_id, trace_id, joined_at)
			SELECT $1, a, t, $2 FROM unnest($3::text[], $4::text[]) AS p(a, t)
			ON CONFLICT (conversation_id, agent_id) DO UPDATE SET trace_id = excluded.trace_id`,
			c.ID, c.CreatedAt, agents, traces); err != nil {
			return wrap("create conversation", err)
		}
		return nil
	})
}

// SetTraceID implements core.Store.
func (s *Store) SetTraceID(ctx context.Context, conversationID, agentID, traceID string, now time.Time) error {
	if err := core.CheckStorableConversation(&core.Conversation{ID: conversationID,
		Participants: []core.Participant{{AgentID: agentID, TraceID: traceID}}}); err != nil {
		return err
	}
	// The insert selects from conversations, so an unknown conversation
	// inserts nothing and is reported as not found.
	tag, err := s.pool.Exec(ctx, `INSERT INTO participants (conversation_id, agent_id, trace_id, joined_at)
		SELECT id, $2, $3, $4 FROM conversations WHERE id = $1
		ON CONFLICT (conversation_id, agent_id) DO UPDATE SET trace_id = excluded.trace_id`,
		conversationID, agentID, traceID, now)
	if err != nil {
		return wrap("set trace id", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("conversation %q: %w", conversationID, core.ErrNotFound)
	}
	return nil
}

// conversationSQL reads conversations with their participants (ordered by
// join time) in one query.
const conversationSQL = `SELECT c.id, c.created_at, c.last_message_at, c.messages,
	COALESCE(array_agg(p.agent_id ORDER BY p.joined_at, p.agent_id) FILTER (WHERE p.agent_id IS NOT NULL), '{}'),
	COALESCE(array_agg(p.trace_id ORDER BY p.joined_at, p.agent_id) FILTER (WHERE p.agent_id IS NOT NULL), '{}'),
	COALESCE(array_agg(p.joined_at ORDER BY p.joined_at, p.agent_id) FILTER (WHERE p.agent_id IS NOT NULL), '{}')
FROM conversations c LEFT JOIN participants p ON p.conversation_id = c.id`

func scanConversation(row pgx.Row) (*core.Conversation, error) {
	var c core.Conversation
	var created, last time.Time
	var agents, traces []string
	var joined []time.Time
	if err := row.Scan(&c.ID, &created, &last, &c.Messages, &agents, &traces, &joined); err != nil {
		return nil, err
	}
	c.CreatedAt, c.LastMessageAt = utc(created), utc(last)
	c.Participants = make([]core.Participant, len(agents))
	for i := range agents {
		c.Participants[i] = core.Participant{AgentID: agents[i], TraceID: traces[i], JoinedAt: utc(joined[i])}
	}
	return &c, nil
}

// GetConversation implements core.Store.
func (s *Store) GetConversation(ctx context.Context, id string) (*core.Conversation, error) {
	if !core.Storable(id) {
		return nil, fmt.Errorf("conversation %q: %w", id, core.ErrNotFound)
	}
	c, err := scanConversation(s.pool.QueryRow(ctx, conversationSQL+" WHERE c.id = $1 GROUP BY c.id", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("conversation %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get conversation", err)
	}
	return c, nil
}

// ListConversations implements core.Store.
func (s *Store) ListConversations(ctx context.Context, agentID string, limit int) ([]*core.Conversation, error) {
	if !core.Storable(agentID) {
		return nil, nil
	}
	q := conversationSQL
	args := []any{lim(limit)}
	if agentID != "" {
		q += " WHERE c.id IN (SELECT conversation_id FROM participants WHERE agent_id = $2)"
		args = append(args, agentID)
	}
	q += " GROUP BY c.id ORDER BY c.last_message_at DESC, c.id LIMIT $1"
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, wrap("list conversations", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*core.Conversation, error) { return scanConversation(r) })
	if err != nil {
		return nil, wrap("list conversations", err)
	}
	return out, nil
}

// ConversationMessages implements core.Store.
func (s *Store) ConversationMessages(ctx context.Context, conversationID string, afterSeq int64, limit int) ([]*core.Message, error) {
	if !core.Storable(conversationID) {
		return nil, nil
	}
	ms, err := collectMessages(s.pool.Query(ctx, "SELECT "+messageCols+" FROM messages WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
		conversationID, afterSeq, lim(limit)))
	if err != nil {
		return nil, wrap("conversation messages", err)
	}
	return ms, nil
}
