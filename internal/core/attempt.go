package core

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/stopctx"
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
// elsewhere (another instance; !ok), with that receipt when the
// notification carried it (rc; nil: read it), or only that something may
// have changed (look, from LookNow: read it).
type attemptSignal struct {
	o    Outcome
	ok   bool
	rc   *Receipt
	look bool
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

// watching reports whether a watch of message id is registered.
func (w *attemptWatchers) watching(id string) bool {
	if w.n.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m[id]) > 0
}

// signal tells the watches of message id what happened, without blocking:
// a watch keeps the first signal it got, unless that was only a look
// (LookNow), which a signal of what happened replaces.
func (w *attemptWatchers) signal(id string, s attemptSignal) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.m[id] {
		sendSignal(ch, s)
	}
}

// signalAll sends s to every watch (see signal).
func (w *attemptWatchers) signalAll(s attemptSignal) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cs := range w.m {
		for _, ch := range cs {
			sendSignal(ch, s)
		}
	}
}

// sendSignal puts s in ch (of capacity 1) unless a signal is pending there that
// s must not replace. Only the holder of attemptWatchers.mu sends, so ch
// has room after a receive.
func sendSignal(ch chan attemptSignal, s attemptSignal) {
	select {
	case ch <- s:
		return
	default:
	}
	if s.look {
		return // the pending signal makes the watch look anyway
	}
	select {
	case old := <-ch:
		if !old.look {
			s = old
		}
	default: // the watch took it meanwhile
	}
	ch <- s
}

// AcceptClaimer is an optional Store capability used by
// SendAsAwaitAttempt to make a message's first delivery attempt at once,
// without the scheduler's claim of its lane: the store claims the lane in
// the accept's own write.
type AcceptClaimer interface {
	// AcceptClaimed does what Accept does. In addition, when the message
	// is queued, is the only queued message of its (sender, receiver) lane
	// and the lane is neither claimed nor parked at now, it claims the lane
	// for owner until claimUntil, as Claim would have, and reports claimed.
	// The claimant then attempts the message and records the outcome with
	// Complete, which releases the lane.
	AcceptClaimed(ctx context.Context, m *Message, r *Receipt, maxQueue int, now, claimUntil time.Time, owner string) (res AcceptResult, claimed bool, err error)
}

// SendAsAwaitAttempt sends m for p, as SendAs does, and then, when m was
// queued for a receiver that is alive and takes pushes, waits at most wait
// (or until ctx ends) for the first delivery attempt of it. The result's
// receipt is the message's as that attempt left it: delivered (with the
// receiver's reply), rejected, or still queued after a failed attempt;
// queued too when no attempt ended within wait. m is durable before any
// attempt, as with SendAs: the wait changes only the answer, never the
// delivery. The wait is also bounded by half of m's TTL, so that it
// answers how the first attempt went, never that the TTL ran out (a
// message held behind a failing one in its lane would otherwise answer
// timeout).
//
// When the store can claim the message's lane as it accepts it
// (AcceptClaimer: the message is the lane's only one), the attempt starts
// at once, as the tutorial's relay pushes before it answers, in a
// goroutine of the relay's (Run waits for it when it stops): the scheduler
// would have had to claim the lane first, a store write per message when
// every sender waits for its answer before it sends again. The outcome is
// recorded (Complete) before it is answered, and the scheduler takes over
// the lane from there (retries, later messages). Otherwise the scheduler
// makes the attempt, in the lane's order, and hands its outcome over as it
// publishes it. Either way the wait reads nothing from the store, but when
// another hub instance sharing the store ended the message and the
// notification did not carry its receipt (NotifyReceipt rather than
// NotifyEnded): then the receipt is read once. A duplicate, or a
// message that is not queued (expired on arrival), is answered at once.
func (r *Relay) SendAsAwaitAttempt(ctx context.Context, p Principal, m *Message, wait time.Duration) (SendResult, error) {
	if wait <= 0 || m.ID == "" {
		return r.SendAs(ctx, p, m)
	}
	// Watched before the send: the scheduler may deliver it before
	// SendAs returns.
	id := m.ID
	ch := r.attempts.watch(id)
	defer r.attempts.unwatch(id, ch)
	res, err := r.sendAs(ctx, p, m, true)
	if err != nil || res.Duplicate || res.Receipt.Status != StatusQueued {
		return res, err
	}
	if res.claimed {
		r.attemptClaimed(m)
	} else {
		recv, err := r.Agent(ctx, m.Receiver) // cached: SendAs just read it
		if err != nil || !recv.Endpoint.Pushable() || !recv.Alive(r.clock.Now()) {
			return res, nil // no attempt is coming now: queued
		}
	}
	t := time.NewTimer(min(wait, m.TTL/2))
	defer t.Stop()
	for {
		select {
		case s := <-ch:
			if s.ok {
				res.Receipt = attempted(res.Receipt, s.o)
				return res, nil
			}
			if s.rc != nil && s.rc.Status.Terminal() {
				res.Receipt = *s.rc
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

// attemptClaimed delivers m, whose lane this instance claimed as it
// accepted m, in a goroutine that Run waits for: as the scheduler does
// (deliverLane), so the outcome is recorded, and messages accepted for the
// lane meanwhile are delivered in turn, before the lane is released. It
// stops as the scheduler's deliveries do when Run ends.
func (r *Relay) attemptClaimed(m *Message) {
	r.claimedAttempts.Add(1)
	go func() {
		defer r.claimedAttempts.Done()
		c := LaneClaim{Lane: Lane{Receiver: m.Receiver, Sender: m.Sender}, Messages: []*Message{m}}
		// Not the request's context: the attempt outlives an answer given
		// at the wait's bound.
		held := claimedSize(c.Messages)
		r.cfg.Memory.Acquire(held)
		r.deliverLane(stopctx.Until(r.stopping()), c, held)
	}()
}

// stopping returns the channel closed when Run ends (stopClaimed).
func (r *Relay) stopping() chan struct{} {
	r.stopOnce.Do(func() { r.stopCh = make(chan struct{}) })
	return r.stopCh
}

// stopClaimed ends the deliveries attemptClaimed started (Run calls it as
// it stops, before it waits for them).
func (r *Relay) stopClaimed() {
	ch := r.stopping()
	r.stopMu.Lock()
	defer r.stopMu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
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
