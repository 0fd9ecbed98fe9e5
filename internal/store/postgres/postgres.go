// Package postgres is Switchboard's scale-out store: core.Store on
// PostgreSQL through pgx, so several hub instances can share one database.
//
// Claims are leases in the database: Claim picks due lanes with
// SELECT … FOR UPDATE SKIP LOCKED and stamps them with an owner and a
// claim_until in the same statement, so exactly one instance delivers a lane
// at a time, and a lane whose owner crashed is taken over once its
// claim_until has passed. Message ids are made unique by the database
// (INSERT … ON CONFLICT DO NOTHING), so idempotent accepts hold across
// instances.
//
// Writes that make work due (Accept, Complete, Wake, Replay, and
// CompleteRenew when it releases a lane) send a notification on the due
// channel after they commit, and terminal outcomes send the message id on the
// receipt channel, so other instances' schedulers and receipt waiters wake at
// once; see Notifier. Notifications are hints: a listener must still read the
// store, and should poll now and then.
//
// The schema is created and upgraded by numbered migrations (migrations/*.sql)
// that Open applies under an advisory lock, so instances starting together
// are safe; Migrate applies them without opening a store. To keep several
// deployments in one database, give each its own schema with the URL's
// search_path parameter (postgres://…/db?search_path=tenant1) and its own
// Options.ChannelPrefix.
package postgres

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// DefaultChannelPrefix names the notification channels when
// Options.ChannelPrefix is empty: switchboard_due and switchboard_receipt.
const DefaultChannelPrefix = "switchboard"

// Options tune the store.
type Options struct {
	// MaxConns bounds the connection pool. Zero means 16, unless the URL sets
	// pool_max_conns.
	MaxConns int32
	// ChannelPrefix names the notification channels <prefix>_due and
	// <prefix>_receipt (default DefaultChannelPrefix). Deployments sharing a
	// database in separate schemas need separate prefixes.
	ChannelPrefix string
	// Logger receives background errors (failed notifications, listener
	// reconnects). Nil discards them.
	Logger *slog.Logger
	// ReadBytes bounds the message bodies one claim or pull reads (at
	// least one message is always read; default DefaultReadBytes).
	ReadBytes int64
}

// DefaultReadBytes is Options.ReadBytes's default.
const DefaultReadBytes = 16 << 20

// Store is the PostgreSQL implementation of core.Store. It is safe for
// concurrent use; every write is committed when its method returns.
type Store struct {
	pool        *pgxpool.Pool
	log         *slog.Logger
	dueChan     string
	receiptChan string
	notifier    *Notifier
	readBytes   int64
	// Queue sizes read by concurrent callers share one query.
	depthReads flights[int]
	byteReads  flights[int64]

	// instance tells this store's due notifications from other
	// instances' (DueWake).
	instance string

	// Pending notifications, sent by the notify loop after commit: work
	// made due by this instance's relay, which has woken its scheduler
	// (dueAccepted), lanes it released, which it should look at again
	// (dueReleased), work for any instance (dueAll), ended messages.
	mu          sync.Mutex
	dueAccepted bool
	dueReleased bool
	dueAll      bool
	receipts    []string  // payload lines (receipts.go)
	rechecks    []recheck // lanes deleted, to look at again (lanes.go)
	kick        chan struct{}

	// Accepts waiting for a batch (accept.go).
	accepts  chan *acceptReq
	acceptWG sync.WaitGroup
	// Lane completions waiting for a batch (complete.go).
	completes  chan *completeReq
	completing chan struct{} // held by the goroutine completing a batch

	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ core.Store       = (*Store)(nil)
	_ core.LaneRenewer = (*Store)(nil)
)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string), applies pending migrations and returns the store.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, wrap("parse url", err)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns"):
		cfg.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("connect", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	prefix := opts.ChannelPrefix
	if prefix == "" {
		prefix = DefaultChannelPrefix
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		pool:        pool,
		log:         log,
		dueChan:     prefix + "_due",
		receiptChan: prefix + "_receipt",
		instance:    rand.Text(),
		kick:        make(chan struct{}, 1),
		readBytes:   cmp.Or(max(opts.ReadBytes, 0), DefaultReadBytes),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	s.notifier = newNotifier(pool, prefix+"_listener", log)
	go s.notifyLoop()
	s.startAcceptors()
	s.completes = make(chan *completeReq, 4*maxCompleteBatch)
	s.completing = make(chan struct{}, 1)
	s.acceptWG.Add(1)
	go s.recheckLoop()
	return s, nil
}

// Close sends the notifications still pending, stops the notifier and closes
// the pool.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		s.acceptWG.Wait()
		for {
			select {
			case q := <-s.accepts:
				q.done <- acceptAns{err: errors.New("postgres: store closed")}
				continue
			case q := <-s.completes:
				q.done <- completeAns{err: errors.New("postgres: store closed")}
				continue
			default:
			}
			break
		}
		<-s.done
		s.notifier.Close()
		s.pool.Close()
	})
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return wrap("ping", err)
	}
	return nil
}

// Notifier returns the store's notifier, to listen to DueChannel and
// ReceiptChannel (or any other channel) across instances.
func (s *Store) Notifier() *Notifier { return s.notifier }

// DueChannel is the channel notified after a write makes lanes due. Its
// payload names the instance whose write it was, when that instance
// claims the lanes itself, or is empty when any instance should look;
// DueWake tells a listener what to do about it.
func (s *Store) DueChannel() string { return s.dueChan }

// acceptedMark ends a due payload whose instance had already woken its
// scheduler when it wrote (an accept, a Wake, a Replay: the relay wakes
// itself after each), so its own notification asks nothing of it.
const acceptedMark = "+"

// DueWake is what a DueChannel notification asks of the instance that
// receives it.
type DueWake int

const (
	// WakeAll asks the instance to look for due lanes now and to wake the
	// streams waiting for work.
	WakeAll DueWake = iota
	// WakeNone asks nothing: the instance's own write, after which its
	// relay woke what it had to.
	WakeNone
	// WakeStreams asks it only to wake the streams waiting for work:
	// another instance made lanes due and claims them itself (its
	// scheduler was woken by the write), so a poll here would find
	// nothing, at the cost of a transaction. Should that instance die
	// first, the lanes are claimed by the other instances' periodic polls
	// (core.RelayConfig.Poll), once the dead instance's claim has lapsed.
	WakeStreams
	// WakeUnknown is WakeAll for a payload this build cannot read (a peer
	// of a newer build): the safe answer is to look now.
	WakeUnknown
)

// DueWake tells what a DueChannel payload asks of this store's instance:
// WakeAll for those any instance should act on (an empty payload, also
// sent to every listener after the listening connection reconnects) and
// for lanes it released (another instance's accept may have raced the
// release, and polled while the lane was still claimed); WakeNone for its
// other writes (accepts, Wake, Replay: its relay has woken its scheduler
// and its streams); WakeStreams for the notifications of other instances;
// WakeUnknown for a payload of none of these forms.
//
// The payloads, by build: empty, always (builds before e978ee0); the
// writer's instance id (since e978ee0), followed by acceptedMark for
// accepts (since 40afff4). An instance id is rand.Text's: 26 characters
// of base32. A later build that needs another payload must make it of
// another form (a "v3:" prefix, say), which this build answers with
// WakeUnknown, or keep the instance id as it is.
func (s *Store) DueWake(payload string) DueWake {
	if payload == "" {
		return WakeAll
	}
	id, accepted := strings.CutSuffix(payload, acceptedMark)
	switch {
	case id == s.instance && accepted:
		return WakeNone
	case id == s.instance:
		return WakeAll
	case isInstanceID(id):
		return WakeStreams
	}
	return WakeUnknown
}

// isInstanceID reports whether id has the form of an instance id
// (rand.Text: 26 characters of the standard base32 alphabet, or more in
// a later Go).
func isInstanceID(id string) bool {
	if len(id) < 26 {
		return false
	}
	for i := range len(id) {
		if c := id[i]; (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// ReceiptChannel is the channel notified when messages reach a terminal
// status; its payload is their receipts, or their ids alone, one a line
// (see ParseReceipts and receipts.go): one notification carries many,
// since each NOTIFY is queued and signalled to every listening session.
func (s *Store) ReceiptChannel() string { return s.receiptChan }

// signalAccepted, signalReleased, signalDueAll and signalEnded queue
// notifications; call them only after the write committed (see DueWake).
// signalAccepted is for writes after which the relay of this instance
// wakes its own scheduler (Accept, Wake, Replay); signalReleased for
// lanes released by this instance; signalDueAll for lanes the store
// itself made due (lanes restored by a recheck or a sweep), which any
// instance's scheduler should look at now.
func (s *Store) signalAccepted() {
	s.mu.Lock()
	s.dueAccepted = true
	s.mu.Unlock()
	s.wakeNotifyLoop()
}

func (s *Store) signalReleased() {
	s.mu.Lock()
	s.dueReleased = true
	s.mu.Unlock()
	s.wakeNotifyLoop()
}

func (s *Store) signalDueAll() {
	s.mu.Lock()
	s.dueAll = true
	s.mu.Unlock()
	s.wakeNotifyLoop()
}

func (s *Store) signalEnded(es ...ended) {
	if len(es) == 0 {
		return
	}
	lines := encodeEnded(es) // now: the caller may change the receipts
	s.mu.Lock()
	s.receipts = append(s.receipts, lines...)
	s.mu.Unlock()
	s.wakeNotifyLoop()
}

func (s *Store) wakeNotifyLoop() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// notifyGap is the least time between the starts of two notification
// rounds. An idle store's first notification goes at once; under load the
// notifications of the writes of up to notifyGap share one round (one
// transaction, one take of the lock NOTIFY holds at commit), for at most
// that much more delay.
const notifyGap = 5 * time.Millisecond

// notifyLoop sends queued notifications, coalescing everything queued since
// the last round into one round trip: NOTIFY takes a database-wide lock at
// commit, so one per accepted message would serialise the writers.
func (s *Store) notifyLoop() {
	defer close(s.done)
	var last time.Time
	gap := time.NewTimer(time.Hour)
	gap.Stop()
	for {
		select {
		case <-s.kick:
		case <-s.quit:
			s.flushNotifications() // what Close's callers committed last
			return
		}
		if d := notifyGap - time.Since(last); d > 0 {
			gap.Reset(d)
			select {
			case <-gap.C:
			case <-s.quit:
				gap.Stop()
				s.flushNotifications()
				return
			}
		}
		last = time.Now()
		s.flushNotifications()
	}
}

func (s *Store) flushNotifications() {
	s.mu.Lock()
	accepted, released, all, receipts := s.dueAccepted, s.dueReleased, s.dueAll, s.receipts
	s.dueAccepted, s.dueReleased, s.dueAll, s.receipts = false, false, false, nil
	s.mu.Unlock()
	if !accepted && !released && !all && len(receipts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b pgx.Batch
	switch {
	case all:
		b.Queue("SELECT pg_notify($1, '')", s.dueChan)
	case released:
		b.Queue("SELECT pg_notify($1, $2)", s.dueChan, s.instance)
	case accepted:
		b.Queue("SELECT pg_notify($1, $2)", s.dueChan, s.instance+acceptedMark)
	}
	if len(receipts) > 0 {
		for _, p := range receiptPayloads(receipts) {
			b.Queue("SELECT pg_notify($1, $2)", s.receiptChan, p)
		}
	}
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		s.log.Warn("postgres: send notifications", "err", err)
	}
}

// maxTxAttempts bounds how often a transaction is retried after a deadlock
// or serialization failure.
const maxTxAttempts = 8

// inTx runs fn in a transaction, retrying it when PostgreSQL aborts it for a
// deadlock or a serialization failure. fn must reset whatever it reports,
// since it may run more than once.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		if err == nil || attempt == maxTxAttempts || !retryable(err) {
			return err
		}
		delay := time.Duration(attempt) * time.Duration(1+mrand.IntN(5)) * time.Millisecond
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}

// zeroTS is Go's zero time as stored: "never" for claim_until and next_at.
const zeroTS = "'0001-01-01 00:00:00+00'::timestamptz"

// utc normalises a time read from the database; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func lim(n int) int {
	if n <= 0 {
		return 1000
	}
	return n
}
