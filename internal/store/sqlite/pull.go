package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// A receiver that pulls (or streams) keeps the messages it was handed
// claimed until it acknowledges them, so the head of its queue is claimed
// messages. Finding the first unclaimed ones would mean reading that whole
// head on every pull, and sorting it, since the queue index is ordered by
// lane. A pull cursor lets the next pull start after it instead.
//
// The cursor's promise: every queued message of the receiver with
// seq <= after is claimed until at least until (or has ended, or has
// expired, and so will never be pulled again). Messages accepted later get
// a larger seq, and no write but Replay (which forgets the receiver's
// cursor) puts an older message back in reach: the others end messages,
// count retries or move lanes, never lowering a claim or reviving a
// message. A rollback forgets all cursors, since they may describe its
// writes. A cursor also lapses at until, when a claim under it may run out;
// the next pull then reads the whole queue.
//
// A new write path that sets a message's state back to queued or lowers
// its claim_until must forget the receiver's cursor too.
//
// The cursor also tells AcceptPulled when a new message may be handed out
// at once: when the receiver's last pull handed out everything it could
// (fewer than its limit) and every message accepted for it since was handed
// out too (behind unset), every other message of its queue is claimed, so
// handing out the new one keeps the queue's order. The hand-off moves the
// cursor past the new message; an accept that leaves a message in the
// receiver's queue sets behind, and only a pull that empties what it can
// reach clears it.

// defaultCursorReach bounds how far behind the newest message a cursor may
// be and still be used: a cursored pull reads every message after it, of
// every receiver.
const defaultCursorReach = 4096

// defaultMaxCursors bounds the cursors kept (one per pulling receiver);
// past it they are all forgotten, which is always safe.
const defaultMaxCursors = 100000

type pullCursor struct {
	after int64 // seq
	until int64 // ts
	// behind is set when a message of the receiver was accepted after the
	// cursor was set and not handed out (AcceptPulled): one may then be
	// pullable, so nothing is handed out until a pull has taken it.
	behind bool
}

const (
	pullSelect = "SELECT " + queuedCols + " FROM messages "
	// pullAll reads the receiver's queue through the queue index.
	pullAll = pullSelect + `WHERE state = 0 AND receiver = ? AND claim_until <= ? AND expires_at > ? ORDER BY seq LIMIT ?`
	// pullAfter reads by seq from a cursor ("+receiver" keeps the planner
	// on the primary key, which is already in order).
	pullAfter = pullSelect + `WHERE seq > ? AND +receiver = ? AND state = 0 AND claim_until <= ? AND expires_at > ? ORDER BY seq LIMIT ?`
	// earliestClaim finds when the first claim on the receiver's queue
	// runs out.
	earliestClaim = `SELECT MIN(claim_until) FROM messages WHERE state = 0 AND receiver = ? AND claim_until > ?`
)

// Pull implements core.Store.
func (s *Store) Pull(ctx context.Context, receiver string, now, visibleAt time.Time, limit int, autoAck bool) ([]*core.Message, error) {
	var out []*core.Message
	err := s.write(ctx, func(tx *wtx) error {
		cur, ok := s.cursors[receiver]
		ok = ok && ts(now) < cur.until && s.lastSeq-cur.after <= s.cursorReach
		var ms []*core.Message
		var cut bool
		var err error
		if ok {
			ms, _, cut, err = s.scanQueued(s.readBytes)(tx.QueryContext(ctx, pullAfter, cur.after, receiver, ts(now), ts(now), lim(limit)))
		} else {
			ms, _, cut, err = s.scanQueued(s.readBytes)(tx.QueryContext(ctx, pullAll, receiver, ts(now), ts(now), lim(limit)))
		}
		if err != nil {
			return fmt.Errorf("sqlite: pull: %w", err)
		}
		out = ms
		if len(ms) > 0 {
			if autoAck {
				ids := make([]string, len(ms))
				for i, m := range ms {
					ids[i] = m.ID
				}
				if _, err := endPulled(ctx, tx, receiver, ids, now, "pulled"); err != nil {
					return err
				}
			} else {
				seqs := make([]int64, len(ms))
				for i, m := range ms {
					seqs[i] = m.Seq
					m.Attempts++
				}
				list, _ := json.Marshal(seqs)
				if _, err := tx.ExecContext(ctx, `UPDATE messages SET claim_until = ?, attempts = attempts + 1, updated_at = ?, `+appendHistory+`
					WHERE seq IN (SELECT value FROM json_each(?))`,
					ts(visibleAt), ts(now), event(now, core.StatusQueued, core.DetailPulled), string(list)); err != nil {
					return fmt.Errorf("sqlite: pull: %w", err)
				}
			}
		}
		return s.moveCursor(ctx, tx, receiver, cur, ok, ms, len(ms) == lim(limit) || cut, now, visibleAt, autoAck)
	})
	return out, err
}

// moveCursor sets the receiver's cursor after a pull that handed out ms,
// reading from cur (if used) or the whole queue; stopped says the pull
// stopped at its limit (of messages or bytes), so more may wait after it.
func (s *Store) moveCursor(ctx context.Context, tx *wtx, receiver string, cur pullCursor, used bool, ms []*core.Message, stopped bool, now, visibleAt time.Time, autoAck bool) error {
	next := cur
	if !used {
		// Fresh from the whole queue: learn when its claims run out.
		var first sql.NullInt64
		if err := tx.QueryRowContext(ctx, earliestClaim, receiver, ts(now)).Scan(&first); err != nil {
			return fmt.Errorf("sqlite: pull: %w", err)
		}
		next = pullCursor{until: math.MaxInt64}
		if first.Valid {
			next.until = first.Int64
		}
	}
	if !autoAck && len(ms) > 0 {
		next.until = min(next.until, ts(visibleAt))
	}
	switch {
	case stopped:
		// More may wait right after the last one handed out.
		next.after = ms[len(ms)-1].Seq
		next.behind = true
	default:
		// Everything pullable up to now was handed out.
		next.after = max(next.after, s.lastSeq)
		if len(ms) > 0 {
			next.after = max(next.after, ms[len(ms)-1].Seq)
		}
		next.behind = false
	}
	if _, ok := s.cursors[receiver]; !ok && len(s.cursors) >= s.maxCursors {
		clear(s.cursors)
	}
	s.cursors[receiver] = next
	return nil
}
