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
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	sqlitedrv "modernc.org/sqlite" // the pure-Go SQLite driver
)

//go:embed schema.sql
var schema string

// maxBatch bounds how many write requests share one transaction.
const maxBatch = 512

// Options tune the store.
type Options struct {
	// Readers is the number of read connections (default 4).
	Readers int
	// Sync is SQLite's synchronous setting: "full" (default: every commit
	// is fsynced before it returns, surviving power loss), or "normal"
	// (WAL commits reach the OS at once and the disk at checkpoints: they
	// survive a crash of the process, kill -9 included, but not of the
	// machine).
	Sync string
	// NoSync turns off fsync on commit (tests and benchmarks only: a crash
	// can lose the last commits).
	NoSync bool
	// Check is the integrity check run at open: CheckQuick (default),
	// CheckFull or CheckOff. A store that fails it is not opened (see
	// DamageError).
	Check string
	// Recover, when a damaged or missing store is found at open, moves it
	// aside and starts with an empty store (RecoverFresh) or with what can
	// be read of it (RecoverSalvage). A healthy store is opened as it is.
	Recover string
	// Logger receives what recovery did. Nil discards it.
	Logger *slog.Logger
	// Budget is the hub's memory budget: the message cache takes what it
	// holds from it (nil: no budget).
	Budget *core.Budget
	// CacheBytes bounds the message cache (default 32 MiB).
	CacheBytes int64
	// ReadBytes bounds the message bodies one claim or pull reads (at
	// least one message is always read; default DefaultReadBytes).
	ReadBytes int64
}

// DefaultReadBytes is Options.ReadBytes's default.
const DefaultReadBytes = 16 << 20

// lockFile is the data directory's lock file (see lockDir).
const lockFile = "switchboard.lock"

// ErrInUse is returned by Open when another process has the data directory
// open.
var ErrInUse = errors.New("sqlite: data directory in use by another process")

// Store is the SQLite implementation of core.Store.
type Store struct {
	unlock func() // releases the data directory's lock
	path   string
	file   os.FileInfo // the database file opened, for Ping
	// damaged holds the first "malformed database" error a write met:
	// from then on Ping fails (readiness), since every later write may too.
	damaged atomic.Pointer[error]
	wdb     *sql.DB
	rdb     *sql.DB
	ops     chan *op
	quit    chan struct{}
	wg      sync.WaitGroup

	closeOnce sync.Once
	wstmts    sync.Map // query → *sql.Stmt prepared on the writer's connection
	// unprepared holds queries the writer ran unprepared; only the writer
	// goroutine touches it.
	unprepared map[string]struct{}
	rstmts     sync.Map // query → *sql.Stmt prepared on the readers
	cache      *msgCache
	// cursors and lastSeq let pulls skip the claimed head of a queue; only
	// the writer goroutine touches them (see pull.go).
	cursors     map[string]pullCursor
	lastSeq     int64
	cursorReach int64 // defaultCursorReach; negative turns cursors off
	maxCursors  int   // defaultMaxCursors
	readBytes   int64 // Options.ReadBytes
}

// wtx is a write transaction whose statements are prepared once and reused:
// parsing SQL costs more than running it, and the writer runs the same few
// statements all day.
type wtx struct {
	tx *sql.Tx
	s  *Store
	// committed runs after the transaction commits (never after a
	// rollback): in-memory effects of the writes, such as the cache.
	committed []func()
	// bound holds the statements bound to tx so far (closed with it).
	bound map[string]*sql.Stmt
	// pending holds the lane counts accepts added and not yet written
	// (see addPending).
	pending []pendingAdd
}

// pendingAdd is n messages queued in a lane, the first at at.
type pendingAdd struct {
	receiver, sender string
	n                int
	at               int64
}

// upsertLane adds the pending count in the third parameter to the lane,
// creating it. A lane is kept when it empties (purge drops idle ones); an
// empty lane starts afresh: due at the fourth parameter and not parked.
const upsertLane = `INSERT INTO lanes(receiver, sender, pending, next_at) VALUES (?,?,?,?)
	ON CONFLICT(receiver, sender) DO UPDATE SET pending = pending + excluded.pending,
	parked = CASE WHEN pending <= 0 THEN 0 ELSE parked END,
	next_at = CASE WHEN pending <= 0 THEN excluded.next_at ELSE next_at END`

// addPending counts a message accepted at at in its lane, to be written
// with the others of the group commit by flushPending: one statement per
// lane rather than one per message. The n accepts' own upserts would have
// left the lane just as one that adds n with the first one's time does
// (only the first can find the lane empty). Nothing may read the lanes
// table between: the writer flushes before every request but accepts
// (lazyLanes), and an accept that reads it flushes first.
func (w *wtx) addPending(receiver, sender string, at int64) {
	for i := range w.pending {
		if p := &w.pending[i]; p.receiver == receiver && p.sender == sender {
			p.n++
			return
		}
	}
	w.pending = append(w.pending, pendingAdd{receiver: receiver, sender: sender, n: 1, at: at})
}

// flushPending writes the lane counts addPending gathered.
func (w *wtx) flushPending() error {
	for _, p := range w.pending {
		if _, err := w.ExecContext(context.Background(), upsertLane, p.receiver, p.sender, p.n, p.at); err != nil {
			return fmt.Errorf("sqlite: update lane: %w", err)
		}
	}
	w.pending = w.pending[:0]
	return nil
}

// afterCommit runs f once the transaction has committed.
func (w *wtx) afterCommit(f func()) { w.committed = append(w.committed, f) }

func (w *wtx) runCommitted() {
	for _, f := range w.committed {
		f()
	}
}

func (s *Store) stmt(ctx context.Context, cache *sync.Map, db *sql.DB, q string) (*sql.Stmt, error) {
	if st, ok := cache.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := cache.LoadOrStore(q, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// wstmt returns the writer's prepared statement for q bound to this
// transaction, or nil the first time q is seen: it is then run unprepared
// and prepared after the commit, when the writer's one connection is free
// (database/sql reuses a DB-level statement inside a transaction on the
// connection it was prepared on).
func (w *wtx) wstmt(q string) *sql.Stmt {
	if st, ok := w.bound[q]; ok {
		return st
	}
	st, ok := w.s.wstmts.Load(q)
	if !ok {
		w.s.unprepared[q] = struct{}{}
		return nil
	}
	if w.bound == nil {
		w.bound = make(map[string]*sql.Stmt)
	}
	b := w.tx.StmtContext(context.Background(), st.(*sql.Stmt))
	w.bound[q] = b
	return b
}

// The writer's statements run with a context that never ends, whatever the
// caller's: a queued write is committed or fails as a whole (see write),
// and the driver would otherwise start a goroutine per statement to watch
// for cancellation.

// ExecContext runs a statement in the transaction.
func (w *wtx) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	ctx := context.Background()
	if st := w.wstmt(q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return w.tx.ExecContext(ctx, q, args...)
}

// QueryContext runs a query in the transaction.
func (w *wtx) QueryContext(_ context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx := context.Background()
	if st := w.wstmt(q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return w.tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs a one-row query in the transaction.
func (w *wtx) QueryRowContext(_ context.Context, q string, args ...any) *sql.Row {
	ctx := context.Background()
	if st := w.wstmt(q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return w.tx.QueryRowContext(ctx, q, args...)
}

// prepareSeen prepares the statements first run in the last batch.
func (s *Store) prepareSeen(ctx context.Context) {
	for q := range s.unprepared {
		if st, err := s.wdb.PrepareContext(ctx, q); err == nil {
			s.wstmts.Store(q, st)
		}
		delete(s.unprepared, q)
	}
}

// read and readRow run queries on the read connections.
func (s *Store) read(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, &s.rstmts, s.rdb, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) readRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := s.stmt(ctx, &s.rstmts, s.rdb, q)
	if err != nil {
		return s.rdb.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

var _ core.Store = (*Store)(nil)

type op struct {
	fn  func(tx *wtx) error
	err chan error
	// lazyLanes: fn reads nothing of the lanes table unless it flushes
	// the pending lane counts first (see addPending).
	lazyLanes bool
}

// Open opens (creating if needed) the store in directory dir, which one
// process at a time may have open (ErrInUse). A store that is damaged, or
// missing where one was created, is a *DamageError (see inspect), unless
// o.Recover says what to do with it.
func Open(ctx context.Context, dir string, o Options) (_ *Store, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	switch o.Recover {
	case "", RecoverFresh, RecoverSalvage:
	default:
		return nil, fmt.Errorf("sqlite: recover %q: want fresh or salvage", o.Recover)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := openChecked(ctx, dir, o)
	if err == nil || o.Recover == "" || !errors.Is(err, ErrDamaged) {
		if err == nil {
			s.unlock = unlock
		}
		return s, err
	}
	note, rerr := recoverStore(ctx, dir, o.Recover, err, time.Now())
	if rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	log.Warn("sqlite: store recovered (--recover "+o.Recover+")", "dir", dir, "what", note)
	s, err = openChecked(ctx, dir, o)
	if err == nil {
		s.unlock = unlock
	}
	return s, err
}

// openChecked inspects the store's files, opens it and checks it; a
// damaged or missing store is a *DamageError. The caller holds the lock.
func openChecked(ctx context.Context, dir string, o Options) (_ *Store, err error) {
	path := filepath.Join(dir, dbFile)
	if err := inspect(dir); err != nil {
		return nil, err
	}
	sync := "FULL"
	switch strings.ToLower(o.Sync) {
	case "", "full":
	case "normal":
		sync = "NORMAL"
	default:
		return nil, fmt.Errorf("sqlite: sync %q: want full or normal", o.Sync)
	}
	if o.NoSync {
		sync = "OFF"
	}
	dsn := func(extra string) string {
		return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(" + sync + ")" + extra
	}
	// The writer keeps its temporary files in memory: above all the
	// statement journal, which SQLite otherwise spills to a file it
	// creates, writes and deletes in each group commit whose
	// multi-row statement (a batch of acks) touches more than 64 KiB
	// of pages. It never holds more than a copy of the pages one of
	// the writer's statements changes, which the statements bound.
	wdb, err := sql.Open("sqlite", dsn("&_txlock=immediate&_pragma=temp_store(memory)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if err := checkDB(ctx, wdb, dir, o.Check); err != nil {
		wdb.Close()
		return nil, err
	}
	if _, err := wdb.ExecContext(ctx, schema); err != nil {
		wdb.Close()
		if corrupt(err) {
			return nil, &DamageError{Dir: dir, File: path, Problem: "SQLite cannot read it: " + err.Error()}
		}
		return nil, fmt.Errorf("sqlite: create schema: %w", err)
	}
	if err := writeMarker(dir, time.Now()); err != nil {
		wdb.Close()
		return nil, err
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
	s := &Store{path: path, wdb: wdb, rdb: rdb, unprepared: map[string]struct{}{}, cache: newMsgCache(o.CacheBytes, o.Budget), cursors: map[string]pullCursor{}, cursorReach: defaultCursorReach, maxCursors: defaultMaxCursors, ops: make(chan *op, maxBatch), quit: make(chan struct{})}
	// Pull cursors measure their reach from the newest message.
	if err := wdb.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) FROM messages").Scan(&s.lastSeq); err != nil {
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("sqlite: read last message: %w", err)
	}
	s.readBytes = o.ReadBytes
	if s.readBytes <= 0 {
		s.readBytes = DefaultReadBytes
	}
	if s.file, err = os.Stat(path); err != nil {
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
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
		for _, c := range []*sync.Map{&s.wstmts, &s.rstmts} {
			c.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
		}
		err = errors.Join(s.rdb.Close(), s.wdb.Close())
		if s.unlock != nil {
			s.unlock()
		}
	})
	return err
}

// Ping checks that the database answers, that its file is still the one
// opened (not deleted or replaced under the running hub, which would then
// write to a file no one can open again), and that no write has found it
// damaged.
func (s *Store) Ping(ctx context.Context) error {
	if p := s.damaged.Load(); p != nil {
		return fmt.Errorf("sqlite: %s is damaged (%w); restart the hub to check it", s.path, *p)
	}
	st, err := os.Stat(s.path)
	switch {
	case err != nil:
		return fmt.Errorf("sqlite: ping: the database file is gone: %w", err)
	case !os.SameFile(st, s.file):
		return fmt.Errorf("sqlite: ping: %s was replaced while the hub had it open", s.path)
	}
	var one int
	if err := s.readRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// ErrClosed is returned for writes after Close.
var ErrClosed = errors.New("sqlite: store closed")

// write runs fn in the writer's next transaction and waits for the commit.
func (s *Store) write(ctx context.Context, fn func(tx *wtx) error) error {
	return s.writeOp(ctx, &op{fn: fn, err: make(chan error, 1)})
}

// writeOp is write of a prepared request.
func (s *Store) writeOp(ctx context.Context, o *op) error {
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
		if corrupt(err) {
			s.damaged.CompareAndSwap(nil, &err)
		}
		return classify(err)
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
	b := batcher{ops: s.ops, quit: s.quit, linger: lingerFor}
	for {
		batch, open := b.next()
		if len(batch) > 0 {
			s.commit(batch)
		}
		if !open {
			s.drain()
			return
		}
	}
}

// Group commit under load: a commit answers every request in its batch at
// once, and those callers come straight back with their next request. When
// the last batch was busy (at least lingerAfter requests) and this one is
// still small (under lingerBelow), the writer waits up to lingerFor for
// them before paying for the fsync, so one fsync serves more requests.
// An idle hub never waits: a lone request after a quiet spell commits at
// once.
const (
	lingerAfter = 8
	lingerBelow = 32
	lingerFor   = 300 * time.Microsecond
)

// batcher gathers the writer's requests into batches.
type batcher struct {
	ops    <-chan *op
	quit   <-chan struct{}
	linger time.Duration

	batch []*op
	last  int // size of the previous batch
	timer *time.Timer
}

// next blocks for a request and returns it with those queued behind it
// (up to maxBatch), lingering as described above. open is false once quit
// is closed; the batch then holds what was gathered before (to commit).
func (b *batcher) next() (batch []*op, open bool) {
	if b.batch == nil {
		b.batch = make([]*op, 0, maxBatch)
	}
	batch = b.batch[:0]
	select {
	case o := <-b.ops:
		batch = append(batch, o)
	case <-b.quit:
		return batch, false
	}
	batch = b.fill(batch)
	if b.last >= lingerAfter && len(batch) < lingerBelow && b.linger > 0 {
		if b.timer == nil {
			b.timer = time.NewTimer(b.linger)
		} else {
			b.timer.Reset(b.linger)
		}
	wait:
		for len(batch) < lingerBelow {
			select {
			case o := <-b.ops:
				batch = b.fill(append(batch, o))
			case <-b.timer.C:
				break wait
			case <-b.quit:
				b.timer.Stop()
				b.last = len(batch)
				return batch, false
			}
		}
		b.timer.Stop()
	}
	b.last = len(batch)
	return batch, true
}

// fill appends the requests already queued, without waiting.
func (b *batcher) fill(batch []*op) []*op {
	for len(batch) < maxBatch {
		select {
		case o := <-b.ops:
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
}

// classify marks "disk full" failures with core.ErrStorageFull.
func classify(err error) error {
	var se *sqlitedrv.Error
	if err != nil && errors.As(err, &se) && se.Code()&0xff == 13 { // SQLITE_FULL
		return fmt.Errorf("%w: %v", core.ErrStorageFull, err)
	}
	return err
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
	defer s.prepareSeen(context.Background())
	if len(batch) > 1 && s.commitTogether(batch) {
		return
	}
	for _, o := range batch {
		s.commitOne(o)
	}
}

// cleanError reports whether a request's error left nothing written: the
// requests check before they write and fail with these core errors, so
// such an error needs no rollback of the shared transaction.
func cleanError(err error) bool {
	return errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrConflict) ||
		errors.Is(err, core.ErrIDConflict) || errors.Is(err, core.ErrQueueFull)
}

// commitTogether runs a batch of requests in one transaction (one fsync for
// all). It reports false, having rolled back and answered nobody, when a
// request failed in a way that may have left partial writes; the requests
// are then run one by one.
func (s *Store) commitTogether(batch []*op) bool {
	ctx := context.Background()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return false
	}
	w := &wtx{tx: tx, s: s}
	results := make([]error, len(batch))
	for i, o := range batch {
		if !o.lazyLanes {
			if err := w.flushPending(); err != nil {
				s.rollback(tx)
				return false
			}
		}
		if results[i] = o.fn(w); results[i] != nil && !cleanError(results[i]) {
			s.rollback(tx)
			return false
		}
	}
	if err := w.flushPending(); err != nil {
		s.rollback(tx)
		return false
	}
	if err := tx.Commit(); err != nil {
		s.rollback(tx)
		for _, o := range batch {
			o.err <- fmt.Errorf("sqlite: commit: %w", err)
		}
		return true
	}
	w.runCommitted()
	for i, o := range batch {
		o.err <- results[i]
	}
	return true
}

// rollback abandons tx. The pull cursors may describe its writes, so they
// are forgotten.
func (s *Store) rollback(tx *sql.Tx) {
	_ = tx.Rollback()
	clear(s.cursors)
}

// commitOne runs one request in its own transaction.
func (s *Store) commitOne(o *op) {
	ctx := context.Background()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		o.err <- fmt.Errorf("sqlite: begin: %w", err)
		return
	}
	w := &wtx{tx: tx, s: s}
	err = o.fn(w)
	if err == nil {
		err = w.flushPending()
	}
	if err != nil {
		s.rollback(tx)
		o.err <- err
		return
	}
	if err := tx.Commit(); err != nil {
		s.rollback(tx)
		o.err <- fmt.Errorf("sqlite: commit: %w", err)
		return
	}
	w.runCommitted()
	o.err <- nil
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
