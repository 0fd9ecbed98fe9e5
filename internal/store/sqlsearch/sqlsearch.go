// Package sqlsearch is the message search (core.MessageSearcher) that the
// SQL store backends share: the query a core.MessageQuery asks for, written
// once for every SQL dialect, and the page of messages its receipts name.
// Each backend says only how its SQL differs (Dialect) and runs the query.
package sqlsearch

import (
	"context"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Dialect is what differs between the SQL backends in a message search.
type Dialect struct {
	// Param is the placeholder of the nth argument (from 1), which may
	// stand more than once in a query: "?1" (SQLite), "$1" (PostgreSQL).
	Param func(n int) string
	// Contains is the condition that text needle occurs in text haystack,
	// both SQL expressions.
	Contains func(haystack, needle string) string
	// BodyText is the messages table's body as text.
	BodyText string
}

// Query is the SELECT of the receipt columns cols (a list of the messages
// table's columns) of the messages q selects, newest first, at most
// q.Limit of them, and its arguments. Call it with q normalized
// (core.MessageQuery.Normalized).
func Query(q core.MessageQuery, cols string, d Dialect) (string, []any) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return d.Param(len(args))
	}
	if q.BeforeSeq > 0 {
		where = append(where, "seq < "+arg(q.BeforeSeq))
	}
	if q.Agent != "" {
		p := arg(q.Agent)
		where = append(where, "(sender = "+p+" OR receiver = "+p+")")
	}
	if q.Sender != "" {
		where = append(where, "sender = "+arg(q.Sender))
	}
	if q.Receiver != "" {
		where = append(where, "receiver = "+arg(q.Receiver))
	}
	if q.Status != "" {
		where = append(where, "status = "+arg(string(q.Status)))
	}
	if q.ConversationID != "" {
		where = append(where, "conversation_id = "+arg(q.ConversationID))
	}
	if q.Protocol != "" {
		where = append(where, d.Contains(d.BodyText, arg(`"protocol":"`+q.Protocol+`"`)))
	}
	if q.Text != "" {
		p := arg(q.Text)
		where = append(where, "("+d.Contains("id", p)+" OR "+d.Contains("sender", p)+" OR "+
			d.Contains("receiver", p)+" OR "+d.Contains(d.BodyText, p)+")")
	}
	sql := "SELECT " + cols + " FROM messages"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	return sql + " ORDER BY seq DESC LIMIT " + arg(q.Limit), args
}

// Messages pairs each receipt with its message, read by get; a message
// purged since its receipt was read is left out.
func Messages(ctx context.Context, rcs []*core.Receipt, get func(context.Context, string) (*core.Message, error)) []core.StoredMessage {
	out := make([]core.StoredMessage, 0, len(rcs))
	for _, r := range rcs {
		m, err := get(ctx, r.MessageID)
		if err != nil {
			continue // purged meanwhile
		}
		out = append(out, core.StoredMessage{Message: m, Receipt: r})
	}
	return out
}
