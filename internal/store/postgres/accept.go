package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Group commit. Accepting one message per statement cost a round trip and
// a commit (a WAL flush) per message, and every accept to a lane held the
// lane's row lock through its own commit, so accepts to one lane ran one at
// a time. Instead, concurrent accepts are gathered and stored by one
// statement (acceptBatchSQL) in one implicit transaction: one round trip,
// one commit for the whole batch, and a lane row written only when missing
// (lanes.go: lanes hold no counters).
//
// One worker goroutine (acceptWorkers) takes the next request and the ones
// queued behind it (up to maxAcceptBatch); while its batch commits, the
// next gathers in the queue. With two workers, two half-size batches were
// in flight at once: the database committed more often for the same
// messages, which with two hubs on one database cost more than the
// overlap gained (scripts/bench-scaleout.sh, three interleaved rounds:
// with one worker, PostgreSQL's CPU a message with two hubs and one lane
// went from 187-286 to 155-167 µs and the two hubs' rate from 0.72-0.87
// to 0.85-0.94 of one hub's). A batch that fails as a whole is retried one request at a time
// with the single-message statement (acceptSQL), so one request's error is
// its own; a batch that fails because the database is unreachable fails
// every request with that error at once.
//
// Under load a worker that gathered few requests, after a busy batch,
// lingers up to acceptLinger for more before it commits: the senders
// answered by the last batch are about to send again, and one commit for
// more of them costs the database less than one each.
const (
	acceptWorkers  = 1
	maxAcceptBatch = 256
	acceptLinger   = 500 * time.Microsecond
	lingerAfter    = 8  // a batch at least this big was busy
	lingerBelow    = 32 // a batch this big commits without waiting
)

// acceptReq is one Accept waiting for its batch.
type acceptReq struct {
	ctx    context.Context
	m      *core.Message
	r      *core.Receipt
	max    int
	lease  *pullLease
	body   []byte
	hist   []byte
	pulled []byte // history if handed out (lease != nil)

	done chan acceptAns
}

type acceptAns struct {
	seq    int64
	pulled bool
	stored bool // false: the id was taken, or the queue was full
	// claimed: the message's lane was claimed when it was stored (as the
	// statement saw the database, before its own writes).
	claimed bool
	err     error
}

// startAcceptors starts the batch workers; they stop when s.quit closes.
func (s *Store) startAcceptors() {
	s.accepts = make(chan *acceptReq, 4*maxAcceptBatch)
	for range acceptWorkers {
		s.acceptWG.Add(1)
		go func() {
			defer s.acceptWG.Done()
			batch := make([]*acceptReq, 0, maxAcceptBatch)
			timer := time.NewTimer(time.Hour)
			timer.Stop()
			last := 0
			for {
				select {
				case <-s.quit:
					return
				case q := <-s.accepts:
					batch = append(batch[:0], q)
				}
				batch = s.fillAccepts(batch)
				if last >= lingerAfter && len(batch) < lingerBelow {
					timer.Reset(acceptLinger)
				linger:
					for len(batch) < lingerBelow {
						select {
						case q := <-s.accepts:
							batch = s.fillAccepts(append(batch, q))
						case <-timer.C:
							break linger
						}
					}
					timer.Stop()
				}
				last = len(batch)
				s.acceptBatch(batch)
			}
		}()
	}
}

// fillAccepts appends the requests already waiting, without waiting.
func (s *Store) fillAccepts(batch []*acceptReq) []*acceptReq {
	for len(batch) < maxAcceptBatch {
		select {
		case q := <-s.accepts:
			batch = append(batch, q)
		default:
			return batch
		}
	}
	return batch
}

// submitAccept stores q's message through a batch and waits for the answer.
func (s *Store) submitAccept(q *acceptReq) acceptAns {
	q.done = make(chan acceptAns, 1)
	select {
	case s.accepts <- q:
	case <-q.ctx.Done():
		return acceptAns{err: q.ctx.Err()}
	case <-s.quit:
		return acceptAns{err: errors.New("postgres: store closed")}
	}
	// Once queued it is stored or fails; wait for it even if ctx ends, so a
	// stored message is never reported lost.
	return <-q.done
}

// acceptBatchSQL stores a batch of messages, each as acceptSQL would, in
// one statement. Each row's queue check ($14 > 0: the receiver's queued
// count must be under it) and hand-off check ($15: may it be stored
// pulled, leased until $17 with history $18 at $16, when none of the
// receiver's queued messages can be pulled at $16 — the first
// handoffReach looked at) read the database as it was before the batch,
// so concurrent sends to one receiver pass maxQueue by at most their
// number, as before; so does the lane's claim each row answers (see
// core.AcceptResult.LaneClaimed). A lane is created if missing, never updated (see
// lanes.go); conversations and participants are written once per key for
// the whole batch, in key order (the lock order every write follows).
var acceptBatchSQL = `WITH i AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::text[], $6::jsonb[], $7::timestamptz[],
		$8::timestamptz[], $9::timestamptz[], $10::text[], $11::text[], $12::bytea[], $13::timestamptz[], $14::integer[],
		$15::boolean[], $16::timestamptz[], $17::timestamptz[], $18::jsonb[])
		WITH ORDINALITY AS i(id, sender, receiver, state, status, history, expires_at, created_at, updated_at,
			conversation_id, correlation_id, body, received_at, max_queue, try_pull, pull_at, pull_until, pulled_history, ord)
), f AS (
	SELECT i.*, COALESCE(h.ok, false) AS pull, (i.state <> 0 OR i.max_queue <= 0 OR d.depth < i.max_queue) AS room
	FROM i
	LEFT JOIN LATERAL (
		SELECT COALESCE(bool_and(claim_until > i.pull_at OR expires_at <= i.pull_at), true) AND count(*) <= ` + itoa(handoffReach) + ` AS ok
		FROM (SELECT claim_until, expires_at FROM messages WHERE state = 0 AND receiver = i.receiver ORDER BY seq LIMIT ` + itoa(handoffReach+1) + `) q
	) h ON i.try_pull AND i.state = 0
	LEFT JOIN LATERAL (SELECT count(*) AS depth FROM (SELECT FROM messages WHERE state = 0 AND receiver = i.receiver LIMIT i.max_queue) q) d
		ON i.state = 0 AND i.max_queue > 0
), ins AS (
	INSERT INTO messages (id, sender, receiver, state, status, history, expires_at, created_at, updated_at, conversation_id, correlation_id, body, claim_until, attempts)
	SELECT id, sender, receiver, state, status, CASE WHEN pull THEN pulled_history ELSE history END, expires_at, created_at,
		CASE WHEN pull THEN pull_at ELSE updated_at END, conversation_id, correlation_id, body,
		CASE WHEN pull THEN pull_until ELSE ` + zeroTS + ` END, CASE WHEN pull THEN 1 ELSE 0 END
	FROM f WHERE room ORDER BY ord
	ON CONFLICT (id) DO NOTHING
	RETURNING id, seq, attempts = 1 AS pulled
), stored AS (
	SELECT f.* FROM ins JOIN f USING (id)
), lane AS (
	INSERT INTO lanes (receiver, sender, pending, next_at)
	SELECT receiver, sender, 0, min(received_at) FROM stored s WHERE state = 0
		AND NOT EXISTS (SELECT FROM lanes l WHERE l.receiver = s.receiver AND l.sender = s.sender)
	GROUP BY receiver, sender ORDER BY receiver, sender
	ON CONFLICT (receiver, sender) DO NOTHING
), conv AS (
	INSERT INTO conversations (id, created_at, last_message_at, messages)
	SELECT conversation_id, min(received_at), max(received_at), count(*) FROM stored WHERE conversation_id IS NOT NULL
	GROUP BY conversation_id ORDER BY conversation_id
	ON CONFLICT (id) DO UPDATE SET last_message_at = GREATEST(conversations.last_message_at, excluded.last_message_at),
		messages = conversations.messages + excluded.messages
), part AS (
	INSERT INTO participants (conversation_id, agent_id, joined_at)
	SELECT conversation_id, a, min(received_at) FROM stored, unnest(ARRAY[sender, receiver]) AS a
	WHERE conversation_id IS NOT NULL GROUP BY conversation_id, a ORDER BY conversation_id, a
	ON CONFLICT DO NOTHING
)
SELECT ins.id, ins.seq, ins.pulled, COALESCE(l.claim_until > f.received_at, false) AS claimed
FROM ins JOIN f USING (id) LEFT JOIN lanes l ON l.receiver = f.receiver AND l.sender = f.sender`

// acceptBatch stores a batch and answers each request.
func (s *Store) acceptBatch(batch []*acceptReq) {
	// The same id twice in a batch (a retry racing its first attempt): the
	// first goes in the batch, the others are answered after it, as
	// duplicates, by the single-message path.
	seen := make(map[string]bool, len(batch))
	var now, later []*acceptReq
	for _, q := range batch {
		if seen[q.m.ID] {
			later = append(later, q)
			continue
		}
		seen[q.m.ID] = true
		now = append(now, q)
	}
	if len(now) == 1 {
		s.acceptOne(now[0])
	} else if err := s.acceptMany(now); err != nil {
		if errors.Is(classify(err), core.ErrUnavailable) {
			for _, q := range now {
				q.done <- acceptAns{err: err}
			}
		} else {
			for _, q := range now {
				s.acceptOne(q)
			}
		}
	}
	for _, q := range later {
		s.acceptOne(q)
	}
}

// acceptMany runs acceptBatchSQL and answers every request of batch; on an
// error it answers none.
func (s *Store) acceptMany(batch []*acceptReq) error {
	n := len(batch)
	var (
		ids, senders, receivers, statuses, convs, corrs []string
		states                                          []int16
		hists, pulledHists                              []string
		expires, created, updated, received             []time.Time
		pullAt, pullUntil                               []time.Time
		bodies                                          [][]byte
		maxes                                           []int32
		tryPull                                         []bool
	)
	for _, q := range batch {
		m, r := q.m, q.r
		state := int16(1)
		if r.Status == core.StatusQueued {
			state = 0
		}
		ids, senders, receivers = append(ids, m.ID), append(senders, m.Sender), append(receivers, m.Receiver)
		states, statuses = append(states, state), append(statuses, string(r.Status))
		hists = append(hists, string(q.hist))
		expires, created, updated = append(expires, m.ExpiresAt), append(created, r.CreatedAt), append(updated, r.UpdatedAt)
		convs, corrs = append(convs, m.ConversationID), append(corrs, m.CorrelationID)
		bodies, received, maxes = append(bodies, q.body), append(received, m.ReceivedAt), append(maxes, int32(q.max))
		if q.lease != nil {
			tryPull, pullAt, pullUntil = append(tryPull, true), append(pullAt, q.lease.now), append(pullUntil, q.lease.until)
			pulledHists = append(pulledHists, string(q.pulled))
		} else {
			tryPull, pullAt, pullUntil = append(tryPull, false), append(pullAt, time.Time{}), append(pullUntil, time.Time{})
			pulledHists = append(pulledHists, "[]")
		}
	}
	// NULL for empty conversation and correlation ids.
	convArg, corrArg := nullables(convs), nullables(corrs)
	got := make(map[string]acceptAns, n)
	var err error
	for range maxTxAttempts {
		clear(got)
		var rows pgx.Rows
		rows, err = s.pool.Query(context.Background(), acceptBatchSQL, ids, senders, receivers, states, statuses, hists, expires,
			created, updated, convArg, corrArg, bodies, received, maxes, tryPull, pullAt, pullUntil, pulledHists)
		if err == nil {
			var id string
			var seq int64
			var pulled, claimed bool
			_, err = pgx.ForEachRow(rows, []any{&id, &seq, &pulled, &claimed}, func() error {
				got[id] = acceptAns{seq: seq, pulled: pulled, stored: true, claimed: claimed}
				return nil
			})
		}
		if err == nil || !retryable(err) {
			break
		}
	}
	if err != nil {
		return err
	}
	for _, q := range batch {
		a, ok := got[q.m.ID]
		if !ok {
			// Not stored: a duplicate, or the queue was full. The single
			// path tells which (and stores it if a purge made room).
			s.acceptOne(q)
			continue
		}
		q.done <- a
	}
	return nil
}

// nullables turns empty strings into NULLs for a text[] argument.
func nullables(v []string) []*string {
	out := make([]*string, len(v))
	for i := range v {
		if v[i] != "" {
			out[i] = &v[i]
		}
	}
	return out
}

// acceptOne stores one request with the single-message statement and
// answers it.
func (s *Store) acceptOne(q *acceptReq) {
	m, r := q.m, q.r
	state := 1
	if r.Status == core.StatusQueued {
		state = 0
	}
	sql := acceptSQL
	args := []any{m.ID, m.Sender, m.Receiver, state, string(r.Status), string(q.hist), m.ExpiresAt, r.CreatedAt, r.UpdatedAt,
		nullable(m.ConversationID), nullable(m.CorrelationID), q.body, m.ReceivedAt, q.max}
	if q.lease != nil {
		sql = acceptPulledSQL
		args = append(args, q.lease.now, q.lease.until, string(q.pulled))
	}
	var a acceptAns
	for range maxTxAttempts {
		a.err = s.pool.QueryRow(context.Background(), sql, args...).Scan(&a.seq, &a.pulled, &a.claimed)
		if a.err == nil {
			a.stored = true
			break
		}
		if errors.Is(a.err, pgx.ErrNoRows) {
			a.err = nil // not stored: the caller finds out why
			break
		}
		if !retryable(a.err) {
			break
		}
	}
	q.done <- a
}

func itoa(n int) string { return strconv.Itoa(n) }
