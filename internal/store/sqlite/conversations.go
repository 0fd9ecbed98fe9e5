package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// CreateConversation implements core.Store.
func (s *Store) CreateConversation(ctx context.Context, c *core.Conversation) error {
	if err := core.CheckStorableConversation(c); err != nil {
		return err
	}
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO conversations(id, created_at, last_message_at, messages) VALUES (?,?,?,0)",
			c.ID, ts(c.CreatedAt), ts(c.CreatedAt))
		if err != nil {
			return fmt.Errorf("sqlite: create conversation: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("conversation %q: %w", c.ID, core.ErrConflict)
		}
		for _, p := range c.Participants {
			if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO participants(conversation_id, agent_id, trace_id, joined_at) VALUES (?,?,?,?)",
				c.ID, p.AgentID, p.TraceID, ts(c.CreatedAt)); err != nil {
				return fmt.Errorf("sqlite: create conversation: %w", err)
			}
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
	return s.write(ctx, func(tx *wtx) error {
		var one int
		err := tx.QueryRowContext(ctx, "SELECT 1 FROM conversations WHERE id = ?", conversationID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("conversation %q: %w", conversationID, core.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: set trace id: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO participants(conversation_id, agent_id, trace_id, joined_at) VALUES (?,?,?,?)
			ON CONFLICT(conversation_id, agent_id) DO UPDATE SET trace_id = excluded.trace_id`,
			conversationID, agentID, traceID, ts(now)); err != nil {
			return fmt.Errorf("sqlite: set trace id: %w", err)
		}
		return nil
	})
}

func (s *Store) participants(ctx context.Context, c *core.Conversation) error {
	rows, err := s.read(ctx, "SELECT agent_id, trace_id, joined_at FROM participants WHERE conversation_id = ? ORDER BY joined_at, agent_id", c.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	c.Participants = c.Participants[:0]
	for rows.Next() {
		var p core.Participant
		var at int64
		if err := rows.Scan(&p.AgentID, &p.TraceID, &at); err != nil {
			return err
		}
		p.JoinedAt = tm(at)
		c.Participants = append(c.Participants, p)
	}
	return rows.Err()
}

func scanConversation(sc interface{ Scan(...any) error }) (*core.Conversation, error) {
	var c core.Conversation
	var created, last int64
	if err := sc.Scan(&c.ID, &created, &last, &c.Messages); err != nil {
		return nil, err
	}
	c.CreatedAt, c.LastMessageAt = tm(created), tm(last)
	return &c, nil
}

// GetConversation implements core.Store.
func (s *Store) GetConversation(ctx context.Context, id string) (*core.Conversation, error) {
	c, err := scanConversation(s.readRow(ctx, "SELECT id, created_at, last_message_at, messages FROM conversations WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("conversation %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get conversation: %w", err)
	}
	if err := s.participants(ctx, c); err != nil {
		return nil, fmt.Errorf("sqlite: get conversation: %w", err)
	}
	return c, nil
}

// ListConversations implements core.Store.
func (s *Store) ListConversations(ctx context.Context, agentID string, limit int) ([]*core.Conversation, error) {
	q := "SELECT id, created_at, last_message_at, messages FROM conversations"
	args := []any{}
	if agentID != "" {
		q += " WHERE id IN (SELECT conversation_id FROM participants WHERE agent_id = ?)"
		args = append(args, agentID)
	}
	q += " ORDER BY last_message_at DESC, id LIMIT ?"
	args = append(args, lim(limit))
	rows, err := s.read(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list conversations: %w", err)
	}
	var out []*core.Conversation
	for rows.Next() {
		c, err := scanConversation(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: list conversations: %w", err)
		}
		out = append(out, c)
	}
	rows.Close()
	for _, c := range out {
		if err := s.participants(ctx, c); err != nil {
			return nil, fmt.Errorf("sqlite: list conversations: %w", err)
		}
	}
	return out, nil
}

// ConversationMessages implements core.Store.
func (s *Store) ConversationMessages(ctx context.Context, conversationID string, afterSeq int64, limit int) ([]*core.Message, error) {
	ms, err := scanMessages(s.read(ctx, "SELECT "+messageCols+" FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?",
		conversationID, afterSeq, lim(limit)))
	if err != nil {
		return nil, fmt.Errorf("sqlite: conversation messages: %w", err)
	}
	return ms, nil
}
