package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Gathered lane completions. The scheduler runs one goroutine per claimed
// lane, and each ends a delivery round with CompleteRenew; done one lane at
// a time that cost three or four statements, a round trip and a commit per
// lane round. Instead, as accepts are gathered (accept.go), one goroutine
// at a time takes the waiting CompleteRenew calls (up to maxCompleteBatch)
// and completes them together in one round trip, one
// implicit transaction, with the same statements whatever the batch's size:
// the outcomes of all its lanes (queueOutcomes: one statement a kind),
// settleLanesSQL (each lane still held by its owner is renewed), and
// renewLanesSQL (each such lane's next messages, or its release). While a
// batch commits, the next gathers in the queue. There is no worker
// goroutine (see leadCompletes): with a dedicated one, the hand-off to it
// and back cost a lone lane's rounds about a fifth of their rate on a
// loaded machine (scripts/bench-scaleout.sh, one lane).
//
// A batch that fails as a whole is retried one request at a time with the
// single-lane statements (completeRenewOne), so one lane's error is its
// own; a batch that fails because the database is unreachable fails every
// request with that error at once. A lane twice in one batch (two owners
// of one store completing it at once) is completed after it, alone.
const maxCompleteBatch = 64

// completeReq is one CompleteRenew waiting for its batch.
type completeReq struct {
	owner           string
	res             core.LaneResult
	now, claimUntil time.Time
	perLane         int

	done chan completeAns
}

type completeAns struct {
	next []*core.Message
	err  error
}

// leadCompletes completes the waiting requests, a batch at a time, unless
// another goroutine is doing so (it holds s.completing): the caller of
// CompleteRenew is the worker while nobody else is, so a lone lane's
// completion runs in its own goroutine, with no hand-off. A caller whose
// own request (mine) is answered while others still wait hands the rest
// to a new goroutine and returns to its lane; one that finds s.completing
// held leaves its request to the holder, which looks at the queue again
// after letting go of it.
func (s *Store) leadCompletes(mine *completeReq) {
	batch := make([]*completeReq, 0, maxCompleteBatch)
	for len(s.completes) > 0 {
		if mine != nil && len(mine.done) > 0 {
			go s.leadCompletes(nil)
			return
		}
		select {
		case s.completing <- struct{}{}:
		default:
			return
		}
		batch = batch[:0]
	fill:
		for len(batch) < maxCompleteBatch {
			select {
			case q := <-s.completes:
				batch = append(batch, q)
			default:
				break fill
			}
		}
		if len(batch) > 0 {
			s.completeBatch(batch)
		}
		<-s.completing
	}
}

// CompleteRenew implements core.LaneRenewer: in one transaction it records
// res as Complete does and, while owner still holds the lane, renews the
// claim until claimUntil with up to perLane of the lane's messages that are
// claimable at now (the ones Claim would take), or releases the lane when
// there are none. A lane that res parks or holds for a retry is completed
// with Complete. The owner check is made in SQL under the lane's row lock,
// so it holds across instances sharing the database. Concurrent calls are
// completed together (see maxCompleteBatch).
func (s *Store) CompleteRenew(ctx context.Context, owner string, res core.LaneResult, now, claimUntil time.Time, perLane int) ([]*core.Message, error) {
	if res.Park || !res.NextAt.IsZero() || perLane <= 0 {
		return nil, s.Complete(ctx, owner, []core.LaneResult{res})
	}
	q := &completeReq{owner: owner, res: res, now: now, claimUntil: claimUntil, perLane: perLane, done: make(chan completeAns, 1)}
	select {
	case s.completes <- q:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.quit:
		return nil, errors.New("postgres: store closed")
	}
	s.leadCompletes(q)
	// Once queued it is recorded or fails; wait for it even if ctx ends, so
	// recorded outcomes are never reported lost.
	a := <-q.done
	return a.next, a.err
}

// completeBatch completes a batch and answers each request.
func (s *Store) completeBatch(batch []*completeReq) {
	seen := make(map[core.Lane]bool, len(batch))
	var now, later []*completeReq
	for _, q := range batch {
		if seen[q.res.Lane] {
			later = append(later, q)
			continue
		}
		seen[q.res.Lane] = true
		now = append(now, q)
	}
	if len(now) == 1 {
		s.completeRenewOne(now[0])
	} else if err := s.completeRenewMany(now); err != nil {
		if errors.Is(classify(err), core.ErrUnavailable) {
			err = wrap("complete and renew", err)
			for _, q := range now {
				q.done <- completeAns{err: err}
			}
		} else {
			for _, q := range now {
				s.completeRenewOne(q)
			}
		}
	}
	for _, q := range later {
		s.completeRenewOne(q)
	}
}

// settleLanesSQL is settleLaneSQL for a batch: each lane ($1, $2) that its
// owner $3 still holds is next due at $4, unparked and claimed until $5.
const settleLanesSQL = `UPDATE lanes l SET next_at = u.now, parked = false, claim_until = u.until, owner = u.owner
	FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[]) AS u(receiver, sender, owner, now, until)
	WHERE l.receiver = u.receiver AND l.sender = u.sender AND l.owner = u.owner`

// renewLanesSQL is renewLaneSQL for a batch, following settleLanesSQL as a
// statement of its own (a fresh snapshot once the lanes' locks are held):
// for each lane ($1, $2) that its owner $3 holds, the up to $5 messages
// claimable at $4 (while their bodies stay under $6 bytes, the first
// always), tagged with the lane's position in the arrays; a lane with none
// is released.
var renewLanesSQL = `WITH l AS (
		SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::integer[])
			WITH ORDINALITY AS u(receiver, sender, owner, now, per, ord)
		WHERE EXISTS (SELECT FROM lanes x WHERE x.receiver = u.receiver AND x.sender = u.sender AND x.owner = u.owner)
	), m AS (
		SELECT ord, body, seq, attempts, expires_at FROM (
			SELECT l.ord, m.body, m.seq, m.attempts, m.expires_at, length(m.body) AS len,
				sum(length(m.body)) OVER (PARTITION BY l.ord ORDER BY m.seq) AS run
			FROM l CROSS JOIN LATERAL (` + laneQueue("l.now", "l.per") + `) m
		) q WHERE run - len < $6
	), released AS (
		UPDATE lanes x SET claim_until = ` + zeroTS + `, owner = ''
		FROM l WHERE x.receiver = l.receiver AND x.sender = l.sender AND x.owner = l.owner
			AND NOT EXISTS (SELECT FROM m WHERE m.ord = l.ord)
	)
	SELECT body, seq, attempts, expires_at, ord FROM m ORDER BY ord, seq`

// completeRenewMany completes batch (no lane twice) in one round trip and
// answers every request; on an error it answers none.
func (s *Store) completeRenewMany(batch []*completeReq) error {
	// Lanes in key order, messages before lanes: the lock order every
	// write follows.
	batch = slices.Clone(batch)
	slices.SortFunc(batch, func(a, b *completeReq) int { return laneCmp(a.res.Lane, b.res.Lane) })
	n := len(batch)
	recvs, sends, owners := make([]string, n), make([]string, n), make([]string, n)
	nows, untils, pers := make([]time.Time, n), make([]time.Time, n), make([]int32, n)
	var outs []core.Outcome
	for i, q := range batch {
		recvs[i], sends[i], owners[i] = q.res.Lane.Receiver, q.res.Lane.Sender, q.owner
		nows[i], untils[i], pers[i] = q.now, q.claimUntil, int32(q.perLane)
		outs = append(outs, q.res.Outcomes...)
	}
	next := make([][]*core.Message, n)
	var done []ended
	err := s.sendBatch(context.Background(), func(b *pgx.Batch) error {
		clear(next)
		done = nil
		if err := queueOutcomes(b, outs, func(rc *core.Receipt) { done = append(done, ended{id: rc.MessageID, rc: rc}) }); err != nil {
			return err
		}
		b.Queue(settleLanesSQL, recvs, sends, owners, nows, untils)
		b.Queue(renewLanesSQL, recvs, sends, owners, nows, pers, s.readBytes).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var ord int64
				m, err := scanMessage(rows, &ord)
				if err != nil {
					return err
				}
				if ord < 1 || ord > int64(n) {
					return errors.New("renew lanes: lane out of range")
				}
				next[ord-1] = append(next[ord-1], m)
			}
			return rows.Err()
		})
		return nil
	})
	if err != nil {
		return err
	}
	s.signalEnded(done...)
	if slices.ContainsFunc(next, func(ms []*core.Message) bool { return len(ms) == 0 }) {
		s.signalReleased() // released, as by Complete
	}
	for i, q := range batch {
		q.done <- completeAns{next: next[i]}
	}
	return nil
}

// completeRenewOne completes one request with the single-lane statements
// and answers it.
func (s *Store) completeRenewOne(q *completeReq) {
	next, err := s.completeRenew(context.Background(), q.owner, q.res, q.now, q.claimUntil, q.perLane)
	q.done <- completeAns{next: next, err: err}
}
