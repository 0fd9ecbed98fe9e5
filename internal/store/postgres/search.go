package postgres

import (
	"context"
	"strconv"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlsearch"
)

// searchDialect is PostgreSQL's SQL for sqlsearch.
var searchDialect = sqlsearch.Dialect{
	Param:    func(n int) string { return "$" + strconv.Itoa(n) },
	Contains: func(haystack, needle string) string { return "position(" + needle + " in " + haystack + ") > 0" },
	BodyText: "convert_from(body, 'UTF8')",
}

// SearchMessages implements core.MessageSearcher: newest first, paged by
// seq. A text search reads the messages' bodies: it scans the table from
// the page's start until it has a page.
func (s *Store) SearchMessages(ctx context.Context, q core.MessageQuery) ([]core.StoredMessage, error) {
	if !core.Storable(q.Text, q.Agent, q.Sender, q.Receiver, string(q.Status), q.Protocol, q.ConversationID) {
		return nil, nil // no stored message holds such text
	}
	query, args := sqlsearch.Query(q.Normalized(), receiptCols(""), searchDialect)
	rcs, err := collectReceipts(s.pool.Query(ctx, query, args...))
	if err != nil {
		return nil, wrap("search messages", err)
	}
	return sqlsearch.Messages(ctx, rcs, s.GetMessage), nil
}
