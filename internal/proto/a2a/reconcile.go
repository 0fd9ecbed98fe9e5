package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/payload"
)

// reconcile applies the receipts and results of a task's relayed messages
// that it has not seen yet. It returns the task (nil if it cannot be read).
func (s *Server) reconcile(ctx context.Context, agent, id string) *TaskRecord {
	r, _ := s.reconcileErr(ctx, agent, id)
	return r
}

// reconcileErr is reconcile that says why it could not read the task:
// ErrTaskNotFound (wrapped) when there is none, or the store's error.
func (s *Server) reconcileErr(ctx context.Context, agent, id string) (*TaskRecord, error) {
	r, err := s.tasks.get(ctx, agent, id)
	if err != nil {
		return nil, err
	}
	receipts := map[string]*core.Receipt{}
	results := map[string][]*core.Message{}
	pending := false
	for _, l := range r.Links {
		if !l.ReceiptDone {
			if rc, err := s.relay.ReceiptFor(ctx, s.hub, l.MessageID); err == nil && rc.Status.Terminal() {
				receipts[l.MessageID], pending = rc, true
			}
		}
		if ms, err := s.relay.ResultsFor(ctx, s.hub, l.MessageID, 0, 100); err == nil && len(ms) > l.Results {
			results[l.MessageID], pending = ms, true
		}
	}
	if !pending {
		return r, nil
	}
	out, err := s.tasks.update(ctx, agent, id, func(r *TaskRecord) error {
		changed := false
		now := s.relay.Clock().Now()
		for i := range r.Links {
			l := &r.Links[i]
			if rc := receipts[l.MessageID]; rc != nil && !l.ReceiptDone {
				l.ReceiptDone, changed = true, true
				applyReceipt(r, rc, now)
			}
			if ms := results[l.MessageID]; len(ms) > l.Results {
				for _, m := range ms[l.Results:] {
					applyResult(r, m, now)
				}
				l.Results, changed = len(ms), true
			}
		}
		if !changed {
			return errNoChange
		}
		return nil
	})
	if err != nil {
		s.log.Warn("a2a: update task", "task", id, "err", err)
		return r, nil
	}
	return out, nil
}

// try moves the task if the state machine allows it; a task that was
// canceled meanwhile keeps its state.
func try(r *TaskRecord, st sdk.TaskState, msg *sdk.Message, now time.Time) {
	if err := r.SetState(st, msg, now); err == nil && msg != nil && !hasMessage(r.Task.History, msg.ID) {
		r.Task.History = append(r.Task.History, msg)
	}
}

func hasMessage(h []*sdk.Message, id string) bool {
	for _, m := range h {
		if m.ID == id {
			return true
		}
	}
	return false
}

func agentMessage(id string, parts ...*sdk.Part) *sdk.Message {
	return &sdk.Message{ID: id, Role: sdk.MessageRoleAgent, Parts: parts}
}

// applyReceipt applies a relayed message's terminal receipt.
func applyReceipt(r *TaskRecord, rc *core.Receipt, now time.Time) {
	if r.Task.Status.State.Terminal() {
		return
	}
	switch rc.Status {
	case core.StatusDelivered:
		applyReply(r, rc.MessageID, rc.Reply, now)
	case core.StatusRejected:
		why := rc.LastError
		if why == "" {
			why = fmt.Sprintf("code %d", rc.Code)
		}
		try(r, sdk.TaskStateRejected, agentMessage("rejected-"+rc.MessageID, sdk.NewTextPart("the agent refused the message: "+why)), now)
	default: // timeout, expired
		try(r, sdk.TaskStateFailed, agentMessage("failed-"+rc.MessageID,
			sdk.NewTextPart(fmt.Sprintf("the message was not delivered (%s)", rc.Status))), now)
	}
}

// Reply is the acknowledgement shape the adapter understands in a
// delivered receipt's Reply (see the package documentation).
type Reply struct {
	Status  string          `json:"status"`
	Result  json.RawMessage `json:"result,omitempty"`
	Task    *sdk.Task       `json:"task,omitempty"`
	Message *sdk.Message    `json:"message,omitempty"`
	Detail  string          `json:"detail,omitempty"`
	Error   string          `json:"error,omitempty"`
}

func applyReply(r *TaskRecord, msgID string, raw json.RawMessage, now time.Time) {
	var rep Reply
	if len(raw) == 0 || json.Unmarshal(raw, &rep) != nil {
		try(r, sdk.TaskStateWorking, nil, now)
		return
	}
	switch {
	case rep.Task != nil: // a remote A2A agent's task (deliver/a2aremote)
		for _, a := range rep.Task.Artifacts {
			r.AddArtifact(a)
		}
		st := rep.Task.Status.State
		if _, ok := stateNames[st]; !ok || st == sdk.TaskStateUnspecified || st == sdk.TaskStateSubmitted {
			st = sdk.TaskStateWorking
		}
		var m *sdk.Message
		if rep.Task.Status.Message != nil {
			c := *rep.Task.Status.Message
			c.Role = sdk.MessageRoleAgent
			m = &c
		}
		try(r, st, m, now)
		return
	case rep.Message != nil: // a remote A2A agent's direct answer
		m := *rep.Message
		m.Role = sdk.MessageRoleAgent
		if m.ID == "" {
			m.ID = "reply-" + msgID
		}
		r.AddArtifact(&sdk.Artifact{ID: sdk.ArtifactID("result-" + msgID), Name: "result", Parts: m.Parts})
		try(r, sdk.TaskStateCompleted, &m, now)
		return
	}
	hasResult := len(rep.Result) > 0 && string(rep.Result) != "null"
	st, ok := ParseState(rep.Status)
	if !ok {
		switch strings.ToLower(rep.Status) {
		case "rejected", "refused":
			st = sdk.TaskStateRejected
		case "error", "failed", "failure":
			st = sdk.TaskStateFailed
		default: // accepted, ok, delivered, … or no status at all
			st = sdk.TaskStateWorking
			if hasResult {
				st = sdk.TaskStateCompleted
			}
		}
	}
	var parts []*sdk.Part
	if hasResult {
		if cps, err := payload.ToParts(rep.Result); err == nil {
			parts = PartsFromCore(cps)
		}
	}
	if len(parts) == 0 {
		if t := firstNonEmpty(rep.Detail, rep.Error); t != "" && st != sdk.TaskStateWorking {
			parts = []*sdk.Part{sdk.NewTextPart(t)}
		}
	}
	settle(r, st, "reply-"+msgID, parts, now)
}

// settle moves the task to st with the agent's parts: a completed or
// working task gets them as an artifact, any state gets them as its status
// message.
func settle(r *TaskRecord, st sdk.TaskState, id string, parts []*sdk.Part, now time.Time) {
	if len(parts) > 0 && (st == sdk.TaskStateCompleted || st == sdk.TaskStateWorking) {
		r.AddArtifact(&sdk.Artifact{ID: sdk.ArtifactID(id), Name: "result", Parts: parts})
	}
	var m *sdk.Message
	if len(parts) > 0 {
		m = agentMessage(id, parts...)
	}
	try(r, st, m, now)
}

// applyResult applies a result message (a relay message whose
// CorrelationID is the task's relayed message).
func applyResult(r *TaskRecord, m *core.Message, now time.Time) {
	if r.Task.Status.State.Terminal() {
		return
	}
	st := sdk.TaskStateCompleted
	if s, ok := m.Metadata[MetaState].(string); ok {
		if x, ok := ParseState(s); ok {
			st = x
		}
	} else if strings.EqualFold(m.Type, "error") {
		st = sdk.TaskStateFailed
	}
	settle(r, st, m.ID, PartsFromCore(m.Parts), now)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
