package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlflow"
)

// flowDialect is PostgreSQL's SQL for sqlflow.
var flowDialect = sqlflow.Dialect{
	Param:  func(n int) string { return "$" + strconv.Itoa(n) + "::timestamptz" },
	Time:   func(t time.Time) any { return t },
	Micros: func(col string) string { return "(extract(epoch from " + col + ") * 1000000)::bigint" },
}

// MessageFlow returns the stored messages' flow over q's window: per
// bucket, the messages accepted, delivered and dead-lettered, and the
// queue depth at its end. It reads the queued messages and those that
// ended in the window (see package sqlflow); every hub on the database
// answers the same.
func (s *Store) MessageFlow(ctx context.Context, q core.FlowQuery) ([]core.FlowBucket, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: message flow: %w", err)
	}
	query, args := sqlflow.Query(q, flowDialect)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, wrap("message flow", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sqlflow.Row, error) {
		var r sqlflow.Row
		err := row.Scan(&r.Accepted, &r.Ended, &r.Delivered, &r.DeadLetters, &r.All)
		return r, err
	})
	if err != nil {
		return nil, wrap("message flow", err)
	}
	return sqlflow.Fold(q, out), nil
}
