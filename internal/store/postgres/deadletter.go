package postgres

import (
	"context"
	"fmt"
)

// NoteDeadLetter implements core.DeadLetterNoter.
func (s *Store) NoteDeadLetter(ctx context.Context, id string, code int, lastError string) error {
	if _, err := s.pool.Exec(ctx, "UPDATE messages SET code = $2, last_error = $3 WHERE id = $1 AND state = 1 AND last_error = ''",
		id, code, lastError); err != nil {
		return fmt.Errorf("postgres: note dead letter: %w", err)
	}
	return nil
}
