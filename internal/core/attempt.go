package core

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// attemptWatchers hands the outcome of a message's delivery attempt to
// the sends waiting for it (SendAsAwaitAttempt). The zero value is ready.
type attemptWatchers struct {
	n  atomic.Int32 // watches registered: the scheduler skips the lock at 0
	mu sync.Mutex
	m  map[string][]chan attemptSignal
}

// attemptSignal is what a watch learns: the outcome of an attempt made on
// this instance (ok), or that the message's receipt became terminal
// elsewhere (another instance; !ok: read it).
type attemptSignal struct {
	o  Outcome
	ok bool
}

func (w *attemptWatchers) watch(id string) chan attemptSignal {
	ch := make(chan attemptSignal, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string][]chan attemptSignal{}
	}
	w.m[id] = append(w.m[id], ch)
	w.mu.Unlock()
	w.n.Add(1)
	return ch
}

func (w *attemptWatchers) unwatch(id string, ch chan attemptSignal) {
	w.mu.Lock()
	cs := slices.DeleteFunc(w.m[id], func(c chan attemptSignal) bool { return c == ch })
	if len(cs) == 0 {
		delete(w.m, id)
	} else {
		w.m[id] = cs
	}
	w.mu.Unlock()
	w.n.Add(-1)
}

// signal tells the watches of message id what happened, without blocking:
// a watch keeps the first signal it got.
func (w *attemptWatchers) signal(id string, s attemptSignal) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.m[id] {
		select {
		case ch <- s:
		default:
		}
	}
}

// SendAsAwaitAttempt sends m for p, as SendAs does, and then, when m was
// queued for a receiver that is alive and takes pushes, waits at most wait
// (or until ctx ends) for the first delivery attempt the scheduler makes
// of it. The result's receipt is the message's as that attempt left it:
// delivered (with the receiver's reply), rejected, or still queued after a
// failed attempt; queued too when no attempt ended within wait. m is
// durable before any attempt, as with SendAs: the wait changes only the
// answer, never the delivery.
//
// The wait costs no store access: the scheduler, which records the
// attempt's outcome anyway, hands it over as it publishes it. An attempt
// made by another hub instance sharing the store is learnt of only when it
// ends the message (NotifyReceipt), and then the receipt is read once.
// A duplicate, or a message that is not queued (expired on arrival), is
// answered at once.
func (r *Relay) SendAsAwaitAttempt(ctx context.Context, p Principal, m *Message, wait time.Duration) (SendResult, error) {
	if wait <= 0 || m.ID == "" {
		return r.SendAs(ctx, p, m)
	}
	// Watched before the send: the scheduler may deliver it before
	// SendAs returns.
	id := m.ID
	ch := r.attempts.watch(id)
	defer r.attempts.unwatch(id, ch)
	res, err := r.SendAs(ctx, p, m)
	if err != nil || res.Duplicate || res.Receipt.Status != StatusQueued {
		return res, err
	}
	recv, err := r.Agent(ctx, m.Receiver) // cached: SendAs just read it
	if err != nil || !recv.Endpoint.Pushable() || !recv.Alive(r.clock.Now()) {
		return res, nil // no attempt is coming now: queued
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case s := <-ch:
			if s.ok {
				res.Receipt = attempted(res.Receipt, s.o)
				return res, nil
			}
			rc, err := r.store.GetReceipt(ctx, id)
			if err == nil && rc.Status.Terminal() {
				res.Receipt = *rc
				return res, nil
			}
		case <-t.C:
			return res, nil
		case <-ctx.Done():
			return res, nil
		}
	}
}

// attempted is receipt rc after an attempt whose outcome is o, as the
// store records it.
func attempted(rc Receipt, o Outcome) Receipt {
	if o.Kind != OutcomeTimeout { // a timeout is no attempt
		rc.Attempts++
	}
	rc.UpdatedAt = o.At
	if o.Code != 0 {
		rc.Code = o.Code
	}
	if o.Error != "" {
		rc.LastError = o.Error
	}
	switch o.Kind {
	case OutcomeDelivered:
		rc.Status, rc.Reply = StatusDelivered, o.Reply
	case OutcomeRejected:
		rc.Status, rc.Reply = StatusRejected, o.Reply
	case OutcomeTimeout:
		rc.Status = StatusTimeout
	case OutcomeRetry:
		rc.NextAttempt = o.NextAt
		rc.History = append(slices.Clip(rc.History), ReceiptEvent{At: o.At, Status: StatusQueued, Detail: o.Detail})
		return rc
	}
	rc.History = append(slices.Clip(rc.History), ReceiptEvent{At: o.At, Status: rc.Status, Detail: o.Detail})
	return rc
}
