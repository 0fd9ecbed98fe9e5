package a2a

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// followers move tasks along as their relayed messages are delivered and
// answered, so that tasks progress (and push notifications go out) with no
// client waiting. One goroutine follows every task of the instance: it
// reconciles a task when the relay reports an event of one of its messages
// (core.Relay.OnMessageEvent), and otherwise checks it now and then —
// after 1 s, then twice as long each time up to followMaxGap, or longer
// when so many tasks are open that their checks would pass
// followMaxChecks a second — which catches what another hub instance
// changed when its notification was lost. A goroutine per task, blocked in WaitReceipt and
// WaitResult until the message's TTL plus Options.ResultWait, cost about
// 20 KiB and four store reads a second for each task a receiver had not
// answered.
//
// What is followed is also in the store, one KindFollow record per relayed
// message, written before the message is sent and deleted when following
// it ends, so that an instance that starts (after a restart, a crash, or
// in place of one that is gone) follows every task left open: adopt.
type followers struct {
	s    *Server
	wake chan struct{} // something in due

	mu    sync.Mutex
	byMsg map[string]*followed // message id → what follows it
	due   map[string]struct{}  // message ids notified since the last pass
	queue checks               // next checks, soonest first (stale ones skipped)
}

// check is a followed message's next check, as queued.
type check struct {
	at time.Time
	id string
	e  *followed
}

// checks is a min-heap of checks by time (container/heap), so that a pass
// takes the checks that are due without walking every followed message.
type checks []check

func (q checks) Len() int           { return len(q) }
func (q checks) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q checks) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *checks) Push(x any)        { *q = append(*q, x.(check)) }
func (q *checks) Pop() any {
	old := *q
	c := old[len(old)-1]
	old[len(old)-1] = check{}
	*q = old[:len(old)-1]
	return c
}

// followed is one relayed message of a task.
type followed struct {
	agent, task string
	until       time.Time     // give up: the message's TTL plus ResultWait
	next        time.Time     // check it then if nothing is notified before
	gap         time.Duration // the wait before next
	stop        func()        // ends the relay's notifications (set under f.mu)
}

const (
	followFirstGap  = time.Second
	followMaxGap    = 10 * time.Second
	followMaxChecks = 200 // checks a second with no event, at most (beyond those of young tasks)
)

// adoptPage is how many follow marks adopt reads at a time.
const adoptPage = 1000

func newFollowers(s *Server) *followers {
	return &followers{s: s, wake: make(chan struct{}, 1), byMsg: map[string]*followed{}, due: map[string]struct{}{}}
}

// followMark is a KindFollow record's data (its ID is the message id).
type followMark struct {
	Agent string    `json:"agent"`
	Task  string    `json:"task"`
	Until time.Time `json:"until"`
}

// remember records, before message msgID of the agent's task is sent, that
// it is to be followed until until.
func (f *followers) remember(ctx context.Context, agent, taskID, msgID string, until time.Time) error {
	b, err := json.Marshal(followMark{Agent: agent, Task: taskID, Until: until})
	if err != nil {
		return fmt.Errorf("a2a: encode follow mark: %w", err)
	}
	_, err = f.s.opt.Records.PutRecord(ctx, core.Record{Kind: KindFollow, ID: msgID, Data: b, UpdatedAt: f.s.relay.Clock().Now()})
	if err != nil && !errors.Is(err, core.ErrConflict) {
		return fmt.Errorf("a2a: record follow mark: %w", err)
	}
	return nil
}

// forget deletes the marks of messages no longer followed. A mark left
// behind (the store failed, the hub stopped) is adopted at the next start
// and forgotten then.
func (f *followers) forget(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := f.s.opt.Records.DeleteRecord(ctx, KindFollow, id); err != nil && !errors.Is(err, core.ErrNotFound) && ctx.Err() == nil {
			f.s.log.Warn("a2a: forget follow mark", "message", id, "err", err)
		}
	}
}

// adopt follows every message the store marks as followed and this
// instance does not follow: the open tasks of a hub that stopped (Run
// calls it when the adapter starts). It reads
// the marks a page at a time and returns how many it adopted.
func (f *followers) adopt(ctx context.Context) (int, error) {
	n, after := 0, ""
	for {
		recs, err := f.s.opt.Records.ListRecordsAfter(ctx, KindFollow, "", after, adoptPage)
		if err != nil {
			return n, fmt.Errorf("a2a: list follow marks: %w", err)
		}
		for _, rec := range recs {
			var m followMark
			if err := json.Unmarshal(rec.Data, &m); err != nil || m.Task == "" {
				f.s.log.Warn("a2a: unreadable follow mark dropped", "message", rec.ID, "err", err)
				f.forget(ctx, []string{rec.ID})
				continue
			}
			// The first checks of many adopted tasks are spread at
			// followMaxChecks a second; events still check a task at once.
			f.followFrom(m.Agent, m.Task, rec.ID, m.Until, followFirstGap+time.Duration(n)*time.Second/followMaxChecks)
			n++
		}
		if len(recs) < adoptPage {
			break
		}
		after = recs[len(recs)-1].ID
	}
	if n > 0 {
		f.s.log.Info("a2a: following tasks left open", "messages", n)
	}
	return n, nil
}

// follow starts following message msgID of the agent's task, until until.
func (f *followers) follow(agent, taskID, msgID string, until time.Time) {
	f.followFrom(agent, taskID, msgID, until, followFirstGap)
}

// followFrom is follow with the first check after first.
func (f *followers) followFrom(agent, taskID, msgID string, until time.Time, first time.Duration) {
	now := f.s.relay.Clock().Now()
	e := &followed{agent: agent, task: taskID, until: until,
		next: now.Add(first), gap: followFirstGap}
	f.mu.Lock()
	if _, dup := f.byMsg[msgID]; dup {
		f.mu.Unlock()
		return
	}
	f.byMsg[msgID] = e
	heap.Push(&f.queue, check{e.next, msgID, e})
	f.mu.Unlock()
	// Outside f.mu: the relay calls notified with its own lock held.
	stop := f.s.relay.OnMessageEvent(msgID, f.notified)
	f.mu.Lock()
	ended := f.byMsg[msgID] != e
	if !ended {
		e.stop = stop
	}
	f.mu.Unlock()
	if ended {
		stop()
		return
	}
	f.notified(msgID) // it may have moved already
}

// notified marks message id for the next pass. The relay calls it with its
// lock held, so it only takes f.mu and never blocks.
func (f *followers) notified(id string) {
	f.mu.Lock()
	f.due[id] = struct{}{}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *followers) run(ctx context.Context) {
	tick := time.NewTicker(followFirstGap / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			var stops []func()
			f.mu.Lock()
			for id, e := range f.byMsg {
				if e.stop != nil {
					stops = append(stops, e.stop)
				}
				delete(f.byMsg, id)
			}
			f.queue = nil
			f.mu.Unlock()
			for _, stop := range stops { // outside f.mu: stop takes the relay's lock
				stop()
			}
			return
		case <-f.wake:
		case <-tick.C:
		}
		f.pass(ctx)
	}
}

// pass checks the messages notified since the last pass and those whose
// next check is due, reconciling each one's task once.
func (f *followers) pass(ctx context.Context) {
	now := f.s.relay.Clock().Now()
	var todo []check
	f.mu.Lock()
	for id := range f.due {
		if e := f.byMsg[id]; e != nil {
			todo = append(todo, check{e.next, id, e})
		}
	}
	clear(f.due)
	for len(f.queue) > 0 && !f.queue[0].at.After(now) {
		c := heap.Pop(&f.queue).(check)
		if f.byMsg[c.id] == c.e && c.e.next.Equal(c.at) { // else ended or requeued
			todo = append(todo, c)
		}
	}
	f.mu.Unlock()
	seen := map[string]bool{} // tasks reconciled in this pass
	var ended []string
	for _, c := range todo {
		if ctx.Err() != nil {
			// The hub is stopping: a check that could not read the store
			// now says nothing about the task. Its mark stays, and the
			// next hub on the store follows it (adopt).
			return
		}
		done := now.After(c.e.until)
		if !seen[c.e.task] { // once more at the end, too: the hub may have been down
			seen[c.e.task] = true
			r, err := f.s.reconcileErr(ctx, c.e.agent, c.e.task)
			switch {
			case err == nil:
				done = done || settled(r)
			case errors.Is(err, ErrTaskNotFound):
				done = true // nothing left to follow
			case ctx.Err() != nil:
				return // stopping, as above
			default:
				// The store failed this once: check again later.
				f.s.log.Warn("a2a: check followed task", "task", c.e.task, "err", err)
			}
		}
		var stop func()
		f.mu.Lock()
		if f.byMsg[c.id] != c.e {
			f.mu.Unlock()
			continue // ended by an earlier check of this pass
		}
		if done {
			delete(f.byMsg, c.id)
			stop = c.e.stop
			ended = append(ended, c.id)
		} else if !c.e.next.After(now) {
			// Past followMaxChecks tasks, the gaps stretch so that the
			// checks stay within that many a second.
			maxGap := max(followMaxGap, time.Duration(len(f.byMsg))*time.Second/followMaxChecks)
			c.e.gap = min(2*c.e.gap, maxGap)
			c.e.next = now.Add(c.e.gap)
			heap.Push(&f.queue, check{c.e.next, c.id, c.e})
		}
		f.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
	if len(ended) > 0 {
		// A write each: not in the way of the next pass.
		f.s.background(ctx, func(ctx context.Context) { f.forget(ctx, ended) })
	}
}
