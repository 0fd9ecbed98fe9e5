package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotifierClosed is returned by Listen and Notify after Close.
var ErrNotifierClosed = errors.New("postgres: notifier closed")

// listenBuffer is how many notifications a listener's channel holds; when it
// is full, further notifications for that listener are dropped.
const listenBuffer = 256

// Notifier carries wake-ups between hub instances over PostgreSQL's
// LISTEN/NOTIFY. Notify sends through the store's pool; every Listen shares
// one dedicated connection, opened on first use, which the notifier
// reconnects (with backoff) when it breaks.
//
// Notifications are hints. PostgreSQL delivers them only to sessions
// listening at commit time, a slow listener's excess is dropped, and a
// reconnect can miss some; after every reconnect each listener receives an
// empty payload, meaning "re-read the store". Consumers must treat a
// notification as "look now", never as the data itself.
type Notifier struct {
	pool *pgxpool.Pool
	cfg  *pgx.ConnConfig
	log  *slog.Logger

	mu         sync.Mutex
	subs       map[string]map[*subscription]struct{}
	dirty      bool               // subs changed since the last LISTEN/UNLISTEN
	cancelWait context.CancelFunc // interrupts the listener's wait
	started    bool
	closed     bool

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{}
}

type subscription struct {
	ch        chan string
	ready     chan struct{} // closed once the channel is LISTENed
	readyOnce sync.Once
}

func (s *subscription) markReady() { s.readyOnce.Do(func() { close(s.ready) }) }

func newNotifier(pool *pgxpool.Pool, appName string, log *slog.Logger) *Notifier {
	cfg := pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = appName
	ctx, cancel := context.WithCancel(context.Background())
	return &Notifier{
		pool:   pool,
		cfg:    cfg,
		log:    log,
		subs:   make(map[string]map[*subscription]struct{}),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
	}
}

// Notify sends payload (at most 8000 bytes) on channel to every session
// listening on it, on any instance, once the statement commits.
func (n *Notifier) Notify(ctx context.Context, channel, payload string) error {
	if n.ctx.Err() != nil {
		return ErrNotifierClosed
	}
	if _, err := n.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		return fmt.Errorf("postgres: notify %s: %w", channel, err)
	}
	return nil
}

// Listen subscribes to channel. It returns once the listening connection is
// LISTENing on it, so every notification committed after Listen returns is
// delivered (unless the buffer overflows or the connection breaks, see
// Notifier). The returned channel yields payloads and is closed when ctx
// ends or the notifier is closed.
func (n *Notifier) Listen(ctx context.Context, channel string) (<-chan string, error) {
	if channel == "" {
		return nil, errors.New("postgres: listen: empty channel name")
	}
	sub := &subscription{ch: make(chan string, listenBuffer), ready: make(chan struct{})}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrNotifierClosed
	}
	if n.subs[channel] == nil {
		n.subs[channel] = make(map[*subscription]struct{})
	}
	n.subs[channel][sub] = struct{}{}
	n.changedLocked()
	if !n.started {
		n.started = true
		go n.run()
	}
	n.mu.Unlock()

	select {
	case <-sub.ready:
	case <-ctx.Done():
		n.unsubscribe(channel, sub)
		return nil, ctx.Err()
	case <-n.ctx.Done():
		return nil, ErrNotifierClosed
	}
	go func() {
		select {
		case <-ctx.Done():
			n.unsubscribe(channel, sub)
		case <-n.ctx.Done(): // Close closes the channel
		}
	}()
	return sub.ch, nil
}

func (n *Notifier) unsubscribe(channel string, sub *subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.subs[channel][sub]; !ok {
		return
	}
	delete(n.subs[channel], sub)
	if len(n.subs[channel]) == 0 {
		delete(n.subs, channel)
	}
	close(sub.ch)
	n.changedLocked()
}

// changedLocked makes the listener update its LISTENs.
func (n *Notifier) changedLocked() {
	n.dirty = true
	if n.cancelWait != nil {
		n.cancelWait()
	}
}

// Close stops listening and closes every listener's channel.
func (n *Notifier) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	started := n.started
	n.cancel()
	n.mu.Unlock()
	if started {
		<-n.done
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, subs := range n.subs {
		for sub := range subs {
			close(sub.ch)
		}
	}
	n.subs = nil
}

// run keeps a listening connection until Close, reconnecting after failures.
func (n *Notifier) run() {
	defer close(n.done)
	backoff := 100 * time.Millisecond
	reconnect := false
	for {
		conn, err := pgx.ConnectConfig(n.ctx, n.cfg)
		if err != nil {
			if n.ctx.Err() != nil {
				return
			}
			n.log.Warn("postgres: listener cannot connect", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-n.ctx.Done():
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		err = n.serve(conn, reconnect)
		conn.Close(context.Background())
		if n.ctx.Err() != nil {
			return
		}
		n.log.Warn("postgres: listener connection lost, reconnecting", "err", err)
		reconnect = true
	}
}

// serve LISTENs on the subscribed channels and dispatches notifications
// until the connection fails or the notifier closes. After a reconnect it
// sends every listener an empty payload once the LISTENs are back.
func (n *Notifier) serve(conn *pgx.Conn, reconnected bool) error {
	listening := make(map[string]bool)
	n.mu.Lock()
	n.dirty = true
	n.mu.Unlock()
	for {
		n.mu.Lock()
		if n.dirty {
			n.dirty = false
			var want []string
			for ch := range n.subs {
				want = append(want, ch)
			}
			n.mu.Unlock()
			if err := n.sync(conn, listening, want); err != nil {
				return err
			}
			n.mu.Lock()
			for ch, subs := range n.subs {
				if listening[ch] {
					for sub := range subs {
						sub.markReady()
					}
				}
			}
			if reconnected {
				reconnected = false
				for _, subs := range n.subs {
					for sub := range subs {
						n.deliverLocked(sub, "")
					}
				}
			}
			n.mu.Unlock()
			continue
		}
		wait, cancel := context.WithCancel(n.ctx)
		n.cancelWait = cancel
		n.mu.Unlock()

		note, err := conn.WaitForNotification(wait)

		n.mu.Lock()
		n.cancelWait = nil
		n.mu.Unlock()
		cancel()
		if note != nil {
			n.dispatch(note.Channel, note.Payload)
		}
		if err != nil {
			if n.ctx.Err() != nil {
				return n.ctx.Err()
			}
			if wait.Err() != nil && !conn.IsClosed() {
				continue // interrupted to update the LISTENs
			}
			return err
		}
	}
}

// sync issues LISTEN and UNLISTEN so that listening matches want.
func (n *Notifier) sync(conn *pgx.Conn, listening map[string]bool, want []string) error {
	wanted := make(map[string]bool, len(want))
	for _, ch := range want {
		wanted[ch] = true
		if !listening[ch] {
			if _, err := conn.Exec(n.ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return fmt.Errorf("listen %s: %w", ch, err)
			}
			listening[ch] = true
		}
	}
	for ch := range listening {
		if !wanted[ch] {
			if _, err := conn.Exec(n.ctx, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return fmt.Errorf("unlisten %s: %w", ch, err)
			}
			delete(listening, ch)
		}
	}
	return nil
}

func (n *Notifier) dispatch(channel, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for sub := range n.subs[channel] {
		n.deliverLocked(sub, payload)
	}
}

func (n *Notifier) deliverLocked(sub *subscription, payload string) {
	select {
	case sub.ch <- payload:
	default:
		n.log.Debug("postgres: listener buffer full, notification dropped")
	}
}
