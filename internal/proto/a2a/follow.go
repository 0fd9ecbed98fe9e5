package a2a

import (
	"context"
	"sync"
	"time"
)

// followers move tasks along as their relayed messages are delivered and
// answered, so that tasks progress (and push notifications go out) with no
// client waiting. One goroutine follows every task of the instance: it
// reconciles a task when the relay reports an event of one of its messages
// (core.Relay.OnMessageEvent), and otherwise checks it now and then —
// after 1 s, then twice as long each time up to followMaxGap, or longer
// when so many tasks are open that their checks would pass
// followMaxChecks a second — which catches results another hub instance
// accepted (those are not notified across instances). A goroutine per task, blocked in WaitReceipt and
// WaitResult until the message's TTL plus Options.ResultWait, cost about
// 20 KiB and four store reads a second for each task a receiver had not
// answered.
type followers struct {
	s    *Server
	once sync.Once
	wake chan struct{} // something in due

	mu    sync.Mutex
	byMsg map[string]*followed // message id → what follows it
	due   map[string]struct{}  // message ids notified since the last pass
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

func newFollowers(s *Server) *followers {
	return &followers{s: s, wake: make(chan struct{}, 1), byMsg: map[string]*followed{}, due: map[string]struct{}{}}
}

// follow starts following message msgID of the agent's task, for at most
// ttl plus ResultWait.
func (f *followers) follow(agent, taskID, msgID string, ttl time.Duration) {
	f.once.Do(func() { go f.run(f.s.opt.Context) })
	now := f.s.relay.Clock().Now()
	e := &followed{agent: agent, task: taskID, until: now.Add(ttl + f.s.opt.ResultWait),
		next: now.Add(followFirstGap), gap: followFirstGap}
	f.mu.Lock()
	if _, dup := f.byMsg[msgID]; dup {
		f.mu.Unlock()
		return
	}
	f.byMsg[msgID] = e
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
	type check struct {
		id string
		e  *followed
	}
	var todo []check
	f.mu.Lock()
	for id := range f.due {
		if e := f.byMsg[id]; e != nil {
			todo = append(todo, check{id, e})
		}
	}
	clear(f.due)
	for id, e := range f.byMsg {
		if !e.next.After(now) {
			todo = append(todo, check{id, e})
		}
	}
	f.mu.Unlock()
	seen := map[string]bool{} // tasks reconciled in this pass
	for _, c := range todo {
		done := now.After(c.e.until)
		if !done && !seen[c.e.task] {
			seen[c.e.task] = true
			r := f.s.reconcile(ctx, c.e.agent, c.e.task)
			done = r == nil || settled(r)
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
		} else if !c.e.next.After(now) {
			// Past followMaxChecks tasks, the gaps stretch so that the
			// checks stay within that many a second.
			maxGap := max(followMaxGap, time.Duration(len(f.byMsg))*time.Second/followMaxChecks)
			c.e.gap = min(2*c.e.gap, maxGap)
			c.e.next = now.Add(c.e.gap)
		}
		f.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
}
