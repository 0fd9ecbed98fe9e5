package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// waitReceipt waits until message id has a terminal receipt or ctx ends.
func (r *Relay) waitReceipt(ctx context.Context, id string) (*Receipt, error) {
	return waitFor(ctx, r, id, func() (*Receipt, bool, error) {
		rc, err := r.store.GetReceipt(ctx, id)
		if err != nil {
			return nil, false, err
		}
		return rc, rc.Status.Terminal(), nil
	})
}

// waitResult waits until a message correlated to id arrives or ctx ends.
func (r *Relay) waitResult(ctx context.Context, id string) (*Message, error) {
	return waitFor(ctx, r, resultKeyPrefix+id, func() (*Message, bool, error) {
		ms, err := r.store.Results(ctx, id, 1)
		if err != nil || len(ms) == 0 {
			return nil, false, err
		}
		return ms[0], true, nil
	})
}

// Polls of a wait (waitFor): the first after Config.WaitPoll
// (waitPollFirst by default), then twice as far apart each time up to
// waitPollSpan times that.
const (
	waitPollFirst = 250 * time.Millisecond
	waitPollSpan  = 8
)

// waitFor polls check whenever key is notified, and also now and then —
// 250 ms (Config.WaitPoll) after it starts, then twice as long each time
// up to every 2 s — so that changes made by other hub instances are seen
// too (stores that share them notify receipts that end there, and results
// accepted there, through NotifyReceipt and NotifyResult, or LookNow when
// they cannot tell which; a notification can be lost). A wait that polled
// every 250 ms cost a store read four times a second for as long as it
// lasted, and waits can be many and long.
func waitFor[T any](ctx context.Context, r *Relay, key string, check func() (T, bool, error)) (T, error) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.waiters[key] = append(r.waiters[key], ch)
	r.mu.Unlock()
	defer r.unwait(key, ch)
	poll := NewPoll(r.cfg.WaitPoll, max(waitPollSpan*r.cfg.WaitPoll, r.cfg.WaitPoll)) // max: a huge WaitPoll wraps
	defer poll.Stop()
	for {
		v, ok, err := check()
		if err != nil || ok {
			return v, err
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-ch:
		case <-poll.C():
			poll.Fired()
		}
	}
}

func (r *Relay) unwait(key string, ch chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.waiters[key]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(r.waiters, key)
	} else {
		r.waiters[key] = ws
	}
}

func (r *Relay) notify(key string) { r.notifyWith(key, nil) }

// notifyWith is notify, handing rc, message key's terminal receipt when
// not nil, to the sends waiting for its first attempt.
func (r *Relay) notifyWith(key string, rc *Receipt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.waiters[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	r.attempts.signal(key, attemptSignal{rc: rc})
	id := strings.TrimPrefix(key, resultKeyPrefix)
	for _, h := range r.hooks[id] {
		h.fn(id)
	}
}

// resultKeyPrefix marks the waiters' key for results correlated to a
// message, as opposed to its receipt.
const resultKeyPrefix = "result:"

type messageHook struct{ fn func(id string) }

// OnMessageEvent calls fn with id whenever something may have changed for
// message id as this instance sees it: its receipt moved, or a result
// correlated to it arrived (for changes made by other instances, only
// receipts are notified, and only on stores that share them, see
// NotifyReceipt). It serves callers that follow many messages at once
// with one goroutine where WaitReceipt and WaitResult need one per
// message. fn runs with the relay's lock held: it must return at once and
// must not call the relay. Calling stop ends the calls.
func (r *Relay) OnMessageEvent(id string, fn func(id string)) (stop func()) {
	h := &messageHook{fn: fn}
	r.mu.Lock()
	r.hooks[id] = append(r.hooks[id], h)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		hs := slices.DeleteFunc(r.hooks[id], func(x *messageHook) bool { return x == h })
		if len(hs) == 0 {
			delete(r.hooks, id)
		} else {
			r.hooks[id] = hs
		}
	}
}

// Follows reports whether anything on this instance waits for message
// id's receipt or follows its events (a wait, a send waiting for its
// first attempt, an OnMessageEvent callback): a store shared between
// instances need not decode another instance's receipt of a message
// nobody here follows. Waits register before they read the store, so a
// wait that begins after Follows said false still sees the receipt.
func (r *Relay) Follows(id string) bool {
	r.mu.Lock()
	n := len(r.waiters[id]) + len(r.hooks[id])
	r.mu.Unlock()
	return n > 0 || r.attempts.watching(id)
}

// NotifyResult wakes whoever waits for results correlated to message id
// (and its OnMessageEvent callbacks); stores shared between instances
// call it when another instance accepted such a result.
func (r *Relay) NotifyResult(id string) { r.notify(resultKeyPrefix + id) }

// NotifyReceipt wakes whoever waits for message id's receipt; stores shared
// between instances call it when another instance ended a message.
func (r *Relay) NotifyReceipt(id string) { r.notify(id) }

// NotifyEnded is NotifyReceipt for a message whose terminal receipt rc,
// as the other instance stored it, came with the notification: a send
// waiting for the message's first attempt (SendAsAwaitAttempt) answers
// with it, without reading the store. rc must not change afterwards.
func (r *Relay) NotifyEnded(rc *Receipt) { r.notifyWith(rc.MessageID, rc) }

// LookNow wakes every wait on this instance (for a receipt, for results,
// a send waiting for its first attempt) and calls every OnMessageEvent
// callback, so that each reads the store once now: stores shared between
// instances call it when another instance told of a change they cannot
// read (a notification of a newer format, a garbled one) or may have
// missed some (after their listening connection reconnected). It costs a
// store read per wait, as one poll of each would; callers bound how often
// they call it.
func (r *Relay) LookNow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ws := range r.waiters {
		for _, ch := range ws {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	r.attempts.signalAll(attemptSignal{look: true})
	for id, hs := range r.hooks {
		for _, h := range hs {
			h.fn(id)
		}
	}
}

// receiptAccess returns message id's receipt when p may read it: its
// sender or receiver in the identity that sent or received it, the
// operator, dev mode, the hub. Any other caller gets ErrNotFound, as for a
// message that does not exist.
func (r *Relay) receiptAccess(ctx context.Context, p Principal, id string) (*Receipt, error) {
	rc, err := r.store.GetReceipt(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("message %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	rel := RelNone
	if p.AgentID != "" {
		own, err := r.relationToAgent(ctx, p, p.AgentID)
		if err != nil {
			return nil, err
		}
		if own == RelOwner {
			if rel, err = r.relationToMessage(ctx, p.AgentID, rc, false); err != nil {
				return nil, err
			}
		}
	}
	if err := Authorize(p, OpReadReceipt, rel); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("message %q: %w", id, ErrNotFound)
		}
		return nil, err
	}
	return rc, nil
}

// ReceiptFor returns message id's receipt to p (see receiptAccess).
func (r *Relay) ReceiptFor(ctx context.Context, p Principal, id string) (*Receipt, error) {
	return r.receiptAccess(ctx, p, id)
}

// WaitReceiptFor waits, for p, until message id has a terminal receipt or
// ctx ends; it returns the receipt as it is then, which p may read (see
// receiptAccess), with ctx's error if it ended first.
func (r *Relay) WaitReceiptFor(ctx context.Context, p Principal, id string) (*Receipt, error) {
	rc, err := r.receiptAccess(ctx, p, id)
	if err != nil || rc.Status.Terminal() {
		return rc, err
	}
	got, err := r.waitReceipt(ctx, id)
	if err != nil {
		return rc, err
	}
	return got, nil
}

// ResultsFor returns to p, who may read message id's receipt (see
// receiptAccess), up to limit of the results of message id: the messages
// whose correlation id is id, oldest first. With wait > 0 it first waits
// that long for one to arrive, if none has.
func (r *Relay) ResultsFor(ctx context.Context, p Principal, id string, wait time.Duration, limit int) ([]*Message, error) {
	if _, err := r.receiptAccess(ctx, p, id); err != nil {
		return nil, err
	}
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, _ = r.waitResult(wctx, id)
		cancel()
	}
	return r.store.Results(ctx, id, limit)
}
