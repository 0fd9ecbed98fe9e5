package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// SendMessage implements a2asrv.RequestHandler. Unless the request sets
// returnImmediately it waits until the task is terminal or interrupted
// (input-required, auth-required), as the specification asks, but at most
// Options.BlockTimeout; then it answers with the task as it is.
func (h *handler) SendMessage(ctx context.Context, req *sdk.SendMessageRequest) (sdk.SendMessageResult, error) {
	s := h.s
	ag, err := s.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	rec, err := s.start(ctx, ag, req)
	if err != nil {
		return nil, err
	}
	cfg := req.Config
	if cfg == nil || !cfg.ReturnImmediately {
		wctx, cancel := context.WithTimeout(ctx, s.opt.BlockTimeout)
		rec = s.waitSettled(wctx, ag.ID, rec)
		cancel()
	}
	var hl *int
	if cfg != nil {
		hl = cfg.HistoryLength
	}
	return view(rec, hl, true), nil
}

// SendStreamingMessage implements a2asrv.RequestHandler: the stream starts
// with the task, then carries an artifact-update per new artifact and a
// status-update per status change, and ends after a terminal or
// interrupted state.
func (h *handler) SendStreamingMessage(ctx context.Context, req *sdk.SendMessageRequest) iter.Seq2[sdk.Event, error] {
	return h.s.streamTask(ctx, req.Tenant, func(ag *core.Agent) (*TaskRecord, error) { return h.s.start(ctx, ag, req) })
}

// SubscribeToTask implements a2asrv.RequestHandler: the stream of a task
// that is not terminal, as SendStreamingMessage's.
func (h *handler) SubscribeToTask(ctx context.Context, req *sdk.SubscribeToTaskRequest) iter.Seq2[sdk.Event, error] {
	s := h.s
	return s.streamTask(ctx, req.Tenant, func(ag *core.Agent) (*TaskRecord, error) {
		if _, err := s.visible(ctx, ag, string(req.ID)); err != nil {
			return nil, err
		}
		rec := s.reconcile(ctx, ag.ID, string(req.ID))
		if rec == nil {
			return nil, errNotFoundTask(req.ID)
		}
		if rec.Task.Status.State.Terminal() {
			return nil, sdk.NewError(sdk.ErrUnsupportedOperation, fmt.Sprintf("task %s is %s; there is nothing to subscribe to", rec.Task.ID, rec.Task.Status.State))
		}
		return rec, nil
	})
}

// streamTask is a stream (see stream) of the task that begin starts or
// finds for the agent a request is for (see agent). It holds one of the
// caller's streams (MaxStreamsPerCaller) while it runs, taken before begin
// so that a refused stream starts nothing.
func (s *Server) streamTask(ctx context.Context, tenant string, begin func(*core.Agent) (*TaskRecord, error)) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		ag, err := s.agent(ctx, tenant)
		if err != nil {
			yield(nil, err)
			return
		}
		caller := streamCaller(ctx)
		if !s.streams.acquire(caller) {
			yield(nil, sdk.NewError(sdk.ErrInternalError, fmt.Sprintf("this caller has %d A2A streams open, as many as it may; close one, or follow tasks with GetTask or push notifications", MaxStreamsPerCaller)))
			return
		}
		defer s.streams.release(caller)
		rec, err := begin(ag)
		if err != nil {
			yield(nil, err)
			return
		}
		s.stream(ctx, ag.ID, rec, yield)
	}
}

// stream yields the task, then its changes, until it settles or ctx ends.
func (s *Server) stream(ctx context.Context, agent string, rec *TaskRecord, yield func(sdk.Event, error) bool) {
	if !yield(view(rec, nil, true), nil) {
		return
	}
	id := string(rec.Task.ID)
	ch, stop := s.tasks.watch(id)
	defer stop()
	poll := s.taskPoll()
	defer poll.Stop()
	last := rec
	for !settled(last) {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-poll.C():
			poll.Fired()
		}
		cur := s.reconcile(ctx, agent, id)
		if cur == nil {
			return
		}
		for _, ev := range Diff(last.Task, cur.Task) {
			if !yield(ev, nil) {
				return
			}
		}
		last = cur
	}
}

// streamCaller names the caller of ctx for the bound on streams: its
// credential, or, without one (dev mode), the address it connects from.
func streamCaller(ctx context.Context) string {
	if k, ok := ctx.Value(callerKey{}).(string); ok && k != "" {
		return k
	}
	if k := core.PrincipalFrom(ctx).Key(); k != "" {
		return k
	}
	return "anonymous"
}

// checkMessage refuses a message that cannot start or continue a task.
func checkMessage(req *sdk.SendMessageRequest) error {
	m := req.Message
	switch {
	case m == nil:
		return invalid("message is required")
	case m.ID == "":
		return invalid("message.messageId is required")
	case m.Role != sdk.MessageRoleUser:
		return invalid("message.role must be the user's (ROLE_USER)")
	case len(m.Parts) == 0:
		return invalid("message.parts must not be empty")
	case req.Config != nil && req.Config.HistoryLength != nil && *req.Config.HistoryLength < 0:
		return invalid("historyLength must not be negative")
	}
	if req.Config != nil && req.Config.PushConfig != nil {
		if err := checkPushURL(req.Config.PushConfig.URL); err != nil {
			return invalid(fmt.Sprintf("push notification config: %v", err))
		}
	}
	return nil
}

// start creates a task (or continues one) for req's message to agent ag
// and relays the message, sent as the caller: its own agent when it holds
// an agent's credential, else the task's reply path (replyHelper). The
// relay decides who may send what (the caller's identity, the receiver's
// access rules and card, the conversation named by the contextId); when it
// refuses, nothing of the task is kept.
func (s *Server) start(ctx context.Context, ag *core.Agent, req *sdk.SendMessageRequest) (*TaskRecord, error) {
	if err := checkMessage(req); err != nil {
		return nil, err
	}
	msg := req.Message
	var push *sdk.PushConfig
	if req.Config != nil {
		push = req.Config.PushConfig
	}
	if err := s.checkPush(push); err != nil {
		return nil, err
	}
	parts, err := PartsToCore(msg.Parts)
	if err != nil {
		return nil, wireError(ctx, err)
	}
	p := core.PrincipalFrom(ctx)
	now := s.relay.Clock().Now()
	var rec *TaskRecord
	existing := msg.TaskID != ""
	if existing {
		r, err := s.visible(ctx, ag, string(msg.TaskID))
		if err != nil {
			return nil, err
		}
		if r.Task.Status.State.Terminal() {
			return nil, sdk.NewError(sdk.ErrUnsupportedOperation, fmt.Sprintf("task %s is %s and accepts no more messages", r.Task.ID, r.Task.Status.State))
		}
		if msg.ContextID != "" && msg.ContextID != r.Task.ContextID {
			return nil, invalid(fmt.Sprintf("message.contextId %q does not match task %s's context %q", msg.ContextID, r.Task.ID, r.Task.ContextID))
		}
		rec = r
	} else {
		ctxID := msg.ContextID
		if ctxID == "" {
			ctxID = sdk.NewContextID()
		}
		rec = &TaskRecord{Task: &sdk.Task{ID: sdk.NewTaskID(), ContextID: ctxID}, Agent: ag.ID, Owner: p.AgentID, Protocol: versionOf(ctx)}
		t := now
		rec.Task.Status = sdk.TaskStatus{State: sdk.TaskStateSubmitted, Timestamp: &t}
		rec.Transitions = []Transition{{State: sdk.TaskStateSubmitted, At: now}}
	}
	msg.TaskID, msg.ContextID = rec.Task.ID, rec.Task.ContextID
	ttl := s.opt.TTL
	if ttl == 0 {
		ttl = s.relay.Config().DefaultTTL
	}
	// Followed for the message's TTL and then ResultWait for a result.
	until := now.Add(ttl + s.opt.ResultWait)
	from := p.AgentID
	if from == "" {
		if rec.ReplyTo == "" {
			rec.ReplyTo = s.relay.InternalID("a2a-reply", string(rec.Task.ID))
		}
		if err := s.replyHelper(ctx, rec, until); err != nil {
			return nil, wireError(ctx, err)
		}
		from = rec.ReplyTo
	}
	m := &core.Message{ID: core.NewID(), Sender: from, Receiver: ag.ID, Type: "message", ConversationID: rec.Task.ContextID,
		Parts: parts, Protocol: "a2a", TTL: ttl,
		Metadata: map[string]any{MetaTaskID: string(rec.Task.ID), MetaContextID: rec.Task.ContextID, MetaMessageID: msg.ID}}
	for k, val := range msg.Metadata {
		if _, taken := m.Metadata[k]; !taken {
			m.Metadata[k] = val
		}
	}
	if !existing {
		rec.Task.History = []*sdk.Message{msg}
		rec.Links = []link{{MessageID: m.ID}}
		if err := s.tasks.create(ctx, rec); err != nil {
			return nil, wireError(ctx, err)
		}
		if err := s.send(ctx, p, ag.ID, rec, m, until); err != nil {
			s.discard(context.WithoutCancel(ctx), rec)
			return nil, wireError(ctx, err)
		}
	} else {
		if err := s.send(ctx, p, ag.ID, rec, m, until); err != nil {
			return nil, wireError(ctx, err)
		}
		r, err := s.tasks.update(ctx, ag.ID, string(rec.Task.ID), func(r *TaskRecord) error {
			r.Task.History = append(r.Task.History, msg)
			r.Links = append(r.Links, link{MessageID: m.ID})
			if rec.ReplyTo != "" {
				r.ReplyTo = rec.ReplyTo
			}
			if Interrupted(r.Task.Status.State) {
				return r.SetState(sdk.TaskStateSubmitted, nil, s.relay.Clock().Now())
			}
			return nil
		})
		if err != nil {
			return nil, wireError(ctx, err)
		}
		rec = r
	}
	if push != nil {
		c := *push
		c.TaskID = rec.Task.ID
		if _, err := s.savePush(ctx, versionOf(ctx), &c); err != nil {
			s.log.Warn("a2a: store push config", "task", rec.Task.ID, "err", err)
		}
	}
	s.followers.follow(ag.ID, string(rec.Task.ID), m.ID, until)
	return rec, nil
}

// discard deletes a task whose first message the relay refused, with its
// reply path: nothing of it is kept.
func (s *Server) discard(ctx context.Context, rec *TaskRecord) {
	if err := s.opt.Records.DeleteRecord(ctx, KindTask, string(rec.Task.ID)); err != nil && core.KindOf(err) != core.KindNotFound {
		s.log.Warn("a2a: delete refused task", "task", rec.Task.ID, "err", err)
	}
	if rec.ReplyTo != "" {
		s.dropHelper(ctx, rec.ReplyTo)
	}
}

// send relays m, a message of task rec to the agent, as p: marking it in
// the store first as followed until until (so that a hub that stops before
// the task settles follows it again when it starts).
func (s *Server) send(ctx context.Context, p core.Principal, agent string, rec *TaskRecord, m *core.Message, until time.Time) error {
	if err := s.followers.remember(ctx, agent, string(rec.Task.ID), m.ID, until); err != nil {
		return err
	}
	if _, err := s.relay.SendAs(ctx, p, m); err != nil {
		s.followers.forget(context.WithoutCancel(ctx), []string{m.ID})
		return err
	}
	return nil
}

// EndpointReply is the endpoint kind of the hidden helpers that are a
// task's reply path: ReplyDeliverer takes what reaches them.
const EndpointReply core.EndpointKind = "a2a-reply"

// replyInfo is what a reply helper's card keeps: the task it answers for.
type replyInfo struct {
	Task  string `json:"task"`
	Agent string `json:"agent"`
}

// replyHelper registers (or renews) rec's reply path: the hidden agent
// rec.ReplyTo, an internal id of the relay's (unguessable, bound only by
// the hub, left out of every listing), which sends the task's messages
// for a caller without an agent of its own and takes the agent's answers
// (core lets the receiver of a helper's message answer it). Its lease
// lasts as long as the task waits for an answer.
func (s *Server) replyHelper(ctx context.Context, rec *TaskRecord, until time.Time) error {
	extra, _ := json.Marshal(replyInfo{Task: string(rec.Task.ID), Agent: rec.Agent})
	lease := min(until.Sub(s.relay.Clock().Now())+time.Hour, s.relay.Config().MaxLease)
	a := &core.Agent{ID: rec.ReplyTo, Protocol: "a2a", Capabilities: []string{},
		Endpoint: core.Endpoint{Kind: EndpointReply},
		Card:     core.Card{Name: "reply path of A2A task " + string(rec.Task.ID), Extra: extra}}
	_, _, err := s.relay.RegisterAs(ctx, s.hub, a, lease)
	return err
}

// dropHelper deregisters one of the adapter's hidden helpers.
func (s *Server) dropHelper(ctx context.Context, id string) {
	if err := s.relay.DeregisterAs(ctx, s.hub, id); err != nil && core.KindOf(err) != core.KindNotFound {
		s.log.Warn("a2a: remove helper agent", "agent", id, "err", err)
	}
	s.helperMu.Lock()
	delete(s.helperSeen, id)
	s.helperMu.Unlock()
}

// ReplyDeliverer is the core.Deliverer for EndpointReply: an answer that
// reaches a task's reply path is applied to the task (the relay stores it
// as a result of the task's message) and counts as delivered.
func (s *Server) ReplyDeliverer() core.Deliverer { return replyDeliverer{s} }

type replyDeliverer struct{ s *Server }

// Deliver implements core.Deliverer.
func (d replyDeliverer) Deliver(ctx context.Context, a *core.Agent, m *core.Message) core.Delivery {
	var info replyInfo
	if err := json.Unmarshal(a.Card.Extra, &info); err != nil || info.Task == "" {
		return core.Delivery{Kind: core.OutcomeRejected, Code: 410, Detail: "not a task's reply path"}
	}
	if d.s.reconcile(ctx, info.Agent, info.Task) == nil {
		return core.Delivery{Kind: core.OutcomeRetry, Err: fmt.Errorf("task %s could not be read", info.Task)}
	}
	return core.Delivery{Kind: core.OutcomeDelivered, Code: 200, Detail: "applied to task " + info.Task}
}

// settled reports whether a task no longer needs the agent to move.
func settled(r *TaskRecord) bool {
	st := r.Task.Status.State
	return st.Terminal() || Interrupted(st)
}

// waitSettled waits until the task is terminal or interrupted or ctx ends,
// and returns it as it then is.
func (s *Server) waitSettled(ctx context.Context, agent string, rec *TaskRecord) *TaskRecord {
	id := string(rec.Task.ID)
	ch, stop := s.tasks.watch(id)
	defer stop()
	poll := s.taskPoll()
	defer poll.Stop()
	for {
		if r := s.reconcile(ctx, agent, id); r != nil {
			rec = r
		}
		if settled(rec) {
			return rec
		}
		select {
		case <-ctx.Done():
			return rec
		case <-ch:
		case <-poll.C():
			poll.Fired()
		}
	}
}

// taskPollFirst is the default of Options.TaskPoll: the polls of a
// client waiting on a task (a blocking send, a stream). A change made on
// this instance, or announced by another instance on a shared store
// (tasks.heard), wakes the client at once through tasks.watch; the polls
// are for a lost announcement (and for tasks whose follower's instance is
// gone). They start 250 ms apart and space out to 2 s.
const taskPollFirst = 250 * time.Millisecond

// taskPoll starts the polls of a client waiting on a task: the first
// after Options.TaskPoll, then twice as long each time up to 8 times it.
func (s *Server) taskPoll() *core.Poll {
	return core.NewPoll(s.opt.TaskPoll, 8*s.opt.TaskPoll)
}

// Diff lists the events that lead from task snapshot old to cur: one
// artifact-update per new artifact, then a status-update if the status
// changed.
func Diff(old, cur *sdk.Task) []sdk.Event {
	var evs []sdk.Event
	for i := len(old.Artifacts); i < len(cur.Artifacts); i++ {
		evs = append(evs, &sdk.TaskArtifactUpdateEvent{TaskID: cur.ID, ContextID: cur.ContextID, Artifact: cur.Artifacts[i], LastChunk: true})
	}
	if old.Status.State != cur.Status.State || !sameTime(old.Status.Timestamp, cur.Status.Timestamp) {
		evs = append(evs, &sdk.TaskStatusUpdateEvent{TaskID: cur.ID, ContextID: cur.ContextID, Status: cur.Status})
	}
	return evs
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
