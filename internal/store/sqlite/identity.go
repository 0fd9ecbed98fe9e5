package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// EndIdentity implements core.Store.
func (s *Store) EndIdentity(ctx context.Context, id string, now time.Time, detail string) ([]*core.Receipt, error) {
	var out []*core.Receipt
	err := s.write(ctx, func(tx *wtx) error {
		out = out[:0]
		res, err := tx.ExecContext(ctx, "DELETE FROM agents WHERE id = ?", id)
		if err != nil {
			return fmt.Errorf("sqlite: end identity: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
		}
		for _, q := range []string{"DELETE FROM agent_caps WHERE agent_id = ?", "DELETE FROM participants WHERE agent_id = ?"} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return fmt.Errorf("sqlite: end identity: %w", err)
			}
		}
		rows, err := tx.QueryContext(ctx, "SELECT seq FROM messages WHERE state = 0 AND receiver = ?", id)
		if err != nil {
			return fmt.Errorf("sqlite: end identity: %w", err)
		}
		var seqs []int64
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: end identity: %w", err)
			}
			seqs = append(seqs, seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: end identity: %w", err)
		}
		ev := event(now, core.StatusRejected, detail)
		for _, seq := range seqs {
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET state = 1, status = 'rejected', code = 410, last_error = ?, updated_at = ?, claim_until = 0, `+appendHistory+` WHERE seq = ?`,
				detail, ts(now), ev, seq); err != nil {
				return fmt.Errorf("sqlite: end identity: %w", err)
			}
			rc, err := scanReceipt(tx.QueryRowContext(ctx, "SELECT "+receiptCols+" FROM messages WHERE seq = ?", seq))
			if err != nil {
				return fmt.Errorf("sqlite: end identity: %w", err)
			}
			out = append(out, rc)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE lanes SET pending = 0 WHERE receiver = ?", id); err != nil {
			return fmt.Errorf("sqlite: end identity: %w", err)
		}
		// The receiver's pull cursor described a queue that is gone.
		delete(tx.s.cursors, id)
		tx.afterCommit(func() {
			for _, rc := range out {
				tx.s.cache.drop(rc.MessageID)
			}
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
