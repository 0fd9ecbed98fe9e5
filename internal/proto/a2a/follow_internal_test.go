package a2a

import (
	"container/heap"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// taskReadFails is the embedded store whose task reads fail with what
// fail returns (nil: read as usual).
type taskReadFails struct {
	core.Store
	fail func() error
}

func (s *taskReadFails) GetRecord(ctx context.Context, kind, id string) (core.Record, error) {
	if kind == KindTask {
		if err := s.fail(); err != nil {
			return core.Record{}, err
		}
	}
	return s.Store.GetRecord(ctx, kind, id)
}

// TestFollowerKeepsTasksItCouldNotCheck: a check of a followed task that
// cannot read the task — because the hub is stopping (its context ends
// under the read) or the store failed once — is no reason to stop
// following it: the follow mark stays in the store for the next hub, and a
// running hub checks again later. Only a task that is gone ends its
// follow. (A hub stopped mid-check used to drop the task's mark, so the
// hub started after it never completed the task:
// TestTasksFollowedAcrossRestart failed now and then.)
func TestFollowerKeepsTasksItCouldNotCheck(t *testing.T) {
	tests := []struct {
		name         string
		fail         func(cancel context.CancelFunc) error
		wantFollowed bool // still followed by this instance after the check
		wantMark     bool // its mark still in the store
	}{
		{name: "hub stopping", fail: func(cancel context.CancelFunc) error { cancel(); return context.Canceled },
			wantFollowed: true, wantMark: true},
		{name: "store error", fail: func(context.CancelFunc) error { return errors.New("disk I/O error") },
			wantFollowed: true, wantMark: true},
		{name: "task gone", fail: func(context.CancelFunc) error { return nil },
			wantFollowed: false, wantMark: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := &taskReadFails{Store: openStore(t), fail: func() error { return tt.fail(cancel) }}
			relay := core.NewRelay(st, nil, core.Config{}, nil)
			s := New(relay, Options{Records: st})
			f := s.followers
			now := relay.Clock().Now()
			if err := f.remember(ctx, "agent", "task-1", "msg-1", now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			// Followed, with its check due now (as adopt or follow would
			// leave it, without starting the follower's goroutines).
			e := &followed{agent: "agent", task: "task-1", until: now.Add(time.Hour), next: now, gap: followFirstGap}
			f.byMsg["msg-1"] = e
			heap.Push(&f.queue, check{e.next, "msg-1", e})

			f.pass(ctx)

			f.mu.Lock()
			_, followedNow := f.byMsg["msg-1"]
			f.mu.Unlock()
			if followedNow != tt.wantFollowed {
				t.Errorf("followed after the check: %v, want %v", followedNow, tt.wantFollowed)
			}
			mark := func() bool {
				_, err := st.Store.GetRecord(context.Background(), KindFollow, "msg-1")
				return err == nil
			}
			if tt.wantMark {
				if !mark() {
					t.Error("the follow mark was dropped: a hub started after this one would never complete the task")
				}
			} else {
				waitfor.True(t, "the mark of a task that is gone to be forgotten", func() bool { return !mark() })
			}
		})
	}
}
