package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// PutRecord implements core.RecordStore. Each write is one statement whose
// condition is the expected version, so concurrent writers on any instance
// cannot both succeed.
func (s *Store) PutRecord(ctx context.Context, r core.Record) (core.Record, error) {
	if err := core.CheckStorableRecord(r); err != nil {
		return core.Record{}, err
	}
	if r.Data == nil {
		r.Data = []byte{}
	}
	var tag pgconn.CommandTag
	var err error
	if r.Version == 0 {
		tag, err = s.pool.Exec(ctx, `INSERT INTO records (kind, id, idx, data, version, updated_at) VALUES ($1, $2, $3, $4, 1, $5)
			ON CONFLICT (kind, id) DO NOTHING`, r.Kind, r.ID, r.Index, r.Data, r.UpdatedAt)
	} else {
		tag, err = s.pool.Exec(ctx, `UPDATE records SET idx = $3, data = $4, version = version + 1, updated_at = $5
			WHERE kind = $1 AND id = $2 AND version = $6`, r.Kind, r.ID, r.Index, r.Data, r.UpdatedAt, r.Version)
	}
	if err != nil {
		return core.Record{}, wrap("put record", err)
	}
	if tag.RowsAffected() == 0 {
		return core.Record{}, fmt.Errorf("record %s/%s version %d: %w", r.Kind, r.ID, r.Version, core.ErrConflict)
	}
	r.Version++
	return r, nil
}

const recordCols = "kind, id, idx, data, version, updated_at"

func scanRecord(row pgx.Row) (core.Record, error) {
	var r core.Record
	var at time.Time
	err := row.Scan(&r.Kind, &r.ID, &r.Index, &r.Data, &r.Version, &at)
	r.UpdatedAt = utc(at)
	return r, err
}

// GetRecord implements core.RecordStore.
func (s *Store) GetRecord(ctx context.Context, kind, id string) (core.Record, error) {
	if !core.Storable(kind, id) {
		return core.Record{}, fmt.Errorf("record %s/%s: %w", kind, id, core.ErrNotFound)
	}
	r, err := scanRecord(s.pool.QueryRow(ctx, "SELECT "+recordCols+" FROM records WHERE kind = $1 AND id = $2", kind, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Record{}, fmt.Errorf("record %s/%s: %w", kind, id, core.ErrNotFound)
	}
	if err != nil {
		return core.Record{}, wrap("get record", err)
	}
	return r, nil
}

// ListRecords implements core.RecordStore.
func (s *Store) ListRecords(ctx context.Context, kind, index string, limit int) ([]core.Record, error) {
	if !core.Storable(kind, index) {
		return nil, nil
	}
	q := "SELECT " + recordCols + " FROM records WHERE kind = $1"
	args := []any{kind, lim(limit)}
	if index != "" {
		q += " AND idx = $3"
		args = append(args, index)
	}
	q += " ORDER BY updated_at DESC, id LIMIT $2"
	return s.listRecords(ctx, q, args...)
}

// ListRecordsAfter implements core.RecordStore. Ids compare bytewise
// (COLLATE "C"), as in SQLite, whatever the database's collation.
func (s *Store) ListRecordsAfter(ctx context.Context, kind, index, afterID string, limit int) ([]core.Record, error) {
	if !core.Storable(kind, index) {
		return nil, nil
	}
	q := "SELECT " + recordCols + ` FROM records WHERE kind = $1 AND id COLLATE "C" > $2`
	args := []any{kind, afterID, lim(limit)}
	if index != "" {
		q += " AND idx = $4"
		args = append(args, index)
	}
	q += ` ORDER BY id COLLATE "C" LIMIT $3`
	return s.listRecords(ctx, q, args...)
}

func (s *Store) listRecords(ctx context.Context, q string, args ...any) ([]core.Record, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, wrap("list records", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.Record, error) { return scanRecord(r) })
	if err != nil {
		return nil, wrap("list records", err)
	}
	return out, nil
}

// DeleteRecord implements core.RecordStore.
func (s *Store) DeleteRecord(ctx context.Context, kind, id string) error {
	if !core.Storable(kind, id) {
		return fmt.Errorf("record %s/%s: %w", kind, id, core.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM records WHERE kind = $1 AND id = $2", kind, id)
	if err != nil {
		return wrap("delete record", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record %s/%s: %w", kind, id, core.ErrNotFound)
	}
	return nil
}
