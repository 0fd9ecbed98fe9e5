package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Finished tasks are kept for the relay's Retention (the hub's
// --retention, as receipts are), and at least retireMin, the life of their
// last push notifications; then the task, its push configs and their push
// agents are deleted. When a task reaches a terminal state a KindRetire
// record is written whose id begins with that time, so the ones due are
// the first in id order (RecordStore.ListRecordsAfter) and the sweep reads
// only those.

// KindRetire marks a finished task for deletion (ID: the time it finished,
// then "/" and the task id).
const KindRetire = "a2a_retire"

// retireMin is the least a finished task is kept: its last pushes are
// retried for pushTTL through a push agent with a lease of twice that.
const retireMin = 2 * pushTTL

// retireLayout keeps ids in time order (fixed width, UTC).
const retireLayout = "20060102T150405.000000000Z"

// retirePage is how many marks a sweep reads at a time.
const retirePage = 500

// retireOnFinish marks a task that reached a terminal state.
func (s *Server) retireOnFinish(ctx context.Context, old, cur *TaskRecord) {
	if cur.Task.Status.State.Terminal() && !old.Task.Status.State.Terminal() {
		id := s.relay.Clock().Now().UTC().Format(retireLayout) + "/" + string(cur.Task.ID)
		if _, err := s.opt.Records.PutRecord(ctx, core.Record{Kind: KindRetire, ID: id, Data: []byte("{}"),
			UpdatedAt: s.relay.Clock().Now()}); err != nil && !errors.Is(err, core.ErrConflict) {
			s.log.Warn("a2a: mark finished task", "task", cur.Task.ID, "err", err)
		}
	}
}

// retireKeep is how long finished tasks are kept.
func (s *Server) retireKeep() time.Duration {
	return max(s.relay.Config().Retention, retireMin)
}

// retire deletes the tasks that finished before cutoff, with their push
// configs and push agents, and returns how many it deleted. A task that
// cannot be deleted is logged and kept for the next sweep.
func (s *Server) retire(ctx context.Context, cutoff time.Time) (int, error) {
	st := s.opt.Records
	n, after := 0, ""
	for {
		recs, err := st.ListRecordsAfter(ctx, KindRetire, "", after, retirePage)
		if err != nil {
			return n, fmt.Errorf("a2a: list finished tasks: %w", err)
		}
		for _, rec := range recs {
			after = rec.ID
			at, task, ok := strings.Cut(rec.ID, "/")
			t, err := time.Parse(retireLayout, at)
			if ok && err == nil && t.After(cutoff) {
				return n, nil // the rest finished later
			}
			if ok && err == nil {
				if err := s.deleteTask(ctx, task); err != nil {
					if ctx.Err() != nil {
						return n, ctx.Err()
					}
					s.log.Warn("a2a: delete finished task", "task", task, "err", err)
					continue
				}
				n++
			}
			if err := st.DeleteRecord(ctx, KindRetire, rec.ID); err != nil && !errors.Is(err, core.ErrNotFound) {
				s.log.Warn("a2a: delete finished-task mark", "mark", rec.ID, "err", err)
			}
		}
		if len(recs) < retirePage {
			return n, nil
		}
	}
}

// deleteTask deletes a task, its push configs and their push agents, and
// its reply path.
func (s *Server) deleteTask(ctx context.Context, task string) error {
	st := s.opt.Records
	cs, err := st.ListRecords(ctx, KindPush, task, 0)
	if err != nil {
		return fmt.Errorf("a2a: list push configs of %s: %w", task, err)
	}
	for _, rec := range cs {
		var p pushRecord
		if json.Unmarshal(rec.Data, &p) == nil && p.Config != nil {
			if err := s.relay.DeregisterAs(ctx, s.hub, s.pushAgentID(p)); err != nil && !errors.Is(err, core.ErrNotFound) {
				return fmt.Errorf("a2a: remove push agent of %s: %w", task, err)
			}
		}
		if err := st.DeleteRecord(ctx, KindPush, rec.ID); err != nil && !errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("a2a: delete push config of %s: %w", task, err)
		}
	}
	if rec, err := st.GetRecord(ctx, KindTask, task); err == nil {
		if r, err := decodeTask(rec); err == nil && r.ReplyTo != "" {
			if err := s.relay.DeregisterAs(ctx, s.hub, r.ReplyTo); err != nil && !errors.Is(err, core.ErrNotFound) {
				return fmt.Errorf("a2a: remove reply path of %s: %w", task, err)
			}
		}
	}
	if err := st.DeleteRecord(ctx, KindTask, task); err != nil && !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("a2a: delete task %s: %w", task, err)
	}
	return nil
}

// retireEvery is how often finished tasks past their keep are deleted.
const retireEvery = time.Minute

// retireLoop deletes finished tasks past their keep until ctx ends.
func (s *Server) retireLoop(ctx context.Context) {
	t := time.NewTicker(retireEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := s.retire(ctx, s.relay.Clock().Now().Add(-s.retireKeep())); err != nil && ctx.Err() == nil {
				s.log.Warn("a2a: delete finished tasks", "deleted", n, "err", err)
			}
		}
	}
}
