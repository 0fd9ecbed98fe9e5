package postgres

import (
	"context"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Lanes without counters. A lane row holds a (receiver, sender) pair's
// delivery state (due time, parked, claim); whether it has work is read
// from its messages (an index probe of messages_lane), never counted in
// the row. So an accept touches a lane row only to create it when a plain
// read finds none (an INSERT … ON CONFLICT on a row being updated would
// wait for the updater's commit), and accepts and deliveries never wait
// for each other's row locks: before, every
// accept added to its lane's pending count and held that row's lock
// through its commit, while deliveries subtracted from it, so accepts to
// one lane ran one at a time (69% of accept time was that wait).
//
// Empty lanes are kept while they empty and refill (deleting a lane each
// time it emptied made the next accept create it again, and concurrent
// accepts creating one lane wait for each other's commit), and deleted by
// PurgeBefore (once a minute) when they have no claim and nothing queued.
// An accept running at that moment may have found the lane there, so not
// created it, while its message was not yet visible to the delete:
// recheckLanes looks at each deleted lane again once such an accept has
// committed (recheckAfter later) and puts it back if it holds messages. A
// hub that dies in between leaves at worst a lane missing until the next
// PurgeBefore on any instance restores every lane with queued messages.

// recheckAfter is how long after deleting a lane it is checked again: far
// longer than an accept's statement takes.
const recheckAfter = 2 * time.Second

type recheck struct {
	lane core.Lane
	at   time.Time
}

// recheckLanes schedules deleted lanes for a second look.
func (s *Store) recheckLanes(ls []core.Lane) {
	if len(ls) == 0 {
		return
	}
	at := time.Now().Add(recheckAfter)
	s.mu.Lock()
	for _, l := range ls {
		s.rechecks = append(s.rechecks, recheck{lane: l, at: at})
	}
	s.mu.Unlock()
}

// restoreLanesSQL puts back those of the lanes ($1, $2) that hold queued
// messages.
const restoreLanesSQL = `INSERT INTO lanes (receiver, sender, pending, next_at)
	SELECT u.r, u.s, 0, now() FROM unnest($1::text[], $2::text[]) AS u(r, s)
	WHERE EXISTS (SELECT FROM messages m WHERE m.state = 0 AND m.receiver = u.r AND m.sender = u.s)
	ON CONFLICT (receiver, sender) DO NOTHING`

// recheckLoop runs the scheduled rechecks until the store closes.
func (s *Store) recheckLoop() {
	defer s.acceptWG.Done()
	t := time.NewTicker(recheckAfter / 4)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		now := time.Now()
		s.mu.Lock()
		var due []recheck
		keep := s.rechecks[:0]
		for _, r := range s.rechecks {
			if r.at.After(now) {
				keep = append(keep, r)
			} else {
				due = append(due, r)
			}
		}
		s.rechecks = keep
		s.mu.Unlock()
		if len(due) == 0 {
			continue
		}
		recvs, sends := make([]string, len(due)), make([]string, len(due))
		for i, r := range due {
			recvs[i], sends[i] = r.lane.Receiver, r.lane.Sender
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		tag, err := s.pool.Exec(ctx, restoreLanesSQL, recvs, sends)
		cancel()
		switch {
		case err != nil:
			s.log.Warn("postgres: recheck deleted lanes (they are restored by the next purge)", "err", err)
		case tag.RowsAffected() > 0:
			s.log.Debug("postgres: restored lanes deleted while a message was accepted", "lanes", tag.RowsAffected())
			s.signalDueAll()
		}
	}
}

// sweepLanes deletes lanes with no claim and nothing queued (scheduling
// their recheck), and restores a lane for every queued message without
// one. PurgeBefore runs it.
func (s *Store) sweepLanes(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `DELETE FROM lanes l WHERE claim_until < now() AND owner = ''
		AND NOT EXISTS (SELECT FROM messages m WHERE m.state = 0 AND m.receiver = l.receiver AND m.sender = l.sender)
		RETURNING receiver, sender`)
	if err != nil {
		return wrap("sweep lanes", err)
	}
	var dropped []core.Lane
	var l core.Lane
	for rows.Next() {
		if err := rows.Scan(&l.Receiver, &l.Sender); err != nil {
			rows.Close()
			return wrap("sweep lanes", err)
		}
		dropped = append(dropped, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return wrap("sweep lanes", err)
	}
	s.recheckLanes(dropped)
	tag, err := s.pool.Exec(ctx, `INSERT INTO lanes (receiver, sender, pending, next_at)
		SELECT DISTINCT receiver, sender, 0, now() FROM messages m WHERE state = 0
			AND NOT EXISTS (SELECT FROM lanes l WHERE l.receiver = m.receiver AND l.sender = m.sender)
		ON CONFLICT (receiver, sender) DO NOTHING`)
	if err != nil {
		return wrap("restore lanes", err)
	}
	if tag.RowsAffected() > 0 {
		s.log.Warn("postgres: restored lanes missing for queued messages", "lanes", tag.RowsAffected())
		s.signalDueAll()
	}
	return nil
}
