package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// SearchMessages implements core.MessageSearcher: newest first, paged by
// seq. A text search reads the messages' bodies: it scans the table from
// the page's start until it has a page.
func (s *Store) SearchMessages(ctx context.Context, q core.MessageQuery) ([]core.StoredMessage, error) {
	q = q.Normalized()
	where, args := "true", []any{}
	add := func(cond string, a any) {
		args = append(args, a)
		where += " AND " + fmt.Sprintf(cond, "$"+strconv.Itoa(len(args)))
	}
	if q.BeforeSeq > 0 {
		add("seq < %s", q.BeforeSeq)
	}
	if q.Agent != "" {
		add("(sender = %[1]s OR receiver = %[1]s)", q.Agent)
	}
	if q.Sender != "" {
		add("sender = %s", q.Sender)
	}
	if q.Receiver != "" {
		add("receiver = %s", q.Receiver)
	}
	if q.Status != "" {
		add("status = %s", string(q.Status))
	}
	if q.ConversationID != "" {
		add("conversation_id = %s", q.ConversationID)
	}
	if q.Protocol != "" {
		add("position(%s in convert_from(body, 'UTF8')) > 0", `"protocol":"`+q.Protocol+`"`)
	}
	if q.Text != "" {
		add("(position(%[1]s in id) > 0 OR position(%[1]s in sender) > 0 OR position(%[1]s in receiver) > 0 OR position(%[1]s in convert_from(body, 'UTF8')) > 0)", q.Text)
	}
	args = append(args, q.Limit)
	rcs, err := collectReceipts(s.pool.Query(ctx, "SELECT "+receiptCols("")+" FROM messages WHERE "+where+" ORDER BY seq DESC LIMIT $"+strconv.Itoa(len(args)), args...))
	if err != nil {
		return nil, fmt.Errorf("postgres: search messages: %w", err)
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
