package sqlite

import (
	"context"
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// SearchMessages implements core.MessageSearcher: newest first, paged by
// seq. A text search reads the messages' bodies: it scans the table from
// the page's start until it has a page.
func (s *Store) SearchMessages(ctx context.Context, q core.MessageQuery) ([]core.StoredMessage, error) {
	q = q.Normalized()
	where, args := "1 = 1", []any{}
	add := func(cond string, a ...any) { where += " AND " + cond; args = append(args, a...) }
	if q.BeforeSeq > 0 {
		add("seq < ?", q.BeforeSeq)
	}
	if q.Agent != "" {
		add("(sender = ? OR receiver = ?)", q.Agent, q.Agent)
	}
	if q.Sender != "" {
		add("sender = ?", q.Sender)
	}
	if q.Receiver != "" {
		add("receiver = ?", q.Receiver)
	}
	if q.Status != "" {
		add("status = ?", string(q.Status))
	}
	if q.ConversationID != "" {
		add("conversation_id = ?", q.ConversationID)
	}
	if q.Protocol != "" {
		add("instr(CAST(body AS TEXT), ?) > 0", `"protocol":"`+q.Protocol+`"`)
	}
	if q.Text != "" {
		add("(instr(id, ?) > 0 OR instr(sender, ?) > 0 OR instr(receiver, ?) > 0 OR instr(CAST(body AS TEXT), ?) > 0)", q.Text, q.Text, q.Text, q.Text)
	}
	rows, err := s.read(ctx, "SELECT "+receiptCols+" FROM messages WHERE "+where+" ORDER BY seq DESC LIMIT ?", append(args, q.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: search messages: %w", err)
	}
	var rcs []*core.Receipt
	for rows.Next() {
		r, err := scanReceipt(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: search messages: %w", err)
		}
		rcs = append(rcs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: search messages: %w", err)
	}
	out := make([]core.StoredMessage, 0, len(rcs))
	for _, r := range rcs {
		m, err := s.GetMessage(ctx, r.MessageID)
		if err != nil {
			continue // purged meanwhile
		}
		out = append(out, core.StoredMessage{Message: m, Receipt: r})
	}
	return out, nil
}
