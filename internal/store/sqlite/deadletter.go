package sqlite

import (
	"context"
	"fmt"
)

// NoteDeadLetter implements core.DeadLetterNoter.
func (s *Store) NoteDeadLetter(ctx context.Context, id string, code int, lastError string) error {
	return s.write(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE messages SET code = ?, last_error = ? WHERE id = ? AND state = 1 AND last_error = ''",
			code, lastError, id); err != nil {
			return fmt.Errorf("sqlite: note dead letter: %w", err)
		}
		tx.afterCommit(func() { tx.s.cache.drop(id) })
		return nil
	})
}
