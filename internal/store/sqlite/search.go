package sqlite

import (
	"context"
	"fmt"
	"strconv"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlsearch"
)

// searchDialect is SQLite's SQL for sqlsearch.
var searchDialect = sqlsearch.Dialect{
	Param:    func(n int) string { return "?" + strconv.Itoa(n) },
	Contains: func(haystack, needle string) string { return "instr(" + haystack + ", " + needle + ") > 0" },
	BodyText: "CAST(body AS TEXT)",
}

// SearchMessages implements core.MessageSearcher: newest first, paged by
// seq. A text search reads the messages' bodies: it scans the table from
// the page's start until it has a page.
func (s *Store) SearchMessages(ctx context.Context, q core.MessageQuery) ([]core.StoredMessage, error) {
	query, args := sqlsearch.Query(q.Normalized(), receiptCols, searchDialect)
	rows, err := s.read(ctx, query, args...)
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
	return sqlsearch.Messages(ctx, rcs, s.GetMessage), nil
}
