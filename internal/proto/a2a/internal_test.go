package a2a

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// BenchmarkFollowerIdlePass is a pass of the task follower over 100,000
// followed messages none of which is due: it takes the due checks off its
// queue instead of walking them all (9 ms a pass when it walked them,
// four passes a second).
func BenchmarkFollowerIdlePass(b *testing.B) {
	s := &Server{relay: core.NewRelay(nil, nil, core.Config{}, nil)}
	f := newFollowers(s)
	now := s.relay.Clock().Now()
	for i := range 100_000 {
		id := fmt.Sprint("m", i)
		e := &followed{agent: "a", task: id, until: now.Add(time.Hour), next: now.Add(time.Minute), gap: time.Minute}
		f.byMsg[id] = e
		heap.Push(&f.queue, check{e.next, id, e})
	}
	b.ResetTimer()
	for b.Loop() {
		f.pass(context.Background())
	}
}

// TestAdoptReadsEveryMark: a hub that starts adopts every follow mark in
// the store, past one page of them.
func TestAdoptReadsEveryMark(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openStore(t)
	relay := core.NewRelay(st, nil, core.Config{}, nil)
	s := New(relay, Options{Records: st})
	const n = adoptPage + 1
	until := relay.Clock().Now().Add(time.Hour)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("msg-%05d", i)
			if err := s.followers.remember(ctx, "agent", "task-"+id, id, until); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// (Followed, the marks' tasks, which do not exist, are soon dropped.)
	if got, err := s.followers.adopt(ctx); err != nil || got != n {
		t.Fatalf("adopted %d of %d marks (%v)", got, n, err)
	}
}

// TestRetireFinishedTasks: a task that finished is deleted, with its push
// configs and push agents, once it is older than the cutoff; an open task
// and one that finished later are kept.
func TestRetireFinishedTasks(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	relay := core.NewRelay(st, nil, core.Config{Retention: time.Second}, nil)
	relay.SetDeliverer(EndpointPush, nopDeliverer{})
	s := New(relay, Options{Records: st})
	if keep := s.retireKeep(); keep != retireMin {
		t.Fatalf("finished tasks kept %v with a retention of 1s, want at least %v", keep, retireMin)
	}
	now := relay.Clock().Now()
	mk := func(id string) {
		r := &TaskRecord{Task: &sdk.Task{ID: sdk.TaskID(id), ContextID: "ctx", Status: sdk.TaskStatus{State: sdk.TaskStateSubmitted}}, Agent: "a"}
		if err := s.tasks.create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	finish := func(id string) {
		if _, err := s.tasks.update(ctx, "a", id, func(r *TaskRecord) error { return r.SetState(sdk.TaskStateCompleted, nil, now) }); err != nil {
			t.Fatal(err)
		}
	}
	mk("done")
	mk("open")
	c, err := s.savePush(ctx, V10, &sdk.PushConfig{TaskID: "done", URL: "http://127.0.0.1:9/hook"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := s.pushAgent(ctx, pushRecord{Config: c, Protocol: V10})
	if err != nil {
		t.Fatal(err)
	}
	finish("done")
	// A change after the end marks nothing more.
	if _, err := s.tasks.update(ctx, "a", "done", func(r *TaskRecord) error {
		r.AddArtifact(&sdk.Artifact{ID: "late", Parts: []*sdk.Part{sdk.NewTextPart("x")}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	marks, err := st.ListRecordsAfter(ctx, KindRetire, "", "", 0)
	if err != nil || len(marks) != 1 {
		t.Fatalf("%d marks (%v), want 1", len(marks), err)
	}

	if n, err := s.retire(ctx, now.Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("retire before the task finished: %d, %v", n, err)
	}
	if _, err := st.GetRecord(ctx, KindTask, "done"); err != nil {
		t.Fatalf("a task finished after the cutoff was deleted: %v", err)
	}
	if n, err := s.retire(ctx, now.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("retire after the task finished: %d, %v", n, err)
	}
	for what, err := range map[string]error{
		"task":        second(st.GetRecord(ctx, KindTask, "done")),
		"push config": second(st.GetRecord(ctx, KindPush, pushKey("done", c.ID))),
		"push agent":  second(st.GetAgent(ctx, agent)),
		"mark":        second(st.GetRecord(ctx, KindRetire, marks[0].ID)),
	} {
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("the finished task's %s is still there: %v", what, err)
		}
	}
	if _, err := st.GetRecord(ctx, KindTask, "open"); err != nil {
		t.Fatalf("the open task was deleted: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

// nopDeliverer delivers nothing (the push agents of these tests are only
// registered and removed).
type nopDeliverer struct{}

func (nopDeliverer) Deliver(context.Context, *core.Agent, *core.Message) core.Delivery {
	return core.Delivery{Kind: core.OutcomeRetry}
}

// stuckStore fails to delete one task.
type stuckStore struct {
	core.Store
	task string
}

func (s stuckStore) DeleteRecord(ctx context.Context, kind, id string) error {
	if kind == KindTask && id == s.task {
		return errors.New("disk trouble")
	}
	return s.Store.DeleteRecord(ctx, kind, id)
}

// TestRetirePassesOverAStuckTask: a finished task that cannot be deleted
// is kept, with its mark, for the next sweep, and the others are deleted.
func TestRetirePassesOverAStuckTask(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	stuck := stuckStore{Store: st, task: "a-stuck"}
	relay := core.NewRelay(stuck, nil, core.Config{}, nil)
	s := New(relay, Options{Records: stuck})
	now := relay.Clock().Now()
	for _, id := range []string{"a-stuck", "b-done"} {
		if err := s.tasks.create(ctx, &TaskRecord{Task: &sdk.Task{ID: sdk.TaskID(id), ContextID: "ctx", Status: sdk.TaskStatus{State: sdk.TaskStateSubmitted}}, Agent: "a"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.tasks.update(ctx, "a", id, func(r *TaskRecord) error { return r.SetState(sdk.TaskStateCompleted, nil, now) }); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.retire(ctx, now.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("retire: %d, %v; want 1 deleted", n, err)
	}
	if _, err := st.GetRecord(ctx, KindTask, "b-done"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("the task after the stuck one was not deleted: %v", err)
	}
	if marks, err := st.ListRecordsAfter(ctx, KindRetire, "", "", 0); err != nil || len(marks) != 1 || !strings.HasSuffix(marks[0].ID, "/a-stuck") {
		t.Fatalf("marks left %v (%v), want the stuck task's", marks, err)
	}
}

// openStore opens an embedded store (no fsync) for the test.
func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
