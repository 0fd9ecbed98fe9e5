package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the pg_advisory_xact_lock key that serialises migrations
// ("switchboard" in ASCII). It is database-wide, so schemas that share a
// database migrate one at a time, which is harmless.
const migrationLock int64 = 0x73776974636862

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. A file is
// named NNNN_description.sql; versions must be unique.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, wrap("read migrations", err)
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration %q is not named NNNN_name.sql", name)
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("postgres: read migration %s: %w", name, err)
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("postgres: migrations %s and %s share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

// Migrate connects to the database at url and applies the migrations it has
// not applied yet, then disconnects. Open does the same, so Migrate is for
// operators who upgrade the schema before starting new instances
// (switchboard migrate).
func Migrate(ctx context.Context, url string) error {
	// A pool (of one) rather than pgx.Connect, so URLs with pool_* parameters
	// work here as they do in Open.
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return wrap("parse url", err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return wrap("connect", err)
	}
	defer pool.Close()
	return migrate(ctx, pool)
}

// migrate applies pending migrations in one transaction that holds an
// advisory lock, so concurrent callers (instances starting together) apply
// each migration exactly once: the second waits for the first to commit and
// then finds nothing left to do. Applied versions are kept in
// schema_migrations.
func migrate(ctx context.Context, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return wrap("migrate", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return wrap("migrate: lock", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return wrap("migrate", err)
	}
	rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return wrap("migrate", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return wrap("migrate", err)
	}
	for _, m := range ms {
		if slices.Contains(applied, int32(m.version)) {
			continue
		}
		// Without arguments pgx sends the file with the simple protocol, so
		// it may hold several statements.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return wrap("migrate: commit", err)
	}
	return nil
}
