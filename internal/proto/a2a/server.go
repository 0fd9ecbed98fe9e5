package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Options tune the A2A routes.
type Options struct {
	// MaxBody bounds a request body in bytes [1 MiB].
	MaxBody int64
	// BlockTimeout bounds how long a blocking SendMessage waits for a
	// terminal or interrupted state before answering with the task as it
	// is [30s].
	BlockTimeout time.Duration
	// ResultWait is how long after delivery a task keeps waiting for the
	// agent's result message [10m].
	ResultWait time.Duration
	// TTL is the relay TTL of messages sent through A2A [the relay's].
	TTL time.Duration
	// PublicURL is the hub's external base URL for cards [from the
	// request's Host].
	PublicURL string
	// Secured advertises bearer authentication in the cards (auth on).
	Secured bool
	// Context bounds background work (task followers, push deliveries)
	// [context.Background()].
	Context context.Context
	// HTTPClient posts push notifications [10s timeout].
	HTTPClient *http.Client
	// CheckURL, when set, refuses push notification URLs the hub may not
	// call (the SSRF policy) when a config is set. Without it only the
	// addresses no policy allows are refused then; HTTPClient's own guard
	// refuses the rest at connect time.
	CheckURL func(raw string) error
	Logger   *slog.Logger
}

// Server serves the A2A routes over a relay.
type Server struct {
	relay *core.Relay
	tasks *tasks
	opt   Options
	log   *slog.Logger

	pushMu    sync.Mutex
	pushSeen  map[string]time.Time // push agents registered lately
	pushLocks [pushStripes]sync.Mutex
	streams   streamBound

	followers *followers
}

// New returns the A2A adapter.
func New(relay *core.Relay, opt Options) *Server {
	if opt.MaxBody <= 0 {
		opt.MaxBody = 1 << 20
	}
	if opt.BlockTimeout <= 0 {
		opt.BlockTimeout = 30 * time.Second
	}
	if opt.ResultWait <= 0 {
		opt.ResultWait = 10 * time.Minute
	}
	given := opt.Context != nil
	if !given {
		opt.Context = context.Background()
	}
	if opt.HTTPClient == nil {
		opt.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	s := &Server{relay: relay, tasks: newTasks(relay.Store(), relay.Clock()), opt: opt, log: opt.Logger, pushSeen: map[string]time.Time{}}
	s.followers = newFollowers(s)
	s.tasks.onChange = s.retireOnFinish
	if given {
		s.followers.start() // tasks a stopped hub left open move on
		go s.retireLoop(opt.Context)
	}
	return s
}

// Mount adds the routes to mux.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/agent-card.json", s.hubCard)
	mux.HandleFunc("GET /.well-known/agent.json", s.hubCard)
	mux.HandleFunc("GET /a2a/agents", s.directory)
	mux.HandleFunc("GET /a2a/{agent}/.well-known/agent-card.json", s.agentCard)
	mux.HandleFunc("GET /a2a/{agent}/.well-known/agent.json", s.legacyAgentCard)
	mux.HandleFunc("POST /a2a/{agent}", s.rpc)
}

// operations, independent of the version's method names.
type op int

const (
	opSend op = iota + 1
	opStream
	opGet
	opList
	opCancel
	opSubscribe
	opPushSet
	opPushGet
	opPushList
	opPushDelete
	opExtCard
)

var methodsV10 = map[string]op{
	"SendMessage":                      opSend,
	"SendStreamingMessage":             opStream,
	"GetTask":                          opGet,
	"ListTasks":                        opList,
	"CancelTask":                       opCancel,
	"SubscribeToTask":                  opSubscribe,
	"CreateTaskPushNotificationConfig": opPushSet,
	"GetTaskPushNotificationConfig":    opPushGet,
	"ListTaskPushNotificationConfigs":  opPushList,
	"ListTaskPushNotificationConfig":   opPushList,
	"DeleteTaskPushNotificationConfig": opPushDelete,
	"GetExtendedAgentCard":             opExtCard,
}

var methodsV03 = map[string]op{
	"message/send":                        opSend,
	"message/stream":                      opStream,
	"tasks/get":                           opGet,
	"tasks/cancel":                        opCancel,
	"tasks/resubscribe":                   opSubscribe,
	"tasks/pushNotificationConfig/set":    opPushSet,
	"tasks/pushNotificationConfig/get":    opPushGet,
	"tasks/pushNotificationConfig/list":   opPushList,
	"tasks/pushNotificationConfig/delete": opPushDelete,
	"agent/getAuthenticatedExtendedCard":  opExtCard,
}

// resolve picks the operation and version of one request. With an
// A2A-Version header the method must be that version's; without one the
// request is 0.3, except that a 1.0 method name (unambiguous) is served as
// 1.0.
func resolve(header string, hasHeader bool, method string) (op, Version, *RPCError) {
	v, err := ParseVersion(header)
	if err != nil {
		return 0, V03, rpcErr(CodeVersionNotSupported, "%v", err)
	}
	if !hasHeader {
		if o, ok := methodsV10[method]; ok {
			return o, V10, nil
		}
	}
	table := methodsV03
	if v == V10 {
		table = methodsV10
	}
	if o, ok := table[method]; ok {
		return o, v, nil
	}
	return 0, v, rpcErr(CodeMethodNotFound, "method %q not found (A2A %s)", method, v)
}

func (s *Server) rpc(w http.ResponseWriter, r *http.Request) {
	hv, hasHeader := r.Header.Get("A2A-Version"), len(r.Header.Values("A2A-Version")) > 0
	bodyVersion := V03
	if v, err := ParseVersion(hv); err == nil {
		bodyVersion = v
	}
	if p := auth.From(r.Context()); s.opt.Secured && !p.Dev && !p.Authenticated() {
		// The cards advertise bearer authentication: every call needs it.
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
		writeJSON(w, http.StatusUnauthorized, Response{Error: rpcErr(-31401,
			"this hub needs a bearer token (an agent's token or the admin token)").withData(bodyVersion)})
		return
	}
	ag, err := s.relay.Store().GetAgent(r.Context(), r.PathValue("agent"))
	if err != nil {
		status := http.StatusInternalServerError
		e := rpcErr(CodeInternal, "internal error")
		switch {
		case errors.Is(err, core.ErrNotFound):
			status, e = http.StatusNotFound, rpcErr(CodeInvalidRequest, "no agent %q on this hub", r.PathValue("agent"))
		case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrInvalid):
			writeRPCError(w, nil, toRPCError(err).withData(bodyVersion))
			return
		}
		writeJSON(w, status, Response{Error: e.withData(bodyVersion)})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBody))
	if err != nil {
		status, e := http.StatusRequestEntityTooLarge, rpcErr(CodeInvalidRequest, "request body exceeds %d bytes", s.opt.MaxBody)
		if !errors.As(err, new(*http.MaxBytesError)) {
			// Cut off or too slow (the hub's --body-timeout): not a size
			// problem.
			status, e = http.StatusBadRequest, rpcErr(CodeInvalidRequest, "the request body could not be read")
			if errors.Is(err, os.ErrDeadlineExceeded) {
				status, e = http.StatusRequestTimeout, rpcErr(CodeInvalidRequest, "the request body did not arrive in time")
			}
		}
		writeJSON(w, status, Response{Error: e.withData(bodyVersion)})
		return
	}
	reqs, errs, batch, perr := ParseBody(body)
	if perr != nil {
		writeJSON(w, http.StatusOK, Response{Error: perr.withData(bodyVersion)})
		return
	}
	if !batch {
		req, e := reqs[0], errs[0]
		var o op
		v := bodyVersion
		if e == nil {
			o, v, e = resolve(hv, hasHeader, req.Method)
		}
		if e != nil {
			writeJSON(w, http.StatusOK, Response{ID: req.ID, Error: e.withData(v)})
			return
		}
		if o == opStream || o == opSubscribe {
			s.streamCall(w, r, ag, v, o, req)
			return
		}
		res, e := s.call(r.Context(), ag, v, o, req)
		if !req.hasID {
			w.WriteHeader(http.StatusNoContent) // a notification gets no answer
			return
		}
		if e != nil {
			writeRPCError(w, req.ID, e.withData(v))
			return
		}
		writeJSON(w, http.StatusOK, Response{ID: req.ID, Result: res})
		return
	}
	var out []Response
	for i, req := range reqs {
		e := errs[i]
		var o op
		v := bodyVersion
		if e == nil {
			o, v, e = resolve(hv, hasHeader, req.Method)
		}
		if e == nil && (o == opStream || o == opSubscribe) {
			e = rpcErr(CodeUnsupportedOperation, "streaming method %q cannot be part of a batch", req.Method)
		}
		if e != nil {
			if req.hasID || errs[i] != nil {
				out = append(out, Response{ID: req.ID, Error: e.withData(v)})
			}
			continue
		}
		res, e := s.call(r.Context(), ag, v, o, req)
		if !req.hasID {
			continue
		}
		if e != nil {
			out = append(out, Response{ID: req.ID, Error: e.withData(v)})
		} else {
			out = append(out, Response{ID: req.ID, Result: res})
		}
	}
	if len(out) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// call runs one non-streaming operation.
func (s *Server) call(ctx context.Context, ag *core.Agent, v Version, o op, req *Request) (any, *RPCError) {
	switch o {
	case opSend:
		p, e := decodeSend(v, req)
		if e == nil {
			e = s.checkPush(p.push)
		}
		if e != nil {
			return nil, e
		}
		rec, e := s.start(ctx, ag, v, p)
		if e != nil {
			return nil, e
		}
		if !p.returnImmediately {
			wctx, cancel := context.WithTimeout(ctx, s.opt.BlockTimeout)
			rec = s.waitSettled(wctx, ag.ID, rec)
			cancel()
		}
		t := view(rec, p.historyLength, true)
		if v == V03 {
			return taskToV03(t), nil
		}
		return map[string]any{"task": t}, nil
	case opGet:
		return s.getTask(ctx, ag, v, req)
	case opList:
		return s.listTasks(ctx, ag, req)
	case opCancel:
		return s.cancelTask(ctx, ag, v, req)
	case opPushSet:
		return s.pushSet(ctx, ag, v, req)
	case opPushGet:
		return s.pushGet(ctx, ag, v, req)
	case opPushList:
		return s.pushList(ctx, ag, v, req)
	case opPushDelete:
		return s.pushDelete(ctx, ag, v, req)
	case opExtCard:
		return nil, rpcErr(CodeExtendedCardNotConfig, "this agent has no extended card")
	}
	return nil, rpcErr(CodeMethodNotFound, "method %q not found", req.Method)
}

// sendParams is a SendMessage request in either version.
type sendParams struct {
	msg               *sdk.Message
	returnImmediately bool
	historyLength     *int
	push              *sdk.PushConfig
}

func decodeSend(v Version, req *Request) (*sendParams, *RPCError) {
	p := &sendParams{}
	if v == V03 {
		var raw struct {
			Message       json.RawMessage `json:"message"`
			Configuration *struct {
				HistoryLength          *int           `json:"historyLength"`
				PushNotificationConfig *v03PushConfig `json:"pushNotificationConfig"`
				Blocking               *bool          `json:"blocking"`
			} `json:"configuration"`
		}
		if e := decodeParams(req, &raw); e != nil {
			return nil, e
		}
		if len(raw.Message) == 0 || string(raw.Message) == "null" {
			return nil, rpcErr(CodeInvalidParams, "params.message is required")
		}
		m, err := DecodeMessage(V03, raw.Message)
		if err != nil {
			return nil, rpcErr(CodeInvalidParams, "params.message: %v", err)
		}
		p.msg = m
		if c := raw.Configuration; c != nil {
			p.historyLength = c.HistoryLength
			p.returnImmediately = c.Blocking != nil && !*c.Blocking
			if c.PushNotificationConfig != nil {
				p.push = pushFromV03("", *c.PushNotificationConfig)
			}
		}
	} else {
		var raw sdk.SendMessageRequest
		if e := decodeParams(req, &raw); e != nil {
			return nil, e
		}
		if raw.Message == nil {
			return nil, rpcErr(CodeInvalidParams, "params.message is required")
		}
		p.msg = raw.Message
		if c := raw.Config; c != nil {
			p.historyLength, p.returnImmediately, p.push = c.HistoryLength, c.ReturnImmediately, c.PushConfig
		}
	}
	m := p.msg
	switch {
	case m.ID == "":
		return nil, rpcErr(CodeInvalidParams, "message.messageId is required")
	case m.Role != sdk.MessageRoleUser:
		return nil, rpcErr(CodeInvalidParams, "message.role must be the user's")
	case len(m.Parts) == 0:
		return nil, rpcErr(CodeInvalidParams, "message.parts must not be empty")
	case p.historyLength != nil && *p.historyLength < 0:
		return nil, rpcErr(CodeInvalidParams, "historyLength must not be negative")
	}
	if p.push != nil {
		if err := checkPushURL(p.push.URL); err != nil {
			return nil, rpcErr(CodeInvalidParams, "push notification config: %v", err)
		}
	}
	return p, nil
}

// checkPush applies the operator's SSRF policy (Options.CheckURL) to a
// push notification config's URL.
func (s *Server) checkPush(c *sdk.PushConfig) *RPCError {
	if c == nil || s.opt.CheckURL == nil {
		return nil
	}
	if err := s.opt.CheckURL(c.URL); err != nil {
		return rpcErr(CodeInvalidParams, "push notification config: url: %v", err)
	}
	return nil
}

// sender is who an A2A request speaks for on the relay: the calling
// agent's id when it authenticated with an agent credential, else the
// anonymous "a2a-client".
func sender(ctx context.Context) string {
	if id := auth.From(ctx).AgentID; id != "" {
		return id
	}
	return "a2a-client"
}

// start creates a task (or continues one) for message p.msg to agent ag
// and relays the message. Nothing is stored when the relay refuses it.
func (s *Server) start(ctx context.Context, ag *core.Agent, v Version, p *sendParams) (*TaskRecord, *RPCError) {
	msg := p.msg
	parts, err := PartsToCore(msg.Parts)
	if err != nil {
		return nil, toRPCError(err)
	}
	from := sender(ctx)
	if err := core.CheckAccess(ag, s.relay.URI(from), auth.From(ctx).Authenticated()); err != nil {
		return nil, toRPCError(err)
	}
	now := s.relay.Clock().Now()
	var rec *TaskRecord
	existing := msg.TaskID != ""
	if existing {
		r, err := s.tasks.get(ctx, ag.ID, string(msg.TaskID))
		if err != nil {
			return nil, toRPCError(err)
		}
		if err := s.canRead(ctx, r); err != nil {
			return nil, toRPCError(err)
		}
		if r.Task.Status.State.Terminal() {
			return nil, rpcErr(CodeUnsupportedOperation, "task %s is %s and accepts no more messages", r.Task.ID, r.Task.Status.State)
		}
		if msg.ContextID != "" && msg.ContextID != r.Task.ContextID {
			return nil, rpcErr(CodeInvalidParams, "message.contextId %q does not match task %s's context %q", msg.ContextID, r.Task.ID, r.Task.ContextID)
		}
		rec = r
	} else {
		ctxID := msg.ContextID
		if ctxID == "" {
			ctxID = sdk.NewContextID()
		}
		rec = &TaskRecord{Task: &sdk.Task{ID: sdk.NewTaskID(), ContextID: ctxID}, Agent: ag.ID,
			Owner: auth.From(ctx).AgentID, Protocol: v}
		t := now
		rec.Task.Status = sdk.TaskStatus{State: sdk.TaskStateSubmitted, Timestamp: &t}
		rec.Transitions = []Transition{{State: sdk.TaskStateSubmitted, At: now}}
	}
	msg.TaskID, msg.ContextID = rec.Task.ID, rec.Task.ContextID
	m := &core.Message{ID: core.NewID(), Sender: from, Receiver: ag.ID, Type: "message", ConversationID: rec.Task.ContextID,
		Parts: parts, Protocol: "a2a", TTL: s.opt.TTL,
		Metadata: map[string]any{MetaTaskID: string(rec.Task.ID), MetaContextID: rec.Task.ContextID, MetaMessageID: msg.ID}}
	for k, val := range msg.Metadata {
		if _, taken := m.Metadata[k]; !taken {
			m.Metadata[k] = val
		}
	}
	// Followed for the message's TTL and then ResultWait for a result.
	ttl := m.TTL
	if ttl == 0 {
		ttl = s.relay.Config().DefaultTTL
	}
	until := now.Add(ttl + s.opt.ResultWait)
	if !existing {
		rec.Task.History = []*sdk.Message{msg}
		rec.Links = []link{{MessageID: m.ID}}
		if err := s.tasks.create(ctx, rec); err != nil {
			return nil, toRPCError(err)
		}
		if err := s.send(ctx, ag.ID, rec, m, until); err != nil {
			_ = s.relay.Store().DeleteRecord(context.WithoutCancel(ctx), KindTask, string(rec.Task.ID))
			return nil, toRPCError(err)
		}
	} else {
		if err := core.CheckCard(ag, m); err != nil {
			return nil, toRPCError(err)
		}
		if err := s.send(ctx, ag.ID, rec, m, until); err != nil {
			return nil, toRPCError(err)
		}
		r, err := s.tasks.update(ctx, ag.ID, string(rec.Task.ID), func(r *TaskRecord) error {
			r.Task.History = append(r.Task.History, msg)
			r.Links = append(r.Links, link{MessageID: m.ID})
			if Interrupted(r.Task.Status.State) {
				return r.SetState(sdk.TaskStateSubmitted, nil, s.relay.Clock().Now())
			}
			return nil
		})
		if err != nil {
			return nil, toRPCError(err)
		}
		rec = r
	}
	if p.push != nil {
		p.push.TaskID = rec.Task.ID
		if _, err := s.savePush(ctx, v, p.push); err != nil {
			s.log.Warn("a2a: store push config", "task", rec.Task.ID, "err", err)
		}
	}
	s.followers.follow(ag.ID, string(rec.Task.ID), m.ID, until)
	return rec, nil
}

// send relays m, a message of task rec to the agent, marking it in the
// store first as followed until until (so that a hub that stops before
// the task settles follows it again when it starts).
func (s *Server) send(ctx context.Context, agent string, rec *TaskRecord, m *core.Message, until time.Time) error {
	if err := s.followers.remember(ctx, agent, string(rec.Task.ID), m.ID, until); err != nil {
		return err
	}
	if _, err := s.relay.Send(ctx, m); err != nil {
		s.followers.forget(context.WithoutCancel(ctx), []string{m.ID})
		return err
	}
	return nil
}

// canRead lets the task's creator, its agent or the operator read it; a
// task created anonymously is readable by whoever knows its id.
func (s *Server) canRead(ctx context.Context, r *TaskRecord) error {
	if r.Owner == "" || auth.ActAs(ctx, r.Owner) == nil || auth.ActAs(ctx, r.Agent) == nil {
		return nil
	}
	return fmt.Errorf("task %q: %w", r.Task.ID, ErrTaskNotFound)
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
	poll := core.NewPoll(taskPollFirst, taskPollMax)
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

// Polls of a client waiting on a task (a blocking send, a stream). A
// change made on this instance wakes the client at once through
// tasks.watch; the polls are for changes made by other instances on a
// shared store (and for tasks whose follower's instance is gone). They
// start 250 ms apart and space out to 2 s: each reconcile reads the task,
// its receipts and results, and a hub with hundreds of open streams spent
// a quarter of a core on polls every 250 ms.
const (
	taskPollFirst = 250 * time.Millisecond
	taskPollMax   = 2 * time.Second
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
			if rc, err := s.relay.Receipt(ctx, l.MessageID); err == nil && rc.Status.Terminal() {
				receipts[l.MessageID], pending = rc, true
			}
		}
		if ms, err := s.relay.Store().Results(ctx, l.MessageID, 100); err == nil && len(ms) > l.Results {
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
		if _, ok := v03States[st]; !ok || st == sdk.TaskStateUnspecified || st == sdk.TaskStateSubmitted {
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
		if cps, err := payloadParts(rep.Result); err == nil {
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

// ---- tasks ----

type getParams struct {
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength"`
}

func (s *Server) loadTask(ctx context.Context, ag *core.Agent, id string) (*TaskRecord, *RPCError) {
	if id == "" {
		return nil, rpcErr(CodeInvalidParams, "params.id is required")
	}
	r := s.reconcile(ctx, ag.ID, id)
	if r == nil {
		return nil, rpcErr(CodeTaskNotFound, "task %q not found", id)
	}
	if err := s.canRead(ctx, r); err != nil {
		return nil, toRPCError(err)
	}
	return r, nil
}

func (s *Server) getTask(ctx context.Context, ag *core.Agent, v Version, req *Request) (any, *RPCError) {
	var p getParams
	if e := decodeParams(req, &p); e != nil {
		return nil, e
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return nil, rpcErr(CodeInvalidParams, "historyLength must not be negative")
	}
	r, e := s.loadTask(ctx, ag, p.ID)
	if e != nil {
		return nil, e
	}
	return EncodeTask(v, view(r, p.HistoryLength, true)), nil
}

func (s *Server) cancelTask(ctx context.Context, ag *core.Agent, v Version, req *Request) (any, *RPCError) {
	var p getParams
	if e := decodeParams(req, &p); e != nil {
		return nil, e
	}
	if _, e := s.loadTask(ctx, ag, p.ID); e != nil {
		return nil, e
	}
	r, err := s.tasks.update(ctx, ag.ID, p.ID, func(r *TaskRecord) error {
		if r.Task.Status.State.Terminal() {
			return rpcErr(CodeTaskNotCancelable, "task %s is %s and cannot be canceled", r.Task.ID, r.Task.Status.State)
		}
		return r.SetState(sdk.TaskStateCanceled, nil, s.relay.Clock().Now())
	})
	if err != nil {
		return nil, toRPCError(err)
	}
	return EncodeTask(v, view(r, nil, true)), nil
}

const maxListed = 10000

func (s *Server) listTasks(ctx context.Context, ag *core.Agent, req *Request) (any, *RPCError) {
	var p sdk.ListTasksRequest
	if len(req.Params) > 0 {
		if e := decodeParams(req, &p); e != nil {
			return nil, e
		}
	}
	size := p.PageSize
	switch {
	case size == 0:
		size = 50
	case size < 0 || size > 100:
		return nil, rpcErr(CodeInvalidParams, "pageSize must be 1..100")
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return nil, rpcErr(CodeInvalidParams, "historyLength must not be negative")
	}
	var want sdk.TaskState
	if p.Status != sdk.TaskStateUnspecified {
		st, ok := ParseState(string(p.Status))
		if !ok {
			return nil, rpcErr(CodeInvalidParams, "unknown status %q", p.Status)
		}
		want = st
	}
	offset := 0
	if p.PageToken != "" {
		n, err := strconv.Atoi(p.PageToken)
		if err != nil || n < 0 {
			return nil, rpcErr(CodeInvalidParams, "invalid pageToken")
		}
		offset = n
	}
	recs, err := s.tasks.list(ctx, ag.ID, p.ContextID, maxListed)
	if err != nil {
		return nil, toRPCError(err)
	}
	var match []*TaskRecord
	for _, r := range recs {
		if want != "" && r.Task.Status.State != want {
			continue
		}
		if p.StatusTimestampAfter != nil && (r.Task.Status.Timestamp == nil || !r.Task.Status.Timestamp.After(*p.StatusTimestampAfter)) {
			continue
		}
		if s.canRead(ctx, r) != nil {
			continue
		}
		match = append(match, r)
	}
	out := sdk.ListTasksResponse{Tasks: []*sdk.Task{}, TotalSize: len(match), PageSize: size}
	for i := offset; i < len(match) && i < offset+size; i++ {
		out.Tasks = append(out.Tasks, view(match[i], p.HistoryLength, p.IncludeArtifacts))
	}
	if offset+size < len(match) {
		out.NextPageToken = strconv.Itoa(offset + size)
	}
	return out, nil
}

// ---- streaming ----

func (s *Server) streamCall(w http.ResponseWriter, r *http.Request, ag *core.Agent, v Version, o op, req *Request) {
	ctx := r.Context()
	// Before anything is started, so a refused SendStreamingMessage
	// leaves no task behind.
	caller := auth.CallerKey(r)
	if !s.streams.acquire(caller) {
		e := rpcErr(CodeInternal, "this caller has %d A2A streams open, as many as it may; close one, or follow tasks with GetTask or push notifications", MaxStreamsPerCaller)
		writeJSON(w, http.StatusOK, Response{ID: req.ID, Error: e.withData(v)})
		return
	}
	defer s.streams.release(caller)
	var rec *TaskRecord
	if o == opStream {
		p, e := decodeSend(v, req)
		if e == nil {
			e = s.checkPush(p.push)
		}
		if e == nil {
			rec, e = s.start(ctx, ag, v, p)
		}
		if e != nil {
			writeJSON(w, http.StatusOK, Response{ID: req.ID, Error: e.withData(v)})
			return
		}
	} else {
		var p getParams
		e := decodeParams(req, &p)
		if e == nil {
			rec, e = s.loadTask(ctx, ag, p.ID)
		}
		if e == nil && rec.Task.Status.State.Terminal() {
			e = rpcErr(CodeUnsupportedOperation, "task %s is %s; there is nothing to subscribe to", rec.Task.ID, rec.Task.Status.State)
		}
		if e != nil {
			writeJSON(w, http.StatusOK, Response{ID: req.ID, Error: e.withData(v)})
			return
		}
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(ev any) bool {
		b, err := json.Marshal(Response{ID: req.ID, Result: ev})
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if !send(EncodeEvent(v, view(rec, nil, true))) {
		return
	}
	id := string(rec.Task.ID)
	ch, stop := s.tasks.watch(id)
	defer stop()
	poll := core.NewPoll(taskPollFirst, taskPollMax)
	defer poll.Stop()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	last := rec
	for !settled(last) {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			if fl != nil {
				fl.Flush()
			}
			continue
		case <-ch:
		case <-poll.C():
			poll.Fired()
		}
		cur := s.reconcile(ctx, ag.ID, id)
		if cur == nil {
			return
		}
		for _, ev := range Diff(last.Task, cur.Task) {
			if !send(EncodeEvent(v, ev)) {
				return
			}
		}
		last = cur
	}
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

// EncodeEvent renders a stream event in version v's JSON: 1.0 wraps it
// in {"task"|"message"|"statusUpdate"|"artifactUpdate": …}; 0.3 gives the
// object with its "kind", and status updates carry "final" (true when the
// task is terminal or interrupted).
func EncodeEvent(v Version, ev sdk.Event) any {
	if v == V10 {
		return sdk.StreamResponse{Event: ev}
	}
	switch e := ev.(type) {
	case *sdk.Task:
		return taskToV03(e)
	case *sdk.Message:
		return messageToV03(e)
	case *sdk.TaskStatusUpdateEvent:
		return v03StatusUpdate{Kind: "status-update", TaskID: string(e.TaskID), ContextID: e.ContextID, Status: statusToV03(e.Status),
			Final: e.Status.State.Terminal() || Interrupted(e.Status.State), Metadata: e.Metadata}
	case *sdk.TaskArtifactUpdateEvent:
		return v03ArtifactUpdate{Kind: "artifact-update", TaskID: string(e.TaskID), ContextID: e.ContextID, Artifact: artifactToV03(e.Artifact),
			Append: e.Append, LastChunk: e.LastChunk, Metadata: e.Metadata}
	}
	return nil
}

// directory lists the hub's agents with their A2A endpoints and cards. As
// every agent listing, it needs a credential when auth is on.
func (s *Server) directory(w http.ResponseWriter, r *http.Request) {
	if err := auth.Member(r.Context()); err != nil {
		httperr.From(w, err)
		return
	}
	list, err := s.relay.Store().ListAgents(r.Context(), core.AgentFilter{})
	if err != nil {
		httperr.From(w, err)
		return
	}
	base := s.baseURL(r)
	out := make([]DirectoryEntry, 0, len(list))
	for _, a := range list {
		out = append(out, s.entry(base, a))
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agents": out})
}
