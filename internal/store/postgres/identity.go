package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// EndIdentity implements core.Store.
func (s *Store) EndIdentity(ctx context.Context, id string, now time.Time, detail string) ([]*core.Receipt, error) {
	var out []*core.Receipt
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM agents WHERE id = $1", id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM participants WHERE agent_id = $1", id); err != nil {
			return err
		}
		out, err = collectReceipts(tx.Query(ctx, `UPDATE messages SET state = 1, status = 'rejected', code = 410, last_error = $2,
				updated_at = $3, claim_until = `+zeroTS+`, `+appendHistory("$4")+`
			WHERE state = 0 AND receiver = $1
			RETURNING `+receiptCols("messages"),
			id, detail, now, event(now, core.StatusRejected, detail)))
		return err
	})
	if err != nil {
		if core.KindOf(err) == core.KindNotFound {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: end identity: %w", err)
	}
	s.signalEnded(endedReceipts(out)...)
	return out, nil
}
