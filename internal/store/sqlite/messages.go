package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// maxHistory bounds the events kept in one receipt's history.
const maxHistory = 64

// appendHistory is the SQL expression that appends the JSON event in the
// next parameter to the history column. At maxHistory events it drops the
// second one, so the history keeps its first event (accepted) and the latest
// ones, including the terminal event. A history shorter than shortHistory
// bytes has fewer than maxHistory-1 events (each takes more than
// minEventBytes), so the event is spliced in as text; only longer ones are
// parsed to count and trim them. The subquery names the one parameter for
// both branches.
var appendHistory = fmt.Sprintf(`history = (SELECT CASE
	WHEN length(history) < %d THEN substr(history, 1, length(history) - 1) || CASE WHEN history = '[]' THEN '' ELSE ',' END || e.ev || ']'
	ELSE json_insert(CASE WHEN json_array_length(history) < %d THEN history ELSE json_remove(history, '$[1]') END, '$[#]', json(e.ev)) END
	FROM (SELECT ? AS ev) AS e)`, shortHistory, maxHistory)

// minEventBytes is a lower bound on an event's JSON length: at least
// {"at":"2006-01-02T15:04:05Z","status":"queued"} less a few letters of the
// status.
const minEventBytes = 40

// shortHistory is a history length below which it surely has room for one
// more event.
const shortHistory = (maxHistory - 2) * minEventBytes

func event(at time.Time, st core.Status, detail string) string {
	e := core.ReceiptEvent{At: at, Status: st, Detail: detail}
	b, _ := e.AppendJSON(make([]byte, 0, 96))
	return string(b)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Accept implements core.Store.
func (s *Store) Accept(ctx context.Context, m *core.Message, r *core.Receipt, maxQueue int) (core.AcceptResult, error) {
	res, _, err := s.accept(ctx, m, r, maxQueue, nil, nil)
	return res, err
}

// AcceptPulled implements core.AcceptPuller. It hands the message out only
// when the receiver's pull cursor (see pull.go) shows, without a read, that
// every other message of its queue is claimed: the receiver's last pull
// handed out all it could and every message accepted for it since was
// handed out this way.
func (s *Store) AcceptPulled(ctx context.Context, m *core.Message, r *core.Receipt, maxQueue int, now, visibleAt time.Time) (core.AcceptResult, bool, error) {
	return s.accept(ctx, m, r, maxQueue, &pullLease{now: now, until: visibleAt}, nil)
}

// AcceptClaimed implements core.AcceptClaimer: in the accept's own
// write, the message's lane is claimed for owner until claimUntil when the
// message is its only queued one and nobody holds or parked it, as Claim
// would have claimed it; no Claim of the lane is needed for its first
// attempt.
func (s *Store) AcceptClaimed(ctx context.Context, m *core.Message, r *core.Receipt, maxQueue int, now, claimUntil time.Time, owner string) (core.AcceptResult, bool, error) {
	return s.accept(ctx, m, r, maxQueue, nil, &laneClaim{now: now, until: claimUntil, owner: owner})
}

// pullLease is the pull an accept may do: at now, until until.
type pullLease struct{ now, until time.Time }

// laneClaim is the claim of its lane an accept may make: at now, until
// until, for owner.
type laneClaim struct {
	now, until time.Time
	owner      string
}

// accept stores m and its receipt r. With lease it may hand m out to a
// stream (pulled); with claim it may claim m's lane (then pulled reports
// the claim).
func (s *Store) accept(ctx context.Context, m *core.Message, r *core.Receipt, maxQueue int, lease *pullLease, claim *laneClaim) (core.AcceptResult, bool, error) {
	if err := core.CheckStorableMessage(m); err != nil {
		return core.AcceptResult{}, false, err
	}
	body, err := m.AppendJSON(make([]byte, 0, 512))
	if err != nil {
		return core.AcceptResult{}, false, fmt.Errorf("sqlite: encode message: %w", err)
	}
	hist, err := core.AppendHistoryJSON(nil, r.History) // never "null": events are appended to it
	if err != nil {
		return core.AcceptResult{}, false, fmt.Errorf("sqlite: encode receipt history: %w", err)
	}
	// The history it gets if it is handed out, as Pull would record it.
	var pulledEvents []core.ReceiptEvent
	var pulledHist []byte
	if lease != nil {
		pulledEvents = append(slices.Clip(r.History), core.ReceiptEvent{At: lease.now, Status: core.StatusQueued, Detail: core.DetailPulled})
		if pulledHist, err = core.AppendHistoryJSON(nil, pulledEvents); err != nil {
			return core.AcceptResult{}, false, fmt.Errorf("sqlite: encode receipt history: %w", err)
		}
	}
	var res core.AcceptResult
	var pulled bool
	err = s.writeOp(ctx, &op{err: make(chan error, 1), lazyLanes: true, fn: func(tx *wtx) error {
		pulled = false
		queued := r.Status == core.StatusQueued
		state := 1
		if queued {
			state = 0
		}
		duplicate := func() error {
			rc, err := scanReceipt(tx.QueryRowContext(ctx, "SELECT "+receiptCols+" FROM messages WHERE id = ?", m.ID))
			if err != nil {
				return fmt.Errorf("sqlite: read receipt: %w", err)
			}
			if rc.Sender != m.Sender || rc.Receiver != m.Receiver {
				return core.IDConflict(m, rc)
			}
			res = core.AcceptResult{Receipt: *rc, Duplicate: true}
			return nil
		}
		if queued && maxQueue > 0 {
			// The depth below reads the lanes.
			if err := tx.flushPending(); err != nil {
				return err
			}
			// Check before writing, so a refusal leaves nothing to undo.
			var one int
			switch err := tx.QueryRowContext(ctx, "SELECT 1 FROM messages WHERE id = ?", m.ID).Scan(&one); {
			case err == nil:
				return duplicate()
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("sqlite: check message id: %w", err)
			}
			var depth int
			if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(pending), 0) FROM lanes WHERE receiver = ?", m.Receiver).Scan(&depth); err != nil {
				return fmt.Errorf("sqlite: queue depth: %w", err)
			}
			if depth >= maxQueue {
				return fmt.Errorf("receiver %q has %d queued: %w", m.Receiver, depth, core.ErrQueueFull)
			}
		}
		// Hand it out now if the receiver's cursor shows that nothing
		// older of its queue can be pulled.
		cur, hasCursor := s.cursors[m.Receiver]
		handOut := queued && lease != nil && hasCursor && s.cursorReach >= 0 && !cur.behind && ts(lease.now) < cur.until
		h, claimUntil, attempts, updated := hist, int64(0), 0, ts(r.UpdatedAt)
		if handOut {
			h, claimUntil, attempts, updated = pulledHist, ts(lease.until), 1, ts(lease.now)
		}
		out, err := tx.ExecContext(ctx, `INSERT INTO messages(id, sender, receiver, state, status, history, expires_at, created_at, updated_at, conversation_id, correlation_id, body, claim_until, attempts)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO NOTHING`,
			m.ID, m.Sender, m.Receiver, state, string(r.Status), string(h), ts(m.ExpiresAt), ts(r.CreatedAt), updated,
			nullable(m.ConversationID), nullable(m.CorrelationID), body, claimUntil, attempts)
		if err != nil {
			return fmt.Errorf("sqlite: insert message: %w", err)
		}
		if n, _ := out.RowsAffected(); n == 0 {
			return duplicate()
		}
		seq, _ := out.LastInsertId()
		tx.afterCommit(func() { s.lastSeq = max(s.lastSeq, seq) })
		if hasCursor && queued {
			// Keep the cursor's promise (see pull.go): a message handed
			// out moves it on; one left in the queue means the next pull
			// must look for it before anything is handed out again.
			if handOut {
				cur.after, cur.until = seq, min(cur.until, claimUntil)
			} else {
				cur.behind = true
			}
			s.cursors[m.Receiver] = cur
		}
		switch {
		case queued && claim == nil:
			// Written with the batch's other accepts (addPending).
			tx.addPending(m.Receiver, m.Sender, ts(m.ReceivedAt))
		case queued:
			// The claim reads the lane as this accept leaves it.
			if err := tx.flushPending(); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, upsertLane, m.Receiver, m.Sender, 1, ts(m.ReceivedAt)); err != nil {
				return fmt.Errorf("sqlite: update lane: %w", err)
			}
			out, err := tx.ExecContext(ctx, `UPDATE lanes SET claim_until = ?, owner = ?
				WHERE receiver = ? AND sender = ? AND pending = 1 AND parked = 0 AND claim_until <= ?`,
				ts(claim.until), claim.owner, m.Receiver, m.Sender, ts(claim.now))
			if err != nil {
				return fmt.Errorf("sqlite: claim lane: %w", err)
			}
			n, _ := out.RowsAffected()
			pulled = n == 1
		}
		if m.ConversationID != "" {
			at := ts(m.ReceivedAt)
			if _, err := tx.ExecContext(ctx, `INSERT INTO conversations(id, created_at, last_message_at, messages) VALUES (?,?,?,1)
				ON CONFLICT(id) DO UPDATE SET last_message_at = excluded.last_message_at, messages = messages + 1`,
				m.ConversationID, at, at); err != nil {
				return fmt.Errorf("sqlite: update conversation: %w", err)
			}
			for _, p := range []string{m.Sender, m.Receiver} {
				if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO participants(conversation_id, agent_id, joined_at) VALUES (?,?,?)",
					m.ConversationID, p, at); err != nil {
					return fmt.Errorf("sqlite: add participant: %w", err)
				}
			}
		}
		m.Seq = seq
		if queued {
			size := int64(len(body))
			tx.afterCommit(func() { tx.s.cache.put(m, size) })
		}
		res = core.AcceptResult{Receipt: *r}
		if handOut {
			m.Attempts, pulled = 1, true
			res.Receipt.Attempts = 1
			res.Receipt.UpdatedAt = lease.now
			res.Receipt.History = pulledEvents
		}
		return nil
	}})
	return res, pulled, err
}

const receiptCols = "id, sender, receiver, status, attempts, code, last_error, reply, history, created_at, updated_at, next_at, expires_at"

func scanReceipt(sc interface{ Scan(...any) error }) (*core.Receipt, error) {
	var r core.Receipt
	var status, hist string
	var reply []byte
	var created, updated, next, exp int64
	if err := sc.Scan(&r.MessageID, &r.Sender, &r.Receiver, &status, &r.Attempts, &r.Code, &r.LastError, &reply, &hist,
		&created, &updated, &next, &exp); err != nil {
		return nil, err
	}
	r.Status = core.Status(status)
	if len(reply) > 0 {
		r.Reply = json.RawMessage(reply)
	}
	if err := json.Unmarshal([]byte(hist), &r.History); err != nil {
		return nil, fmt.Errorf("sqlite: decode history: %w", err)
	}
	r.CreatedAt, r.UpdatedAt, r.ExpiresAt = tm(created), tm(updated), tm(exp)
	if r.Status == core.StatusQueued {
		r.NextAttempt = tm(next)
	}
	return &r, nil
}

const messageCols = "body, seq, attempts, expires_at"

// queuedCols is messageCols with the id first, for the cache.
const queuedCols = "id, body, seq, attempts, expires_at"

// scanQueued reads rows of queuedCols, taking bodies from the cache when
// it has them, until their stored bodies reach maxBytes (at least one is
// read). It returns the bytes read and whether it stopped at maxBytes
// with rows left.
func (s *Store) scanQueued(maxBytes int64) func(rows *sql.Rows, err error) ([]*core.Message, int64, bool, error) {
	return func(rows *sql.Rows, err error) ([]*core.Message, int64, bool, error) {
		return s.scanQueuedRows(rows, err, maxBytes)
	}
}

func (s *Store) scanQueuedRows(rows *sql.Rows, err error, maxBytes int64) ([]*core.Message, int64, bool, error) {
	if err != nil {
		return nil, 0, false, err
	}
	defer rows.Close()
	var out []*core.Message
	var total int64
	for rows.Next() {
		if len(out) > 0 && total >= maxBytes {
			return out, total, true, nil
		}
		var id string
		var body sql.RawBytes
		var seq, exp int64
		var attempts int
		if err := rows.Scan(&id, &body, &seq, &attempts, &exp); err != nil {
			return nil, 0, false, err
		}
		total += int64(len(body))
		m := s.cache.get(id, seq)
		if m == nil {
			m = new(core.Message)
			if err := json.Unmarshal(body, m); err != nil {
				return nil, 0, false, fmt.Errorf("sqlite: decode message: %w", err)
			}
		}
		m.Seq, m.Attempts, m.ExpiresAt = seq, attempts, tm(exp)
		out = append(out, m)
	}
	return out, total, false, rows.Err()
}

func scanMessage(sc interface{ Scan(...any) error }) (*core.Message, error) {
	var body []byte
	var seq, exp int64
	var attempts int
	if err := sc.Scan(&body, &seq, &attempts, &exp); err != nil {
		return nil, err
	}
	m := new(core.Message)
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("sqlite: decode message: %w", err)
	}
	m.Seq, m.Attempts, m.ExpiresAt = seq, attempts, tm(exp)
	return m, nil
}

func scanMessages(rows *sql.Rows, err error) ([]*core.Message, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// GetMessage implements core.Store.
func (s *Store) GetMessage(ctx context.Context, id string) (*core.Message, error) {
	m, err := scanMessage(s.readRow(ctx, "SELECT "+messageCols+" FROM messages WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("message %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get message: %w", err)
	}
	return m, nil
}

// GetReceipt implements core.Store.
func (s *Store) GetReceipt(ctx context.Context, id string) (*core.Receipt, error) {
	r, err := scanReceipt(s.readRow(ctx, "SELECT "+receiptCols+" FROM messages WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("receipt %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get receipt: %w", err)
	}
	return r, nil
}

// Results implements core.Store.
func (s *Store) Results(ctx context.Context, correlationID string, limit int) ([]*core.Message, error) {
	ms, err := scanMessages(s.read(ctx, "SELECT "+messageCols+" FROM messages WHERE correlation_id = ? ORDER BY seq LIMIT ?", correlationID, lim(limit)))
	if err != nil {
		return nil, fmt.Errorf("sqlite: results: %w", err)
	}
	return ms, nil
}

func lim(n int) int {
	if n <= 0 {
		return 1000
	}
	return n
}

// Claim implements core.Store.
func (s *Store) Claim(ctx context.Context, now, claimUntil time.Time, owner string, maxLanes, perLane int) ([]core.LaneClaim, error) {
	var out []core.LaneClaim
	err := s.write(ctx, func(tx *wtx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, `SELECT receiver, sender FROM lanes
			WHERE pending > 0 AND parked = 0 AND next_at <= ? AND claim_until <= ? ORDER BY next_at LIMIT ?`,
			ts(now), ts(now), maxLanes)
		if err != nil {
			return fmt.Errorf("sqlite: find due lanes: %w", err)
		}
		var lanes []core.Lane
		for rows.Next() {
			var l core.Lane
			if err := rows.Scan(&l.Receiver, &l.Sender); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: find due lanes: %w", err)
			}
			lanes = append(lanes, l)
		}
		rows.Close()
		left := s.readBytes
		for _, l := range lanes {
			if left <= 0 {
				break // read enough for one claim; the other lanes stay due
			}
			ms, n, err := s.claimable(ctx, tx, l, now, perLane, left)
			if err != nil {
				return err
			}
			left -= n
			if len(ms) == 0 {
				// The lane's messages are all leased to a puller.
				if _, err := tx.ExecContext(ctx, "UPDATE lanes SET parked = 1 WHERE receiver = ? AND sender = ?", l.Receiver, l.Sender); err != nil {
					return fmt.Errorf("sqlite: claim lane: %w", err)
				}
				continue
			}
			if _, err := tx.ExecContext(ctx, "UPDATE lanes SET claim_until = ?, owner = ? WHERE receiver = ? AND sender = ?",
				ts(claimUntil), owner, l.Receiver, l.Sender); err != nil {
				return fmt.Errorf("sqlite: claim lane: %w", err)
			}
			out = append(out, core.LaneClaim{Lane: l, Messages: ms})
		}
		return nil
	})
	return out, err
}

// claimable reads up to perLane of a lane's queued messages that no puller
// holds at now, in order, and no more than maxBytes of them (but at least
// one); it returns the bytes read.
func (s *Store) claimable(ctx context.Context, tx *wtx, l core.Lane, now time.Time, perLane int, maxBytes int64) ([]*core.Message, int64, error) {
	ms, n, _, err := s.scanQueued(maxBytes)(tx.QueryContext(ctx, "SELECT "+queuedCols+` FROM messages
		WHERE state = 0 AND receiver = ? AND sender = ? AND claim_until <= ? ORDER BY seq LIMIT ?`,
		l.Receiver, l.Sender, ts(now), perLane))
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: claim lane: %w", err)
	}
	return ms, n, nil
}

// CompleteRenew implements core.LaneRenewer: one write records the lane's
// outcomes and either keeps it claimed with its next messages or releases
// it.
func (s *Store) CompleteRenew(ctx context.Context, owner string, lr core.LaneResult, now, claimUntil time.Time, perLane int) ([]*core.Message, error) {
	if lr.Park || !lr.NextAt.IsZero() {
		return nil, s.Complete(ctx, owner, []core.LaneResult{lr})
	}
	var next []*core.Message
	err := s.write(ctx, func(tx *wtx) error {
		next = nil
		ended, err := applyOutcomes(ctx, tx, lr.Outcomes)
		if err != nil {
			return err
		}
		// Only the lane's owner renews or releases it (a lane whose claim
		// lapsed and went to another owner keeps that owner's claim). The
		// owner keeps a lane that still has messages and releases an empty
		// one; SET expressions see the row as it was.
		var holder string
		err = tx.QueryRowContext(ctx, `UPDATE lanes SET pending = pending - ?1,
			next_at = CASE WHEN owner = ?2 THEN ?3 ELSE next_at END,
			claim_until = CASE WHEN owner = ?2 THEN (CASE WHEN pending - ?1 > 0 THEN ?4 ELSE 0 END) ELSE claim_until END,
			owner = CASE WHEN owner = ?2 AND pending - ?1 <= 0 THEN '' ELSE owner END
			WHERE receiver = ?5 AND sender = ?6 RETURNING owner`,
			ended, owner, ts(now), ts(claimUntil), lr.Lane.Receiver, lr.Lane.Sender).Scan(&holder)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && holder != owner) {
			return nil // not ours (any more)
		}
		if err != nil {
			return fmt.Errorf("sqlite: renew lane: %w", err)
		}
		ms, _, err := s.claimable(ctx, tx, lr.Lane, now, perLane, s.readBytes)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			// Its messages are all leased to a puller: release it.
			if _, err := tx.ExecContext(ctx, "UPDATE lanes SET claim_until = 0, owner = '' WHERE receiver = ? AND sender = ? AND owner = ?",
				lr.Lane.Receiver, lr.Lane.Sender, owner); err != nil {
				return fmt.Errorf("sqlite: release lane: %w", err)
			}
		}
		next = ms
		return nil
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}

// Complete implements core.Store.
func (s *Store) Complete(ctx context.Context, owner string, results []core.LaneResult) error {
	return s.write(ctx, func(tx *wtx) error {
		for _, lr := range results {
			ended, err := applyOutcomes(ctx, tx, lr.Outcomes)
			if err != nil {
				return err
			}
			parked := 0
			if lr.Park {
				parked = 1
			}
			if _, err := tx.ExecContext(ctx, `UPDATE lanes SET pending = pending - ?,
				next_at = CASE WHEN owner = ? THEN ? ELSE next_at END,
				parked = CASE WHEN owner = ? THEN ? ELSE parked END,
				claim_until = CASE WHEN owner = ? THEN 0 ELSE claim_until END,
				owner = CASE WHEN owner = ? THEN '' ELSE owner END
				WHERE receiver = ? AND sender = ?`,
				ended, owner, ts(lr.NextAt), owner, parked, owner, owner, lr.Lane.Receiver, lr.Lane.Sender); err != nil {
				return fmt.Errorf("sqlite: release lane: %w", err)
			}
		}
		return nil
	})
}

// applyOutcomes records outcomes and returns how many messages ended.
func applyOutcomes(ctx context.Context, tx *wtx, outs []core.Outcome) (int, error) {
	ended := 0
	for _, o := range outs {
		n, err := applyOutcome(ctx, tx, o)
		if err != nil {
			return 0, err
		}
		ended += n
	}
	return ended, nil
}

// applyOutcome records one outcome; it returns 1 when the message ended.
func applyOutcome(ctx context.Context, tx *wtx, o core.Outcome) (int, error) {
	var status core.Status
	attempt := 1
	switch o.Kind {
	case core.OutcomeDelivered:
		status = core.StatusDelivered
	case core.OutcomeRejected:
		status = core.StatusRejected
	case core.OutcomeTimeout:
		status, attempt = core.StatusTimeout, 0
	case core.OutcomeRetry:
		res, err := tx.ExecContext(ctx, `UPDATE messages SET attempts = attempts + 1, code = ?, last_error = ?, next_at = ?, updated_at = ?, `+appendHistory+`
			WHERE id = ? AND state = 0`,
			o.Code, o.Error, ts(o.NextAt), ts(o.At), event(o.At, core.StatusQueued, retryDetail(o)), o.MessageID)
		if err != nil {
			return 0, fmt.Errorf("sqlite: record retry: %w", err)
		}
		_, _ = res.RowsAffected()
		return 0, nil
	default:
		return 0, fmt.Errorf("sqlite: unknown outcome kind %d", o.Kind)
	}
	var reply any
	if len(o.Reply) > 0 {
		reply = o.Reply
	}
	// A timeout that brings no code or error of its own (the scheduler
	// found the TTL passed at the next attempt) keeps those of the last
	// failed attempt: that is what a dead letter's reader needs.
	keep := 0
	if o.Kind == core.OutcomeTimeout {
		keep = 1
	}
	res, err := tx.ExecContext(ctx, `UPDATE messages SET state = 1, status = ?, attempts = attempts + ?,
		code = CASE WHEN ? = 1 AND ? = 0 THEN code ELSE ? END,
		last_error = CASE WHEN ? = 1 AND ? = '' THEN last_error ELSE ? END,
		reply = ?, updated_at = ?, claim_until = 0, `+appendHistory+`
		WHERE id = ? AND state = 0`,
		string(status), attempt, keep, o.Code, o.Code, keep, o.Error, o.Error, reply, ts(o.At), event(o.At, status, o.Detail), o.MessageID)
	if err != nil {
		return 0, fmt.Errorf("sqlite: record outcome: %w", err)
	}
	n, _ := res.RowsAffected()
	tx.afterCommit(func() { tx.s.cache.drop(o.MessageID) })
	return int(n), nil
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
	err := s.write(ctx, func(tx *wtx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, "SELECT seq, receiver, sender FROM messages WHERE state = 0 AND expires_at <= ? ORDER BY expires_at LIMIT ?", ts(now), lim(limit))
		if err != nil {
			return fmt.Errorf("sqlite: find expired: %w", err)
		}
		type row struct {
			seq  int64
			lane core.Lane
		}
		var due []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.seq, &r.lane.Receiver, &r.lane.Sender); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: find expired: %w", err)
			}
			due = append(due, r)
		}
		rows.Close()
		ev := event(now, core.StatusTimeout, "ttl passed before delivery")
		for _, r := range due {
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET state = 1, status = 'timeout', updated_at = ?, claim_until = 0, `+appendHistory+` WHERE seq = ?`,
				ts(now), ev, r.seq); err != nil {
				return fmt.Errorf("sqlite: expire: %w", err)
			}
			if _, err := tx.ExecContext(ctx, "UPDATE lanes SET pending = pending - 1 WHERE receiver = ? AND sender = ?", r.lane.Receiver, r.lane.Sender); err != nil {
				return fmt.Errorf("sqlite: expire: %w", err)
			}
			rc, err := scanReceipt(tx.QueryRowContext(ctx, "SELECT "+receiptCols+" FROM messages WHERE seq = ?", r.seq))
			if err != nil {
				return fmt.Errorf("sqlite: expire: %w", err)
			}
			out = append(out, rc)
		}
		tx.afterCommit(func() {
			for _, rc := range out {
				tx.s.cache.drop(rc.MessageID)
			}
		})
		return nil
	})
	return out, err
}

// Wake implements core.Store.
func (s *Store) Wake(ctx context.Context, receiver string, now time.Time) (int, error) {
	var depth int
	err := s.write(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE lanes SET parked = 0, next_at = MIN(next_at, ?) WHERE receiver = ?", ts(now), receiver); err != nil {
			return fmt.Errorf("sqlite: wake: %w", err)
		}
		return tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(pending), 0) FROM lanes WHERE receiver = ?", receiver).Scan(&depth)
	})
	return depth, err
}

// QueueDepth implements core.Store.
func (s *Store) QueueDepth(ctx context.Context, receiver string) (int, error) {
	var depth int
	if err := s.readRow(ctx, "SELECT COALESCE(SUM(pending), 0) FROM lanes WHERE receiver = ?", receiver).Scan(&depth); err != nil {
		return 0, fmt.Errorf("sqlite: queue depth: %w", err)
	}
	return depth, nil
}

// endPulled marks the receiver's queued messages among ids delivered, in
// one statement, and updates their lanes; it returns how many it ended.
func endPulled(ctx context.Context, tx *wtx, receiver string, ids []string, now time.Time, detail string) (int, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("sqlite: ack: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `UPDATE messages SET state = 1, status = 'delivered', attempts = MAX(attempts, 1), updated_at = ?, claim_until = 0, `+appendHistory+`
		WHERE id IN (SELECT value FROM json_each(?)) AND +receiver = ? AND +state = 0 RETURNING sender`,
		ts(now), event(now, core.StatusDelivered, detail), string(list), receiver)
	if err != nil {
		return 0, fmt.Errorf("sqlite: ack: %w", err)
	}
	ended := map[string]int{}
	n := 0
	for rows.Next() {
		var sender string
		if err := rows.Scan(&sender); err != nil {
			rows.Close()
			return 0, fmt.Errorf("sqlite: ack: %w", err)
		}
		ended[sender]++
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("sqlite: ack: %w", err)
	}
	tx.afterCommit(func() { tx.s.cache.drop(ids...) })
	for sender, k := range ended {
		if _, err := tx.ExecContext(ctx, "UPDATE lanes SET pending = pending - ? WHERE receiver = ? AND sender = ?", k, receiver, sender); err != nil {
			return 0, fmt.Errorf("sqlite: ack: %w", err)
		}
	}
	return n, nil
}

// Ack implements core.Store.
func (s *Store) Ack(ctx context.Context, receiver string, ids []string, now time.Time) (int, error) {
	var n int
	err := s.write(ctx, func(tx *wtx) error {
		var err error
		n, err = endPulled(ctx, tx, receiver, ids, now, "acknowledged")
		return err
	})
	return n, err
}

// DeadLetters implements core.Store.
func (s *Store) DeadLetters(ctx context.Context, f core.DeadLetterFilter) ([]*core.Receipt, error) {
	q := "SELECT " + receiptCols + " FROM messages WHERE state = 1 AND status IN ('timeout', 'rejected')"
	args := []any{}
	if f.Receiver != "" {
		q += " AND receiver = ?"
		args = append(args, f.Receiver)
	}
	q += " ORDER BY updated_at DESC LIMIT ?"
	args = append(args, lim(f.Limit))
	rows, err := s.read(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: dead letters: %w", err)
	}
	defer rows.Close()
	var out []*core.Receipt
	for rows.Next() {
		r, err := scanReceipt(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: dead letters: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Replay implements core.Store.
func (s *Store) Replay(ctx context.Context, id string, now, expiresAt time.Time) (*core.Receipt, error) {
	var out *core.Receipt
	err := s.write(ctx, func(tx *wtx) error {
		var l core.Lane
		var status string
		err := tx.QueryRowContext(ctx, "SELECT receiver, sender, status FROM messages WHERE id = ?", id).Scan(&l.Receiver, &l.Sender, &status)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("message %q: %w", id, core.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: replay: %w", err)
		}
		if !core.Status(status).DeadLetter() {
			return fmt.Errorf("message %q is %s, not a dead letter: %w", id, status, core.ErrConflict)
		}
		// Back in the queue, perhaps behind a pull cursor (see pull.go).
		delete(s.cursors, l.Receiver)
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET state = 0, status = 'queued', expires_at = ?, next_at = 0, claim_until = 0, updated_at = ?, `+appendHistory+` WHERE id = ?`,
			ts(expiresAt), ts(now), event(now, core.StatusQueued, "replayed from dead letters"), id); err != nil {
			return fmt.Errorf("sqlite: replay: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO lanes(receiver, sender, pending, next_at) VALUES (?,?,1,?)
			ON CONFLICT(receiver, sender) DO UPDATE SET pending = pending + 1, parked = 0,
			next_at = CASE WHEN pending <= 0 THEN excluded.next_at ELSE next_at END`, l.Receiver, l.Sender, ts(now)); err != nil {
			return fmt.Errorf("sqlite: replay: %w", err)
		}
		out, err = scanReceipt(tx.QueryRowContext(ctx, "SELECT "+receiptCols+" FROM messages WHERE id = ?", id))
		return err
	})
	return out, err
}

// PurgeBefore implements core.Store.
func (s *Store) PurgeBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE state = 1 AND updated_at < ? LIMIT ?)", ts(t), lim(limit))
		if err != nil {
			return fmt.Errorf("sqlite: purge: %w", err)
		}
		n, _ = res.RowsAffected()
		// Lanes are kept while they empty and refill; drop the idle ones.
		if _, err := tx.ExecContext(ctx, "DELETE FROM lanes WHERE pending <= 0 AND claim_until = 0"); err != nil {
			return fmt.Errorf("sqlite: purge lanes: %w", err)
		}
		return nil
	})
	return int(n), err
}

// QueueBytes implements core.QueueSizer: the stored size of a receiver's
// queued messages.
func (s *Store) QueueBytes(ctx context.Context, receiver string) (int64, error) {
	var n int64
	if err := s.readRow(ctx, "SELECT COALESCE(SUM(length(body)), 0) FROM messages WHERE state = 0 AND receiver = ?", receiver).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: queue bytes: %w", err)
	}
	return n, nil
}
