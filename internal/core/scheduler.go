package core

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"
)

// Run delivers messages until ctx ends: it claims due lanes, delivers each
// lane's messages in order through the receiver's deliverer, records the
// outcomes, times out expired messages and purges old receipts.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer r.claimedAttempts.Wait() // first attempts made for waiting sends
	defer r.stopClaimed()          // which stop first, as the lanes below do
	wg.Add(2)
	go func() { defer wg.Done(); r.every(ctx, r.cfg.Poll, r.expire) }()
	go func() { defer wg.Done(); r.every(ctx, time.Minute, r.purge) }()

	sem := make(chan struct{}, r.cfg.MaxInFlight)
	idle := time.NewTimer(0)
	defer idle.Stop()
	for {
		// Set before the slots are counted, so that a delivery ending
		// after the count wakes the loop.
		r.starved.Store(true)
		free := cap(sem) - len(sem)
		if free > 0 {
			r.starved.Store(false)
		}
		n := 0
		if free > 0 {
			var err error
			n, err = r.claimAndDeliver(ctx, free, sem, &wg)
			if err != nil && ctx.Err() == nil {
				r.log.Error("claim failed", "err", err)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if n > 0 && n == free {
			continue // there may be more due work; look again at once
		}
		idle.Reset(r.cfg.Poll)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wakeCh:
		case <-idle.C:
		}
	}
}

// Tick runs one scheduler pass synchronously: it times out expired messages
// and delivers every lane due now. Tests drive the relay with it and a fake
// clock.
func (r *Relay) Tick(ctx context.Context) error {
	if err := r.expire(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.cfg.MaxInFlight)
	_, err := r.claimAndDeliver(ctx, cap(sem), sem, &wg)
	wg.Wait()
	return err
}

func (r *Relay) every(ctx context.Context, d time.Duration, f func(context.Context) error) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := f(ctx); err != nil && ctx.Err() == nil {
				r.log.Error("background task failed", "err", err)
			}
		}
	}
}

func (r *Relay) claimAndDeliver(ctx context.Context, free int, sem chan struct{}, wg *sync.WaitGroup) (int, error) {
	if !r.cfg.Memory.Room(0) {
		return 0, nil // the memory budget is spent: deliveries ending free it and wake the loop
	}
	now := r.clock.Now()
	claims, err := r.store.Claim(ctx, now, now.Add(r.cfg.ClaimLease), r.cfg.Owner, free, r.cfg.PerLane)
	if err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	for _, c := range claims {
		sem <- struct{}{}
		wg.Add(1)
		held := claimedSize(c.Messages)
		r.cfg.Memory.Acquire(held)
		go func(c LaneClaim) {
			defer wg.Done()
			parked := r.deliverLane(ctx, c, held)
			<-sem
			// A lane released with messages left is due again at once; a
			// parked lane is not (a receiver that only pulls parks every
			// lane that refills, so waking for it would spin the loop).
			if r.starved.CompareAndSwap(true, false) || !parked {
				r.wakeScheduler()
			}
		}(c)
	}
	return len(claims), nil
}

// maxRenewals bounds how many times in a row one delivery goroutine keeps a
// busy lane before giving others their turn through a fresh claim.
const maxRenewals = 16

// deliverLane delivers a claimed lane's messages in order and records what
// happened. A failed attempt stops the lane so later messages wait behind
// the one being retried. With a store that can renew claims, a lane that
// is still busy is kept and its next messages delivered at once. It
// reports whether it left the lane parked.
// held is what the claim's messages take from the memory budget, given
// back as they are done with.
func (r *Relay) deliverLane(ctx context.Context, c LaneClaim, held int64) (parked bool) {
	defer func() { r.cfg.Memory.Release(held) }()
	renewer, _ := r.store.(LaneRenewer)
	for round := 0; ; round++ {
		res := r.attemptLane(ctx, c)
		var next []*Message
		var err error
		if renewer != nil && round < maxRenewals && ctx.Err() == nil {
			now := r.clock.Now()
			next, err = renewer.CompleteRenew(context.WithoutCancel(ctx), r.cfg.Owner, res, now, now.Add(r.cfg.ClaimLease), r.cfg.PerLane)
		} else {
			err = r.store.Complete(context.WithoutCancel(ctx), r.cfg.Owner, []LaneResult{res})
		}
		if err != nil {
			r.log.Error("record delivery outcomes", "lane", c.Lane, "err", err)
			return false
		}
		r.published(c, res)
		if len(next) == 0 {
			return res.Park
		}
		c = LaneClaim{Lane: c.Lane, Messages: next}
		r.cfg.Memory.Release(held)
		held = claimedSize(next)
		r.cfg.Memory.Acquire(held)
	}
}

// attemptLane tries a claimed lane's messages in order and says what
// happened, stopping at the first that must be retried.
func (r *Relay) attemptLane(ctx context.Context, c LaneClaim) LaneResult {
	res := LaneResult{Lane: c.Lane}
	agent, err := r.Agent(ctx, c.Lane.Receiver)
	now := r.clock.Now()
	var d Deliverer
	switch {
	case errors.Is(err, ErrNotFound):
		res.Park = true // deregistered: wait for a new registration or the TTL
	case err != nil:
		r.log.Error("load receiver", "agent", c.Lane.Receiver, "err", err)
		res.NextAt = now.Add(r.cfg.BackoffBase)
	case !agent.Alive(now) || !agent.Endpoint.Pushable():
		res.Park = true
	default:
		if d = r.deliverers[agent.Endpoint.Kind]; d == nil {
			res.Park = true
		}
	}
	if d != nil {
		// The claim lasts ClaimLease from about now: an attempt that could
		// outlast it is left for the next claim or renewal, or the lane
		// could be claimed again meanwhile (by another instance, or this
		// one) and delivered twice and out of order. The first attempt
		// always runs (Config keeps DeliverTimeout under ClaimLease).
		leaseEnd := now.Add(r.cfg.ClaimLease - r.cfg.ClaimLease/10)
		for i, m := range c.Messages {
			now = r.clock.Now()
			if i > 0 && now.Add(min(r.cfg.DeliverTimeout, m.ExpiresAt.Sub(now))).After(leaseEnd) {
				break // the rest stay queued, behind nothing: next round
			}
			if m.ReceiverGeneration != "" && m.ReceiverGeneration != agent.Generation {
				// Accepted for an identity of the receiver's id that has
				// ended (a deregistration on another instance raced the
				// accept): never the next identity's.
				res.Outcomes = append(res.Outcomes, Outcome{MessageID: m.ID, Kind: OutcomeRejected, At: now,
					Code: CodeDeregistered, Error: DetailDeregistered, Detail: DetailDeregistered})
				continue
			}
			if !now.Before(m.ExpiresAt) {
				o := Outcome{MessageID: m.ID, Kind: OutcomeTimeout, At: now, Detail: "ttl passed before delivery"}
				if m.Attempts == 0 {
					// Never tried: say what held it back (its own last
					// error, when it has attempts, is kept by the store).
					o.Code, o.Error = r.laneFails.heldBehind(c.Lane, m)
				}
				res.Outcomes = append(res.Outcomes, o)
				continue
			}
			timeout := r.cfg.DeliverTimeout
			if left := m.ExpiresAt.Sub(now); left < timeout {
				timeout = left
			}
			actx, cancel := context.WithTimeout(ctx, timeout)
			got := d.Deliver(actx, agent, m)
			cancel()
			if ctx.Err() != nil {
				break // shutting down: leave the rest queued; the claim lapses
			}
			now = r.clock.Now()
			o := Outcome{MessageID: m.ID, At: now, Code: got.Code, Reply: got.Reply, Detail: got.Detail}
			if got.Err != nil {
				o.Error = got.Err.Error()
			}
			switch got.Kind {
			case OutcomeDelivered, OutcomeRejected:
				o.Kind = got.Kind
				res.Outcomes = append(res.Outcomes, o)
				continue
			}
			o.Kind = OutcomeRetry
			o.NextAt = now.Add(r.Backoff(m.Attempts + 1))
			if !o.NextAt.Before(m.ExpiresAt) {
				o.NextAt = m.ExpiresAt
			}
			res.Outcomes = append(res.Outcomes, o)
			res.NextAt = o.NextAt
			break
		}
	}
	return res
}

// published emits events and wakes waiters for a completed lane.
func (r *Relay) published(c LaneClaim, res LaneResult) {
	r.laneFails.note(c.Lane, res.Outcomes)
	byID := make(map[string]*Message, len(c.Messages))
	for _, m := range c.Messages {
		byID[m.ID] = m
	}
	for _, o := range res.Outcomes {
		m := byID[o.MessageID]
		ev := Event{At: o.At, MessageID: o.MessageID, Sender: c.Lane.Sender, Receiver: c.Lane.Receiver,
			Code: o.Code, Detail: o.Detail, Error: o.Error}
		if m != nil {
			ev.Protocol, ev.ConversationID, ev.Attempts, ev.MessageType = m.Protocol, m.ConversationID, m.Attempts+1, m.Type
			ev.Latency = o.At.Sub(m.ReceivedAt)
		}
		switch o.Kind {
		case OutcomeDelivered:
			ev.Type, ev.Status = EventDelivered, StatusDelivered
		case OutcomeRejected:
			ev.Type, ev.Status = EventRejected, StatusRejected
		case OutcomeTimeout:
			ev.Type, ev.Status = EventTimeout, StatusTimeout
		case OutcomeRetry:
			ev.Type, ev.Status = EventRetry, StatusQueued
		}
		r.events.Publish(ev)
		r.attempts.signal(o.MessageID, attemptSignal{o: o, ok: true})
		if o.Kind != OutcomeRetry {
			r.notify(o.MessageID)
		}
	}
}

func (r *Relay) expire(ctx context.Context) error {
	for {
		rcs, err := r.store.ExpireDue(ctx, r.clock.Now(), 500)
		if err != nil {
			return fmt.Errorf("expire: %w", err)
		}
		r.noteHeldBehind(ctx, rcs)
		for _, rc := range rcs {
			r.events.Publish(Event{Type: EventTimeout, At: rc.UpdatedAt, MessageID: rc.MessageID, Sender: rc.Sender,
				Receiver: rc.Receiver, Status: StatusTimeout, Detail: "ttl passed before delivery", Attempts: rc.Attempts,
				Code: rc.Code, Error: rc.LastError})
			r.notify(rc.MessageID)
		}
		if len(rcs) < 500 {
			return nil
		}
	}
}

func (r *Relay) purge(ctx context.Context) error {
	for {
		n, err := r.store.PurgeBefore(ctx, r.clock.Now().Add(-r.cfg.Retention), 1000)
		if err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		if n < 1000 {
			return nil
		}
	}
}

// Backoff is the delay before retry number attempt (1-based): exponential
// from BackoffBase, capped at BackoffMax, with jitter in [d/2, d].
func (r *Relay) Backoff(attempt int) time.Duration {
	d := r.cfg.BackoffBase
	for i := 1; i < attempt && d < r.cfg.BackoffMax; i++ {
		d *= 2
	}
	if d > r.cfg.BackoffMax {
		d = r.cfg.BackoffMax
	}
	half := d / 2
	return half + time.Duration(mrand.Int64N(int64(half)+1))
}
