// Package sqlite is Switchboard's embedded store: SQLite through a pure-Go
// driver (no cgo), in WAL mode with synchronous=FULL, so a write is on disk
// when it returns. All writes go through one writer goroutine that commits
// concurrent requests together in one transaction (group commit), which is
// what makes durable sends fast: many sends share one fsync.
package sqlite

import (
	"context"
	"database/sql"
	_ "embed" // schema.sql
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver
)

//go:embed schema.sql
var schema string

// maxBatch bounds how many write requests share one transaction.
const maxBatch = 512

// Options tune the store.
type Options struct {
	// Readers is the number of read connections (default 4).
	Readers int
	// NoSync turns off fsync on commit (tests and benchmarks only: a crash
	// can lose the last commits).
	NoSync bool
}

// Store is the SQLite implementation of core.Store.
type Store struct {
	wdb  *sql.DB
	rdb  *sql.DB
	ops  chan *op
	quit chan struct{}
	wg   sync.WaitGroup

	closeOnce sync.Once
}

var _ core.Store = (*Store)(nil)

type op struct {
	fn  func(tx *sql.Tx) error
	err chan error
}

// Open opens (creating if needed) the store in directory dir.
func Open(ctx context.Context, dir string, o Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory: %w", err)
	}
	path := filepath.Join(dir, "switchboard.db")
	sync := "FULL"
	if o.NoSync {
		sync = "OFF"
	}
	dsn := func(extra string) string {
		return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(" + sync + ")" + extra
	}
	wdb, err := sql.Open("sqlite", dsn("&_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if _, err := wdb.ExecContext(ctx, schema); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: create schema: %w", err)
	}
	readers := o.Readers
	if readers <= 0 {
		readers = 4
	}
	rdb, err := sql.Open("sqlite", dsn("&_pragma=query_only(1)"))
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open readers: %w", err)
	}
	rdb.SetMaxOpenConns(readers)
	rdb.SetMaxIdleConns(readers)
	s := &Store{wdb: wdb, rdb: rdb, ops: make(chan *op, maxBatch), quit: make(chan struct{})}
	s.wg.Add(1)
	go s.writer()
	return s, nil
}

// Close stops the writer and closes the database.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.quit)
		s.wg.Wait()
		err = errors.Join(s.rdb.Close(), s.wdb.Close())
	})
	return err
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.rdb.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// ErrClosed is returned for writes after Close.
var ErrClosed = errors.New("sqlite: store closed")

// write runs fn in the writer's next transaction and waits for the commit.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	o := &op{fn: fn, err: make(chan error, 1)}
	select {
	case s.ops <- o:
	case <-s.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued the write will be committed or fail; wait for it even if
	// ctx ends, so callers never mistake a committed write for a lost one.
	select {
	case err := <-o.err:
		return err
	case <-s.quit:
		select {
		case err := <-o.err:
			return err
		default:
			return ErrClosed
		}
	}
}

func (s *Store) writer() {
	defer s.wg.Done()
	batch := make([]*op, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		case <-s.quit:
			s.drain()
			return
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		s.commit(batch)
	}
}

// drain fails the requests still queued at close.
func (s *Store) drain() {
	for {
		select {
		case o := <-s.ops:
			s.commit([]*op{o})
		default:
			return
		}
	}
}

func (s *Store) commit(batch []*op) {
	ctx := context.Background()
	results := make([]error, len(batch))
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		for _, o := range batch {
			o.err <- fmt.Errorf("sqlite: begin: %w", err)
		}
		return
	}
	single := len(batch) == 1
	for i, o := range batch {
		if single {
			results[i] = o.fn(tx)
			continue
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT op"); err != nil {
			results[i] = fmt.Errorf("sqlite: savepoint: %w", err)
			continue
		}
		if results[i] = o.fn(tx); results[i] != nil {
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO op"); err != nil {
				results[i] = errors.Join(results[i], err)
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE op"); err != nil && results[i] == nil {
			results[i] = fmt.Errorf("sqlite: release: %w", err)
		}
	}
	if single && results[0] != nil {
		_ = tx.Rollback()
		batch[0].err <- results[0]
		return
	}
	if err := tx.Commit(); err != nil {
		_ = tx.Rollback()
		for _, o := range batch {
			o.err <- fmt.Errorf("sqlite: commit: %w", err)
		}
		return
	}
	for i, o := range batch {
		o.err <- results[i]
	}
}

// ts and tm convert between time.Time and the stored microseconds.
func ts(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func tm(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}
