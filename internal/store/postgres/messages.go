package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// maxHistory bounds the events kept in one receipt's history.
const maxHistory = 64

// appendHistory is the SET clause that appends the event in parameter p (a
// JSON object) to the history. At maxHistory events it drops the second one,
// so a history keeps its first event (accepted) and the latest ones,
// including the terminal event.
func appendHistory(p string) string {
	return fmt.Sprintf("history = CASE WHEN jsonb_array_length(history) < %d THEN history ELSE history - 1 END || jsonb_build_array(%s::jsonb)", maxHistory, p)
}

func event(at time.Time, st core.Status, detail string) string {
	e := core.ReceiptEvent{At: at, Status: st, Detail: core.SanitizeText(detail)}
	b, _ := e.AppendJSON(make([]byte, 0, 96))
	return string(b)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// acceptSQL stores a message in one statement (one round trip, one commit):
// the insert is skipped when the receiver's queue already holds $14 (> 0)
// messages, and the lane, conversation and participant writes happen only
// when the insert did. INSERT … ON CONFLICT (id) DO NOTHING waits for a
// concurrent insert of the same id (from any instance) and then skips, so
// exactly one accept stores it. It answers the new seq and whether the
// message was stored pulled (always false here; see acceptPulledSQL).
var acceptSQL = acceptStatement(false)

// acceptPulledSQL is acceptSQL for AcceptPulled: a queued message is stored
// pulled (leased until $16, one attempt, history $17, updated at $15) when
// none of the receiver's queued messages can be pulled at $15 — each is
// claimed past it or expired. Only the first handoffReach of the queue are
// looked at; a longer queue answers "not pulled".
var acceptPulledSQL = acceptStatement(true)

// handoffReach bounds how much of a receiver's queue AcceptPulled reads.
const handoffReach = 256

func acceptStatement(pulled bool) string {
	free := "SELECT false AS ok"
	history, updated, claim, attempts := "$6::jsonb", "$9::timestamptz", zeroTS, "0"
	if pulled {
		free = fmt.Sprintf(`SELECT $4::smallint = 0 AND COALESCE(bool_and(claim_until > $15::timestamptz OR expires_at <= $15::timestamptz), true)
		AND count(*) <= %d AS ok
	FROM (SELECT claim_until, expires_at FROM messages WHERE state = 0 AND receiver = $3::text ORDER BY seq LIMIT %d) AS q`, handoffReach, handoffReach+1)
		history = "CASE WHEN free.ok THEN $17::jsonb ELSE $6::jsonb END"
		updated = "CASE WHEN free.ok THEN $15::timestamptz ELSE $9::timestamptz END"
		claim = "CASE WHEN free.ok THEN $16::timestamptz ELSE " + zeroTS + " END"
		attempts = "CASE WHEN free.ok THEN 1 ELSE 0 END"
	}
	return `WITH free AS (
	` + free + `
), ins AS (
	INSERT INTO messages (id, sender, receiver, state, status, history, expires_at, created_at, updated_at, conversation_id, correlation_id, body, claim_until, attempts)
	SELECT $1::text, $2::text, $3::text, $4::smallint, $5::text, ` + history + `, $7::timestamptz, $8::timestamptz, ` + updated + `,
		$10::text, $11::text, $12::bytea, ` + claim + `, ` + attempts + `
	FROM free
	WHERE $4::smallint <> 0 OR $14::integer <= 0
		OR (SELECT count(*) FROM (SELECT FROM messages WHERE state = 0 AND receiver = $3::text LIMIT $14::integer) q) < $14::integer
	ON CONFLICT (id) DO NOTHING
	RETURNING seq, attempts = 1 AS pulled
), lane AS (
	INSERT INTO lanes (receiver, sender, pending, next_at)
	SELECT $3::text, $2::text, 0, $13::timestamptz FROM ins WHERE $4::smallint = 0
		AND NOT EXISTS (SELECT FROM lanes WHERE receiver = $3::text AND sender = $2::text)
	ON CONFLICT (receiver, sender) DO NOTHING
), conv AS (
	INSERT INTO conversations (id, created_at, last_message_at, messages)
	SELECT $10::text, $13::timestamptz, $13::timestamptz, 1 FROM ins WHERE $10::text IS NOT NULL
	ON CONFLICT (id) DO UPDATE SET last_message_at = GREATEST(conversations.last_message_at, excluded.last_message_at),
		messages = conversations.messages + 1
), part AS (
	INSERT INTO participants (conversation_id, agent_id, joined_at)
	SELECT DISTINCT $10::text, a, $13::timestamptz FROM ins, unnest(ARRAY[$2::text, $3::text]) AS a WHERE $10::text IS NOT NULL
	ON CONFLICT DO NOTHING
)
SELECT seq, pulled, COALESCE((SELECT claim_until > $13::timestamptz FROM lanes WHERE receiver = $3::text AND sender = $2::text), false) FROM ins`
}

// Accept implements core.Store. maxQueue is exact for one lane; concurrent
// accepts from several senders to one receiver may together pass it by at
// most their number.
func (s *Store) Accept(ctx context.Context, m *core.Message, r *core.Receipt, maxQueue int) (core.AcceptResult, error) {
	res, _, err := s.accept(ctx, m, r, maxQueue, nil)
	return res, err
}

// AcceptPulled implements core.AcceptPuller: in the accepting statement, it
// reads the head of the receiver's queue (at most handoffReach messages) and
// stores the message pulled if none of them can be pulled at now. Accepts
// running at the same time do not see each other: their sends were
// concurrent, so either order keeps the promise of per-pair order.
func (s *Store) AcceptPulled(ctx context.Context, m *core.Message, r *core.Receipt, maxQueue int, now, visibleAt time.Time) (core.AcceptResult, bool, error) {
	return s.accept(ctx, m, r, maxQueue, &pullLease{now: now, until: visibleAt})
}

// pullLease is the pull an accept may do: at now, until until.
type pullLease struct{ now, until time.Time }

func (s *Store) accept(ctx context.Context, m *core.Message, r *core.Receipt, maxQueue int, lease *pullLease) (core.AcceptResult, bool, error) {
	if err := core.CheckStorableMessage(m); err != nil {
		return core.AcceptResult{}, false, err
	}
	body, err := m.AppendJSON(make([]byte, 0, 512))
	if err != nil {
		return core.AcceptResult{}, false, wrap("encode message", err)
	}
	hist, err := core.AppendHistoryJSON(nil, r.History)
	if err != nil {
		return core.AcceptResult{}, false, wrap("encode history", err)
	}
	queued := r.Status == core.StatusQueued
	q := &acceptReq{ctx: ctx, m: m, r: r, max: maxQueue, lease: lease, body: body, hist: hist}
	// The history it gets if it is handed out, as Pull would record it.
	var pulledEvents []core.ReceiptEvent
	if lease != nil {
		pulledEvents = append(slices.Clip(r.History), core.ReceiptEvent{At: lease.now, Status: core.StatusQueued, Detail: core.DetailPulled})
		if q.pulled, err = core.AppendHistoryJSON(nil, pulledEvents); err != nil {
			return core.AcceptResult{}, false, fmt.Errorf("postgres: encode history: %w", err)
		}
	}
	for range maxTxAttempts {
		a := s.submitAccept(q)
		if a.err != nil {
			return core.AcceptResult{}, false, wrap("accept", a.err)
		}
		if a.stored {
			m.Seq = a.seq
			res := core.AcceptResult{Receipt: *r, LaneClaimed: a.claimed && queued && !a.pulled}
			switch {
			case a.pulled:
				m.Attempts = 1
				res.Receipt.Attempts, res.Receipt.UpdatedAt, res.Receipt.History = 1, lease.now, pulledEvents
			case queued:
				s.signalAccepted() // a handed-off message is no other instance's work
			}
			if m.CorrelationID != "" {
				s.signalResult(m.CorrelationID)
			}
			return res, a.pulled, nil
		}
		// Nothing inserted: the id is taken, or the queue is full.
		first, err := scanReceipt(s.pool.QueryRow(ctx, "SELECT "+receiptCols("")+" FROM messages WHERE id = $1", m.ID))
		switch {
		case err == nil && (first.Sender != m.Sender || first.Receiver != m.Receiver):
			return core.AcceptResult{}, false, core.IDConflict(m, first)
		case err == nil:
			return core.AcceptResult{Receipt: *first, Duplicate: true}, false, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return core.AcceptResult{}, false, wrap("read first receipt", err)
		case queued && maxQueue > 0:
			return core.AcceptResult{}, false, fmt.Errorf("receiver %q has %d queued: %w", m.Receiver, maxQueue, core.ErrQueueFull)
		}
		// The message was purged between the two statements: try again.
	}
	return core.AcceptResult{}, false, fmt.Errorf("postgres: accept %q: gave up after %d attempts", m.ID, maxTxAttempts)
}

var receiptColumns = []string{"id", "sender", "receiver", "status", "attempts", "code", "last_error", "reply", "history", "created_at", "updated_at", "next_at", "expires_at"}

// receiptCols lists the receipt columns, qualified with table when not empty.
func receiptCols(table string) string {
	if table == "" {
		return strings.Join(receiptColumns, ", ")
	}
	return table + "." + strings.Join(receiptColumns, ", "+table+".")
}

func scanReceipt(row pgx.Row) (*core.Receipt, error) {
	var r core.Receipt
	var status string
	var reply, hist []byte
	var created, updated, next, exp time.Time
	if err := row.Scan(&r.MessageID, &r.Sender, &r.Receiver, &status, &r.Attempts, &r.Code, &r.LastError, &reply, &hist,
		&created, &updated, &next, &exp); err != nil {
		return nil, err
	}
	r.Status = core.Status(status)
	if len(reply) > 0 {
		r.Reply = json.RawMessage(reply)
	}
	if err := json.Unmarshal(hist, &r.History); err != nil {
		return nil, wrap("decode history", err)
	}
	r.CreatedAt, r.UpdatedAt, r.ExpiresAt = utc(created), utc(updated), utc(exp)
	if r.Status == core.StatusQueued {
		r.NextAttempt = utc(next)
	}
	return &r, nil
}

func collectReceipts(rows pgx.Rows, err error) ([]*core.Receipt, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*core.Receipt, error) { return scanReceipt(r) })
}

const messageCols = "body, seq, attempts, expires_at"

func scanMessage(row pgx.Row, extra ...any) (*core.Message, error) {
	var body []byte
	var seq int64
	var attempts int
	var exp time.Time
	if err := row.Scan(append([]any{&body, &seq, &attempts, &exp}, extra...)...); err != nil {
		return nil, err
	}
	m := new(core.Message)
	if err := json.Unmarshal(body, m); err != nil {
		return nil, wrap("decode message", err)
	}
	m.Seq, m.Attempts, m.ExpiresAt = seq, attempts, utc(exp)
	return m, nil
}

func collectMessages(rows pgx.Rows, err error) ([]*core.Message, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*core.Message, error) { return scanMessage(r) })
}

// GetMessage implements core.Store.
func (s *Store) GetMessage(ctx context.Context, id string) (*core.Message, error) {
	if !core.Storable(id) {
		return nil, fmt.Errorf("message %q: %w", id, core.ErrNotFound)
	}
	m, err := scanMessage(s.pool.QueryRow(ctx, "SELECT "+messageCols+" FROM messages WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("message %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get message", err)
	}
	return m, nil
}

// GetReceipt implements core.Store.
func (s *Store) GetReceipt(ctx context.Context, id string) (*core.Receipt, error) {
	if !core.Storable(id) {
		return nil, fmt.Errorf("receipt %q: %w", id, core.ErrNotFound)
	}
	r, err := scanReceipt(s.pool.QueryRow(ctx, "SELECT "+receiptCols("")+" FROM messages WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("receipt %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get receipt", err)
	}
	return r, nil
}

// Results implements core.Store.
func (s *Store) Results(ctx context.Context, correlationID string, limit int) ([]*core.Message, error) {
	if !core.Storable(correlationID) {
		return nil, nil
	}
	ms, err := collectMessages(s.pool.Query(ctx, "SELECT "+messageCols+" FROM messages WHERE correlation_id = $1 ORDER BY seq LIMIT $2",
		correlationID, lim(limit)))
	if err != nil {
		return nil, wrap("results", err)
	}
	return ms, nil
}

// Claiming takes several statements in one transaction. lockLanesSQL locks
// up to $2 due, unclaimed lanes with FOR UPDATE SKIP LOCKED, so concurrent
// claimers on any instance skip each other's lanes instead of waiting or
// double-claiming. The lanes' messages are read by a second statement:
// under READ COMMITTED it takes a fresh snapshot, so it sees the outcomes
// another instance committed while this one waited for the lane locks (read
// in the same statement, messages delivered a moment ago could still look
// queued and be delivered twice). Lanes with messages are stamped with the
// owner and claim_until; lanes whose messages are all leased to a puller are
// parked.
var (
	lockLanesSQL = `SELECT receiver, sender FROM lanes l
	WHERE NOT parked AND next_at <= $1 AND claim_until <= $1
		AND EXISTS (SELECT FROM messages m WHERE m.state = 0 AND m.receiver = l.receiver AND m.sender = l.sender AND m.claim_until <= $1)
	ORDER BY next_at, receiver, sender
	LIMIT $2
	FOR UPDATE SKIP LOCKED`
	// laneQueueSQL is the subquery, lateral to a lane l, of the up to $4
	// queued messages of l that no puller holds at $3, in order: what a
	// claim of l takes (Claim and CompleteRenew).
	laneQueueSQL = laneQueue("$3", "$4")
	// laneMessagesSQL reads the claimable messages of the locked lanes,
	// in lane order and then send order, with their bodies only while the
	// bodies read so far stay under $5 bytes (the first always): a
	// message past that comes without its body (NULL), and its lane
	// keeps it and the rest for a later claim.
	laneMessagesSQL = `SELECT receiver, sender, CASE WHEN run - len < $5 THEN body END, seq, attempts, expires_at FROM (
		SELECT l.receiver, l.sender, m.body, m.seq, m.attempts, m.expires_at, l.ord, length(m.body) AS len,
			sum(length(m.body)) OVER (ORDER BY l.ord, m.seq) AS run
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS l(receiver, sender, ord)
		CROSS JOIN LATERAL (` + laneQueueSQL + `) m
	) q
	ORDER BY ord, seq`
	stampLanesSQL = `UPDATE lanes l SET claim_until = $3, owner = $4
	FROM unnest($1::text[], $2::text[]) AS u(receiver, sender)
	WHERE l.receiver = u.receiver AND l.sender = u.sender`
	parkLanesSQL = `UPDATE lanes l SET parked = true
	FROM unnest($1::text[], $2::text[]) AS u(receiver, sender)
	WHERE l.receiver = u.receiver AND l.sender = u.sender`
)

// Claim implements core.Store.
func (s *Store) Claim(ctx context.Context, now, claimUntil time.Time, owner string, maxLanes, perLane int) ([]core.LaneClaim, error) {
	if maxLanes <= 0 || perLane <= 0 {
		return nil, nil
	}
	var out []core.LaneClaim
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, lockLanesSQL, now, maxLanes)
		if err != nil {
			return err
		}
		var recvs, sends []string
		for rows.Next() {
			var r, snd string
			if err := rows.Scan(&r, &snd); err != nil {
				rows.Close()
				return err
			}
			recvs, sends = append(recvs, r), append(sends, snd)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(recvs) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, laneMessagesSQL, recvs, sends, now, perLane, s.readBytes)
		if err != nil {
			return err
		}
		cut := make(map[core.Lane]bool) // lanes with messages past the byte bound
		for rows.Next() {
			var l core.Lane
			var body []byte
			var seq int64
			var attempts int
			var exp time.Time
			if err := rows.Scan(&l.Receiver, &l.Sender, &body, &seq, &attempts, &exp); err != nil {
				rows.Close()
				return err
			}
			if body == nil {
				cut[l] = true
				continue
			}
			m := new(core.Message)
			if err := json.Unmarshal(body, m); err != nil {
				rows.Close()
				return fmt.Errorf("decode message: %w", err)
			}
			m.Seq, m.Attempts, m.ExpiresAt = seq, attempts, utc(exp)
			if n := len(out); n == 0 || out[n-1].Lane != l {
				out = append(out, core.LaneClaim{Lane: l})
			}
			out[len(out)-1].Messages = append(out[len(out)-1].Messages, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		claimed := make(map[core.Lane]bool, len(out))
		var cr, cs, pr, ps []string
		for _, c := range out {
			claimed[c.Lane] = true
			cr, cs = append(cr, c.Lane.Receiver), append(cs, c.Lane.Sender)
		}
		for i := range recvs {
			// A lane without claimable messages is parked (they are all
			// leased to a puller); one cut off by the byte bound stays due.
			if l := (core.Lane{Receiver: recvs[i], Sender: sends[i]}); !claimed[l] && !cut[l] {
				pr, ps = append(pr, recvs[i]), append(ps, sends[i])
			}
		}
		if len(cr) > 0 {
			if _, err := tx.Exec(ctx, stampLanesSQL, cr, cs, claimUntil, owner); err != nil {
				return err
			}
		}
		if len(pr) > 0 {
			if _, err := tx.Exec(ctx, parkLanesSQL, pr, ps); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("claim", err)
	}
	return out, nil
}

// laneQueue is laneQueueSQL with the time and limit given as expressions.
func laneQueue(now, limit string) string {
	return `SELECT seq, body, attempts, expires_at FROM messages
		WHERE state = 0 AND receiver = l.receiver AND sender = l.sender AND claim_until <= ` + now + `
		ORDER BY seq LIMIT ` + limit
}

func laneCmp(a, b core.Lane) int {
	return cmp.Or(strings.Compare(a.Receiver, b.Receiver), strings.Compare(a.Sender, b.Sender))
}

// settleLaneSQL settles a lane after a delivery round. If owner $3 still
// holds it, it is next due at $4, parked or not ($5), and claimed until $6
// by $7 (the zero time and no owner release it); a lane whose claim lapsed
// and went to another owner keeps that owner's claim (the owner check is
// made under the row's lock, so it holds across instances).
const settleLaneSQL = `UPDATE lanes SET next_at = $4, parked = $5, claim_until = $6, owner = $7
	WHERE receiver = $1 AND sender = $2 AND owner = $3`

// Complete implements core.Store, in one round trip: the outcomes and the
// lanes' settlements go as one batch, which PostgreSQL runs as one
// (implicit) transaction. Lanes are processed in key order, messages
// before lanes, the lock order every write follows, to keep deadlocks
// (which are retried) rare.
func (s *Store) Complete(ctx context.Context, owner string, results []core.LaneResult) error {
	results = slices.Clone(results)
	slices.SortStableFunc(results, func(a, b core.LaneResult) int { return laneCmp(a.Lane, b.Lane) })
	var outs []core.Outcome
	for _, lr := range results {
		outs = append(outs, lr.Outcomes...)
	}
	var done []ended
	err := s.sendBatch(ctx, func(b *pgx.Batch) error {
		done = nil
		if err := queueOutcomes(b, outs, func(rc *core.Receipt) { done = append(done, ended{id: rc.MessageID, rc: rc}) }); err != nil {
			return err
		}
		for _, lr := range results {
			b.Queue(settleLaneSQL, lr.Lane.Receiver, lr.Lane.Sender, owner, lr.NextAt, lr.Park, time.Time{}, "")
		}
		return nil
	})
	if err != nil {
		return wrap("complete", err)
	}
	s.signalEnded(done...)
	for _, lr := range results {
		if !lr.Park && lr.NextAt.IsZero() {
			s.signalReleased()
			break
		}
	}
	return nil
}

// sendBatch sends the batch fill queues as one round trip, which
// PostgreSQL runs as one implicit transaction (all or nothing), retrying it
// after a deadlock or serialization failure; fill must reset whatever its
// callbacks collect, since they run again on a retry.
func (s *Store) sendBatch(ctx context.Context, fill func(b *pgx.Batch) error) error {
	for attempt := 1; ; attempt++ {
		var b pgx.Batch
		if err := fill(&b); err != nil {
			return err
		}
		err := s.pool.SendBatch(ctx, &b).Close()
		if err == nil || attempt == maxTxAttempts || !retryable(err) {
			return err
		}
		delay := time.Duration(attempt) * time.Duration(1+rand.IntN(5)) * time.Millisecond
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
}

// renewLaneSQL follows settleLaneSQL in CompleteRenew's transaction, as a
// statement of its own: under READ COMMITTED it takes a fresh snapshot after
// the lane's lock is held, so it sees the outcomes other instances committed
// meanwhile (as Claim's laneMessagesSQL does). If owner $5 holds lane
// ($1, $2), it returns the lane's next claimable messages (laneQueueSQL)
// and, when there are none, releases the lane. m is read twice, so it is
// evaluated once: the messages returned are the ones the release counted.
// A data-modifying WITH runs whether or not the query reads it. Messages
// are read while their bodies stay under $6 bytes (the first always).
var renewLaneSQL = `WITH l AS (
		SELECT receiver, sender FROM lanes WHERE receiver = $1 AND sender = $2 AND owner = $5
	), m AS (
		SELECT body, seq, attempts, expires_at FROM (
			SELECT m.body, m.seq, m.attempts, m.expires_at, length(m.body) AS len, sum(length(m.body)) OVER (ORDER BY m.seq) AS run
			FROM l CROSS JOIN LATERAL (` + laneQueueSQL + `) m
		) q WHERE run - len < $6
	), released AS (
		UPDATE lanes SET claim_until = ` + zeroTS + `, owner = ''
		WHERE receiver = $1 AND sender = $2 AND owner = $5 AND NOT EXISTS (SELECT FROM m)
	)
	SELECT body, seq, attempts, expires_at FROM m ORDER BY seq`

// completeRenew is CompleteRenew for one lane that stays claimed or is
// released (complete.go), with its own statements.
func (s *Store) completeRenew(ctx context.Context, owner string, res core.LaneResult, now, claimUntil time.Time, perLane int) ([]*core.Message, error) {
	var next []*core.Message
	var done []ended
	err := s.sendBatch(ctx, func(b *pgx.Batch) error {
		next, done = nil, nil
		if err := queueOutcomes(b, res.Outcomes, func(rc *core.Receipt) { done = append(done, ended{id: rc.MessageID, rc: rc}) }); err != nil {
			return err
		}
		b.Queue(settleLaneSQL, res.Lane.Receiver, res.Lane.Sender, owner, now, false, claimUntil, owner)
		b.Queue(renewLaneSQL, res.Lane.Receiver, res.Lane.Sender, now, perLane, owner, s.readBytes).Query(func(rows pgx.Rows) error {
			ms, err := collectMessages(rows, nil)
			next = ms
			return err
		})
		return nil
	})
	if err != nil {
		return nil, wrap("complete and renew", err)
	}
	s.signalEnded(done...)
	if len(next) == 0 {
		s.signalReleased() // released, as by Complete
	}
	return next, nil
}

// historyFrom is appendHistory for set-based updates: the event is column
// ev (text) of the joined outcomes.
const historyFrom = "history = CASE WHEN jsonb_array_length(m.history) < 64 THEN m.history ELSE m.history - 1 END || jsonb_build_array(o.ev::jsonb)"

// queueOutcomes queues the statements that record outs, one per kind of
// update (set-based: a claim's hundreds of outcomes cost two statements, not
// hundreds); ended is called with the receipt, as stored, of each message
// moved to a terminal status. Outcomes for messages no longer queued match
// nothing and are ignored.
func queueOutcomes(b *pgx.Batch, outs []core.Outcome, ended func(rc *core.Receipt)) error {
	var retry, final struct {
		ids, errs, events, statuses []string
		codes, attempts             []int32
		at, next                    []time.Time
		replies                     [][]byte
	}
	for _, o := range outs {
		var status core.Status
		attempt := int32(1)
		switch o.Kind {
		case core.OutcomeDelivered:
			status = core.StatusDelivered
		case core.OutcomeRejected:
			status = core.StatusRejected
		case core.OutcomeTimeout:
			status, attempt = core.StatusTimeout, 0
		case core.OutcomeRetry:
			retry.ids = append(retry.ids, o.MessageID)
			retry.codes = append(retry.codes, int32(o.Code))
			retry.errs = append(retry.errs, core.SanitizeText(o.Error))
			retry.next = append(retry.next, o.NextAt)
			retry.at = append(retry.at, o.At)
			retry.events = append(retry.events, event(o.At, core.StatusQueued, retryDetail(o)))
			continue
		default:
			return fmt.Errorf("unknown outcome kind %d", o.Kind)
		}
		var reply []byte
		if len(o.Reply) > 0 {
			reply = o.Reply
		}
		final.ids = append(final.ids, o.MessageID)
		final.statuses = append(final.statuses, string(status))
		final.attempts = append(final.attempts, attempt)
		final.codes = append(final.codes, int32(o.Code))
		final.errs = append(final.errs, core.SanitizeText(o.Error))
		final.replies = append(final.replies, reply)
		final.at = append(final.at, o.At)
		final.events = append(final.events, event(o.At, status, o.Detail))
	}
	if len(retry.ids) > 0 {
		b.Queue(`WITH o AS (
				SELECT * FROM unnest($1::text[], $2::integer[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::text[])
					AS o(id, code, err, next_at, at, ev)
			)
			UPDATE messages m SET attempts = m.attempts + 1, code = o.code, last_error = o.err, next_at = o.next_at, updated_at = o.at, `+historyFrom+`
			FROM o WHERE m.id = o.id AND m.state = 0`,
			retry.ids, retry.codes, retry.errs, retry.next, retry.at, retry.events)
	}
	if len(final.ids) > 0 {
		b.Queue(`WITH o AS (
				SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[], $5::text[], $6::bytea[], $7::timestamptz[], $8::text[])
					AS o(id, status, attempt, code, err, reply, at, ev)
			)
			UPDATE messages m SET state = 1, status = o.status, attempts = m.attempts + o.attempt,
				-- a timeout without a code or error of its own keeps the last attempt's
				code = CASE WHEN o.status = 'timeout' AND o.code = 0 THEN m.code ELSE o.code END,
				last_error = CASE WHEN o.status = 'timeout' AND o.err = '' THEN m.last_error ELSE o.err END,
				reply = o.reply, updated_at = o.at, claim_until = `+zeroTS+`, `+historyFrom+`
			FROM o WHERE m.id = o.id AND m.state = 0
			RETURNING `+receiptCols("m"),
			final.ids, final.statuses, final.attempts, final.codes, final.errs, final.replies, final.at, final.events).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					rc, err := scanReceipt(rows)
					if err != nil {
						return err
					}
					ended(rc)
				}
				return rows.Err()
			})
	}
	return nil
}

func retryDetail(o core.Outcome) string {
	if o.Detail != "" {
		return o.Detail
	}
	if o.Error != "" {
		return "retry: " + o.Error
	}
	return "retry"
}

// ExpireDue implements core.Store.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int) ([]*core.Receipt, error) {
	var out []*core.Receipt
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = collectReceipts(tx.Query(ctx, `WITH due AS (
				SELECT seq FROM messages WHERE state = 0 AND expires_at <= $1
				ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
			)
			UPDATE messages m SET state = 1, status = 'timeout', updated_at = $1, claim_until = `+zeroTS+`, `+appendHistory("$3")+`
			FROM due WHERE m.seq = due.seq
			RETURNING `+receiptCols("m"),
			now, lim(limit), event(now, core.StatusTimeout, "ttl passed before delivery")))
		return err
	})
	if err != nil {
		return nil, wrap("expire", err)
	}
	slices.SortFunc(out, func(a, b *core.Receipt) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), strings.Compare(a.MessageID, b.MessageID))
	})
	s.signalEnded(endedReceipts(out)...)
	return out, nil
}

// Wake implements core.Store.
func (s *Store) Wake(ctx context.Context, receiver string, now time.Time) (int, error) {
	if !core.Storable(receiver) {
		return 0, nil
	}
	var depth int
	err := s.pool.QueryRow(ctx, `WITH w AS (
			UPDATE lanes SET parked = false, next_at = LEAST(next_at, $2) WHERE receiver = $1
		) SELECT count(*) FROM messages WHERE state = 0 AND receiver = $1`, receiver, now).Scan(&depth)
	if err != nil {
		return 0, wrap("wake", err)
	}
	if depth > 0 {
		s.signalAccepted()
	}
	return depth, nil
}

// QueueDepth implements core.Store. Concurrent calls for one receiver
// share one query.
func (s *Store) QueueDepth(ctx context.Context, receiver string) (int, error) {
	if !core.Storable(receiver) {
		return 0, nil
	}
	return s.depthReads.do(receiver, func() (int, error) {
		var depth int
		if err := s.pool.QueryRow(context.WithoutCancel(ctx), "SELECT count(*) FROM messages WHERE state = 0 AND receiver = $1", receiver).Scan(&depth); err != nil {
			return 0, wrap("queue depth", err)
		}
		return depth, nil
	})
}

// Pull implements core.Store. Concurrent pullers of one receiver skip each
// other's rows (FOR UPDATE SKIP LOCKED) rather than lease a message twice.
func (s *Store) Pull(ctx context.Context, receiver string, now, visibleAt time.Time, limit int, autoAck bool) ([]*core.Message, error) {
	if !core.Storable(receiver) {
		return nil, nil
	}
	// Up to $3 messages, and only while their bodies stay under
	// s.readBytes (the first always).
	pick := `WITH locked AS (
		SELECT seq, length(body) AS len FROM messages
		WHERE state = 0 AND receiver = $1 AND claim_until <= $2 AND expires_at > $2
		ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED
	), picked AS (
		SELECT seq FROM (SELECT seq, len, sum(len) OVER (ORDER BY seq) AS run FROM locked) q
		WHERE run - len < ` + strconv.FormatInt(s.readBytes, 10) + `
	) `
	var out []*core.Message
	var ended []string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out, ended = out[:0], ended[:0]
		if !autoAck {
			var err error
			out, err = collectMessages(tx.Query(ctx, pick+`UPDATE messages m SET claim_until = $4, attempts = m.attempts + 1, updated_at = $2, `+appendHistory("$5")+`
				FROM picked WHERE m.seq = picked.seq
				RETURNING m.body, m.seq, m.attempts, m.expires_at`,
				receiver, now, lim(limit), visibleAt, event(now, core.StatusQueued, core.DetailPulled)))
			return err
		}
		rows, err := tx.Query(ctx, pick+`UPDATE messages m SET state = 1, status = 'delivered', attempts = GREATEST(m.attempts, 1), updated_at = $2,
				claim_until = `+zeroTS+`, `+appendHistory("$4")+`
			FROM picked WHERE m.seq = picked.seq
			RETURNING m.body, m.seq, m.attempts, m.expires_at, m.sender`,
			receiver, now, lim(limit), event(now, core.StatusDelivered, "pulled"))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*core.Message, error) {
			var sender string
			m, err := scanMessage(r, &sender)
			if err == nil {
				ended = append(ended, m.ID)
			}
			return m, err
		})
		return err
	})
	if err != nil {
		return nil, wrap("pull", err)
	}
	slices.SortFunc(out, func(a, b *core.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	s.signalEnded(endedIDs(ended)...)
	return out, nil
}

// Ack implements core.Store.
func (s *Store) Ack(ctx context.Context, receiver string, ids []string, now time.Time) (int, error) {
	if !core.Storable(receiver) {
		return 0, nil
	}
	// An id that could not have been stored matches nothing.
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !core.Storable(id) })
	if len(ids) == 0 {
		return 0, nil
	}
	var ended []string
	var err error
	for range maxTxAttempts {
		ended = ended[:0]
		var rows pgx.Rows
		rows, err = s.pool.Query(ctx, `UPDATE messages SET state = 1, status = 'delivered', attempts = GREATEST(attempts, 1), updated_at = $3,
				claim_until = `+zeroTS+`, `+appendHistory("$4")+`
			WHERE receiver = $1 AND id = ANY($2) AND state = 0
			RETURNING id`,
			receiver, ids, now, event(now, core.StatusDelivered, "acknowledged"))
		if err == nil {
			var id string
			_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
				ended = append(ended, id)
				return nil
			})
		}
		if err == nil || !retryable(err) {
			break
		}
	}
	if err != nil {
		return 0, wrap("ack", err)
	}
	s.signalEnded(endedIDs(ended)...)
	return len(ended), nil
}

// DeadLetters implements core.Store.
func (s *Store) DeadLetters(ctx context.Context, f core.DeadLetterFilter) ([]*core.Receipt, error) {
	if !core.Storable(f.Receiver) {
		return nil, nil
	}
	q := "SELECT " + receiptCols("") + " FROM messages WHERE state = 1 AND status IN ('timeout', 'rejected')"
	args := []any{lim(f.Limit)}
	if f.Receiver != "" {
		q += " AND receiver = $2"
		args = append(args, f.Receiver)
	}
	q += " ORDER BY updated_at DESC, seq DESC LIMIT $1"
	rs, err := collectReceipts(s.pool.Query(ctx, q, args...))
	if err != nil {
		return nil, wrap("dead letters", err)
	}
	return rs, nil
}

// Replay implements core.Store.
func (s *Store) Replay(ctx context.Context, id string, now, expiresAt time.Time) (*core.Receipt, error) {
	if !core.Storable(id) {
		return nil, fmt.Errorf("message %q: %w", id, core.ErrNotFound)
	}
	var out *core.Receipt
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var status string
		err := tx.QueryRow(ctx, "SELECT status FROM messages WHERE id = $1 FOR UPDATE", id).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("message %q: %w", id, core.ErrNotFound)
		}
		if err != nil {
			return wrap("replay", err)
		}
		if !core.Status(status).DeadLetter() {
			return fmt.Errorf("message %q is %s, not a dead letter: %w", id, status, core.ErrConflict)
		}
		out, err = scanReceipt(tx.QueryRow(ctx, `UPDATE messages SET state = 0, status = 'queued', expires_at = $2, next_at = `+zeroTS+`,
				claim_until = `+zeroTS+`, updated_at = $3, `+appendHistory("$4")+`
			WHERE id = $1 RETURNING `+receiptCols(""),
			id, expiresAt, now, event(now, core.StatusQueued, "replayed from dead letters")))
		if err != nil {
			return wrap("replay", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO lanes (receiver, sender, pending, next_at) VALUES ($1, $2, 0, $3)
			ON CONFLICT (receiver, sender) DO UPDATE SET parked = false`,
			out.Receiver, out.Sender, now); err != nil {
			return wrap("replay", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.signalAccepted()
	return out, nil
}

// PurgeBefore implements core.Store. Its last round (fewer than limit
// deleted) also sweeps the lanes (lanes.go).
func (s *Store) PurgeBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM messages WHERE seq IN (
		SELECT seq FROM messages WHERE state = 1 AND updated_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, t, lim(limit))
	if err != nil {
		return 0, wrap("purge", err)
	}
	n := int(tag.RowsAffected())
	if n < lim(limit) { // the last round of a purge: tidy the lanes too
		if err := s.sweepLanes(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

// QueueBytes implements core.QueueSizer: the stored size of a receiver's
// queued messages (length reads a large body's size from its TOAST
// pointer, without fetching it). Concurrent calls for one receiver share
// one query.
func (s *Store) QueueBytes(ctx context.Context, receiver string) (int64, error) {
	if !core.Storable(receiver) {
		return 0, nil
	}
	return s.byteReads.do(receiver, func() (int64, error) {
		var n int64
		if err := s.pool.QueryRow(context.WithoutCancel(ctx), "SELECT COALESCE(SUM(length(body)), 0)::bigint FROM messages WHERE state = 0 AND receiver = $1", receiver).Scan(&n); err != nil {
			return 0, wrap("queue bytes", err)
		}
		return n, nil
	})
}
