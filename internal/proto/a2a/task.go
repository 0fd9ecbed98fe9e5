package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Record kinds in the store.
const (
	// KindTask holds a task (Index: its agent's id).
	KindTask = "a2a_task"
	// KindPush holds a push notification config (ID: task id/config id,
	// Index: task id).
	KindPush = "a2a_push"
	// KindFollow marks a relayed message of an open task, which the hub
	// follows to move the task along (ID: the message id; data: the
	// agent, the task and until when).
	KindFollow = "a2a_follow"
)

// transitions lists the states each non-terminal state may move to.
// Terminal states (completed, failed, canceled, rejected) move nowhere.
var transitions = map[sdk.TaskState][]sdk.TaskState{
	sdk.TaskStateSubmitted: {sdk.TaskStateWorking, sdk.TaskStateInputRequired, sdk.TaskStateAuthRequired,
		sdk.TaskStateCompleted, sdk.TaskStateFailed, sdk.TaskStateCanceled, sdk.TaskStateRejected},
	sdk.TaskStateWorking: {sdk.TaskStateInputRequired, sdk.TaskStateAuthRequired,
		sdk.TaskStateCompleted, sdk.TaskStateFailed, sdk.TaskStateCanceled, sdk.TaskStateRejected},
	sdk.TaskStateInputRequired: {sdk.TaskStateSubmitted, sdk.TaskStateWorking, sdk.TaskStateCompleted,
		sdk.TaskStateFailed, sdk.TaskStateCanceled, sdk.TaskStateRejected},
	sdk.TaskStateAuthRequired: {sdk.TaskStateSubmitted, sdk.TaskStateWorking, sdk.TaskStateCompleted,
		sdk.TaskStateFailed, sdk.TaskStateCanceled, sdk.TaskStateRejected},
}

// CanTransition reports whether a task may move from one state to another.
// Staying in the same non-terminal state is allowed (a status update).
func CanTransition(from, to sdk.TaskState) bool {
	if from == to {
		return !from.Terminal()
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Interrupted reports whether a task in state s waits for its client.
func Interrupted(s sdk.TaskState) bool {
	return s == sdk.TaskStateInputRequired || s == sdk.TaskStateAuthRequired
}

// link ties a relayed message to the task it carries.
type link struct {
	MessageID string `json:"message_id"`
	// ReceiptDone is set once the message's terminal receipt is applied.
	ReceiptDone bool `json:"receipt_done,omitempty"`
	// Results counts the result messages already applied.
	Results int `json:"results,omitempty"`
}

// Transition is one entry of a task's state history.
type Transition struct {
	State sdk.TaskState `json:"state"`
	At    time.Time     `json:"at"`
}

// TaskRecord is a task as the store keeps it.
type TaskRecord struct {
	Task  *sdk.Task `json:"task"`
	Agent string    `json:"agent"`
	// Owner is the agent whose credential created the task (empty when
	// the operator or a dev-mode caller did): only it (and the operator)
	// may see the task.
	Owner string `json:"owner,omitempty"`
	// ReplyTo is the hidden helper that sent the task's messages for a
	// caller without an agent of its own (Owner empty), where the agent's
	// answers go.
	ReplyTo     string       `json:"reply_to,omitempty"`
	Links       []link       `json:"links,omitempty"`
	Transitions []Transition `json:"transitions"`
	// Protocol is the version of the request that created the task (push
	// payloads of 0.3 configs use it).
	Protocol Version `json:"protocol"`
	version  int64
}

// SetState moves the task to state with an optional status message,
// refusing illegal transitions.
func (r *TaskRecord) SetState(state sdk.TaskState, msg *sdk.Message, now time.Time) error {
	from := r.Task.Status.State
	if !CanTransition(from, state) {
		return fmt.Errorf("%s → %s: %w", from, state, ErrIllegalTransition)
	}
	if msg != nil {
		msg.TaskID, msg.ContextID = r.Task.ID, r.Task.ContextID
	}
	t := now
	r.Task.Status = sdk.TaskStatus{State: state, Message: msg, Timestamp: &t}
	if from != state {
		r.Transitions = append(r.Transitions, Transition{State: state, At: now})
	}
	return nil
}

// AddArtifact appends an artifact unless one with its id exists.
func (r *TaskRecord) AddArtifact(a *sdk.Artifact) bool {
	for _, x := range r.Task.Artifacts {
		if x.ID == a.ID {
			return false
		}
	}
	r.Task.Artifacts = append(r.Task.Artifacts, a)
	return true
}

// tasks persists task records and tells waiters when one changes.
type tasks struct {
	store core.RecordStore
	clock core.Clock

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	// onChange is called after every saved change with the old and new
	// snapshots (push notifications).
	onChange func(old, cur *TaskRecord)
	// announce tells the other hub instances sharing the store of every
	// saved write (core.Relay.AnnounceRecord); nil announces nothing.
	announce func(core.RecordEvent)
}

func newTasks(store core.RecordStore, clock core.Clock) *tasks {
	return &tasks{store: store, clock: clock, waiters: map[string]map[chan struct{}]struct{}{}}
}

func (ts *tasks) create(ctx context.Context, r *TaskRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	rec, err := ts.store.PutRecord(ctx, core.Record{Kind: KindTask, ID: string(r.Task.ID), Index: r.Agent,
		Data: b, UpdatedAt: ts.clock.Now()})
	if err != nil {
		return fmt.Errorf("store task: %w", err)
	}
	r.version = rec.Version
	ts.saved(string(r.Task.ID), r.Agent, rec.Version)
	return nil
}

// get loads a task; a task of another agent is not found.
func (ts *tasks) get(ctx context.Context, agent, id string) (*TaskRecord, error) {
	if id == "" {
		return nil, fmt.Errorf("task id is empty: %w", ErrTaskNotFound)
	}
	rec, err := ts.store.GetRecord(ctx, KindTask, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, fmt.Errorf("task %q: %w", id, ErrTaskNotFound)
	}
	if err != nil {
		return nil, err
	}
	r, err := decodeTask(rec)
	if err != nil {
		return nil, err
	}
	if agent != "" && r.Agent != agent {
		return nil, fmt.Errorf("task %q: %w", id, ErrTaskNotFound)
	}
	return r, nil
}

func decodeTask(rec core.Record) (*TaskRecord, error) {
	var r TaskRecord
	if err := json.Unmarshal(rec.Data, &r); err != nil || r.Task == nil {
		return nil, fmt.Errorf("stored task %q is corrupt: %v", rec.ID, err)
	}
	r.version = rec.Version
	return &r, nil
}

// errNoChange tells update that the mutation changed nothing.
var errNoChange = errors.New("no change")

// update applies f to the current record and saves it with optimistic
// concurrency, retrying on conflicts. f returns errNoChange to skip the
// write. It returns the saved record.
func (ts *tasks) update(ctx context.Context, agent, id string, f func(r *TaskRecord) error) (*TaskRecord, error) {
	for attempt := 0; ; attempt++ {
		r, err := ts.get(ctx, agent, id)
		if err != nil {
			return nil, err
		}
		old, _ := cloneRecord(r)
		if err := f(r); err != nil {
			if errors.Is(err, errNoChange) {
				return r, nil
			}
			return nil, err
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		rec, err := ts.store.PutRecord(ctx, core.Record{Kind: KindTask, ID: id, Index: r.Agent, Data: b,
			Version: r.version, UpdatedAt: ts.clock.Now()})
		if errors.Is(err, core.ErrConflict) && attempt < 20 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store task: %w", err)
		}
		r.version = rec.Version
		ts.saved(id, r.Agent, rec.Version)
		if ts.onChange != nil && old != nil {
			ts.onChange(old, r)
		}
		return r, nil
	}
}

func cloneRecord(r *TaskRecord) (*TaskRecord, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var out TaskRecord
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	out.version = r.version
	return &out, nil
}

// list lists up to limit of an agent's tasks, most recently updated first.
func (ts *tasks) list(ctx context.Context, agent string, limit int) ([]*TaskRecord, error) {
	recs, err := ts.store.ListRecords(ctx, KindTask, agent, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*TaskRecord, 0, len(recs))
	for _, rec := range recs {
		r, err := decodeTask(rec)
		if err != nil || r.Agent != agent {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// created is when the task was created (its first transition).
func (r *TaskRecord) created() time.Time {
	if len(r.Transitions) > 0 {
		return r.Transitions[0].At
	}
	return time.Time{}
}

// watch returns a channel signalled when task id changes: written on this
// instance, or announced as written by another one (heard).
func (ts *tasks) watch(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	ts.mu.Lock()
	if ts.waiters[id] == nil {
		ts.waiters[id] = map[chan struct{}]struct{}{}
	}
	ts.waiters[id][ch] = struct{}{}
	ts.mu.Unlock()
	return ch, func() {
		ts.mu.Lock()
		delete(ts.waiters[id], ch)
		if len(ts.waiters[id]) == 0 {
			delete(ts.waiters, id)
		}
		ts.mu.Unlock()
	}
}

// saved tells the watchers on this instance of task id, of the agent's,
// that a write of it (storing version) just committed, and announces the
// write to the other instances.
func (ts *tasks) saved(id, agent string, version int64) {
	if ts.announce != nil {
		ts.announce(core.RecordEvent{Kind: KindTask, ID: id, Index: agent, Version: version})
	}
	ts.notify(id)
}

// heard is the relay's callback for another instance's write of a task
// (core.Relay.OnRecordEvent): it wakes this instance's watchers of the
// task, if any, which re-read it through their own principal's checks.
// A task nothing here watches costs nothing; heard reads no store, so it
// returns at once, as the relay asks.
func (ts *tasks) heard(ev core.RecordEvent) {
	if ev.Kind == KindTask {
		ts.notify(ev.ID)
	}
}

func (ts *tasks) notify(id string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for ch := range ts.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// view returns a copy of the task trimmed for a reader: at most
// historyLength messages of history (nil: all) and no artifacts unless
// withArtifacts.
func view(r *TaskRecord, historyLength *int, withArtifacts bool) *sdk.Task {
	t := *r.Task
	if historyLength != nil {
		n := *historyLength
		if n <= 0 {
			t.History = nil
		} else if len(t.History) > n {
			t.History = t.History[len(t.History)-n:]
		}
	}
	if !withArtifacts {
		t.Artifacts = nil
	}
	return &t
}
