// Package sqlflow is the message flow (throughput, dead letters and queue
// depth over time, core.FlowQuery) that the SQL store backends share: one
// query, written once for every SQL dialect, and the fold of its rows into
// buckets. Each backend says only how its SQL differs (Dialect) and runs
// the query.
//
// The query reads two sets of rows, each through an index the stores
// already keep, so its cost is bounded by the window's traffic and the
// current queue, not by the table:
//
//   - the queued messages (state 0: the partial indexes on queued
//     messages), grouped by the bucket they were accepted in;
//   - the messages that ended at or after the window's start (state 1,
//     updated_at >= since: the messages_done index), grouped by the bucket
//     they were accepted in and the bucket they ended in.
//
// Every message accepted in the window is in one of the two sets (a
// message ends after it is accepted), and so is every message that was
// queued at the window's start, which gives the queue depth at the start;
// the depth at the end of each bucket follows by adding what was accepted
// and taking away what ended.
package sqlflow

import (
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Dialect is what differs between the SQL backends in the flow query.
type Dialect struct {
	// Param is the placeholder of the nth argument (from 1), which may
	// stand more than once in a query: "?1" (SQLite), "$1" (PostgreSQL).
	Param func(n int) string
	// Time is the argument that compares with a time column.
	Time func(t time.Time) any
	// Micros is the SQL expression of time column col as an integer count
	// of microseconds since the Unix epoch.
	Micros func(col string) string
}

// notEnded is the end bucket of a message still queued.
const notEnded = -2

// Query is the flow query of q (valid: core.FlowQuery.Validate) and its
// arguments. Its rows are, in order, the accept bucket, the end bucket
// (notEnded for a queued message), the delivered, the dead-lettered and
// all the messages of the group; a bucket before the window is -1, one
// after it q.Buckets. Read them into Rows for Fold.
func Query(q core.FlowQuery, d Dialect) (string, []any) {
	since, until := d.Param(1), d.Param(2)
	args := []any{d.Time(q.Since), d.Time(q.Until())}
	// The integers are written into the query (they are ours, not the
	// caller's text), so no dialect has to guess their parameters' types.
	start := strconv.FormatInt(q.Since.UnixMicro(), 10)
	width := strconv.FormatInt(q.Width.Microseconds(), 10)
	n := strconv.Itoa(q.Buckets)
	bucket := func(col string) string {
		return "CASE WHEN " + col + " < " + since + " THEN -1 WHEN " + col + " >= " + until + " THEN " + n +
			" ELSE (" + d.Micros(col) + " - " + start + ") / " + width + " END"
	}
	sql := "SELECT " + bucket("created_at") + ", " + strconv.Itoa(notEnded) + ", 0, 0, count(*) FROM messages WHERE state = 0 GROUP BY 1" +
		" UNION ALL SELECT " + bucket("created_at") + ", " + bucket("updated_at") + "," +
		" sum(CASE WHEN status = 'delivered' THEN 1 ELSE 0 END)," +
		" sum(CASE WHEN status IN ('rejected', 'timeout') THEN 1 ELSE 0 END), count(*)" +
		" FROM messages WHERE state = 1 AND updated_at >= " + since + " GROUP BY 1, 2"
	return sql, args
}

// Row is one row of Query's answer.
type Row struct {
	Accepted, Ended             int64 // buckets
	Delivered, DeadLetters, All int64 // counts
}

// Fold turns the rows of q's Query into q.Buckets buckets, oldest first.
func Fold(q core.FlowQuery, rows []Row) []core.FlowBucket {
	n := int64(q.Buckets)
	out := make([]core.FlowBucket, q.Buckets)
	ended := make([]int64, q.Buckets)
	depth := int64(0) // at the window's start
	for _, r := range rows {
		switch {
		case r.Accepted < 0:
			depth += r.All // queued at the start: still queued, or ended since
		case r.Accepted < n:
			out[r.Accepted].Accepted += int(r.All)
		}
		if r.Ended >= 0 && r.Ended < n {
			out[r.Ended].Delivered += int(r.Delivered)
			out[r.Ended].DeadLetters += int(r.DeadLetters)
			ended[r.Ended] += r.All
		}
	}
	for i := range out {
		out[i].Start = q.Since.Add(time.Duration(i) * q.Width)
		depth += int64(out[i].Accepted) - ended[i]
		// Hubs on one store with clocks apart can stamp a message's end
		// before its acceptance; a depth never goes below zero.
		out[i].Queued = int(max(depth, 0))
	}
	return out
}
