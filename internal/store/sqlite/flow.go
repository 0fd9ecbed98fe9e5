package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlflow"
)

// flowDialect is SQLite's SQL for sqlflow: times are integer
// microseconds already.
var flowDialect = sqlflow.Dialect{
	Param:  func(n int) string { return "?" + strconv.Itoa(n) },
	Time:   func(t time.Time) any { return ts(t) },
	Micros: func(col string) string { return col },
}

// MessageFlow returns the stored messages' flow over q's window: per
// bucket, the messages accepted, delivered and dead-lettered, and the
// queue depth at its end. It reads the queued messages and those that
// ended in the window (see package sqlflow).
func (s *Store) MessageFlow(ctx context.Context, q core.FlowQuery) ([]core.FlowBucket, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: message flow: %w", err)
	}
	query, args := sqlflow.Query(q, flowDialect)
	rows, err := s.read(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: message flow: %w", err)
	}
	defer rows.Close()
	var out []sqlflow.Row
	for rows.Next() {
		var r sqlflow.Row
		if err := rows.Scan(&r.Accepted, &r.Ended, &r.Delivered, &r.DeadLetters, &r.All); err != nil {
			return nil, fmt.Errorf("sqlite: message flow: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: message flow: %w", err)
	}
	return sqlflow.Fold(q, out), nil
}
