package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// PutRecord implements core.RecordStore.
func (s *Store) PutRecord(ctx context.Context, r core.Record) (core.Record, error) {
	if err := core.CheckStorableRecord(r); err != nil {
		return core.Record{}, err
	}
	err := s.write(ctx, func(tx *wtx) error {
		var cur int64
		err := tx.QueryRowContext(ctx, "SELECT version FROM records WHERE kind = ? AND id = ?", r.Kind, r.ID).Scan(&cur)
		exists := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: put record: %w", err)
		}
		if (r.Version == 0 && exists) || (r.Version != 0 && (!exists || cur != r.Version)) {
			return fmt.Errorf("record %s/%s version %d: %w", r.Kind, r.ID, r.Version, core.ErrConflict)
		}
		r.Version++
		if _, err := tx.ExecContext(ctx, `INSERT INTO records(kind, id, idx, data, version, updated_at) VALUES (?,?,?,?,?,?)
			ON CONFLICT(kind, id) DO UPDATE SET idx = excluded.idx, data = excluded.data, version = excluded.version, updated_at = excluded.updated_at`,
			r.Kind, r.ID, r.Index, r.Data, r.Version, ts(r.UpdatedAt)); err != nil {
			return fmt.Errorf("sqlite: put record: %w", err)
		}
		return nil
	})
	if err != nil {
		return core.Record{}, err
	}
	return r, nil
}

const recordCols = "kind, id, idx, data, version, updated_at"

func scanRecord(sc interface{ Scan(...any) error }) (core.Record, error) {
	var r core.Record
	var at int64
	err := sc.Scan(&r.Kind, &r.ID, &r.Index, &r.Data, &r.Version, &at)
	r.UpdatedAt = tm(at)
	return r, err
}

// GetRecord implements core.RecordStore.
func (s *Store) GetRecord(ctx context.Context, kind, id string) (core.Record, error) {
	r, err := scanRecord(s.readRow(ctx, "SELECT "+recordCols+" FROM records WHERE kind = ? AND id = ?", kind, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Record{}, fmt.Errorf("record %s/%s: %w", kind, id, core.ErrNotFound)
	}
	if err != nil {
		return core.Record{}, fmt.Errorf("sqlite: get record: %w", err)
	}
	return r, nil
}

// ListRecords implements core.RecordStore.
func (s *Store) ListRecords(ctx context.Context, kind, index string, limit int) ([]core.Record, error) {
	q := "SELECT " + recordCols + " FROM records WHERE kind = ?"
	args := []any{kind}
	if index != "" {
		q += " AND idx = ?"
		args = append(args, index)
	}
	q += " ORDER BY updated_at DESC, id LIMIT ?"
	return s.listRecords(ctx, q, append(args, lim(limit))...)
}

// ListRecordsAfter implements core.RecordStore.
func (s *Store) ListRecordsAfter(ctx context.Context, kind, index, afterID string, limit int) ([]core.Record, error) {
	q := "SELECT " + recordCols + " FROM records WHERE kind = ? AND id > ?"
	args := []any{kind, afterID}
	if index != "" {
		q += " AND idx = ?"
		args = append(args, index)
	}
	q += " ORDER BY id LIMIT ?"
	return s.listRecords(ctx, q, append(args, lim(limit))...)
}

func (s *Store) listRecords(ctx context.Context, q string, args ...any) ([]core.Record, error) {
	rows, err := s.read(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list records: %w", err)
	}
	defer rows.Close()
	var out []core.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list records: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteRecord implements core.RecordStore.
func (s *Store) DeleteRecord(ctx context.Context, kind, id string) error {
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM records WHERE kind = ? AND id = ?", kind, id)
		if err != nil {
			return fmt.Errorf("sqlite: delete record: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("record %s/%s: %w", kind, id, core.ErrNotFound)
		}
		return nil
	})
}
