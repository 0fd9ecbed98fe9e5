package mcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// WaitInput is wait_for_reply's input.
type WaitInput struct {
	MessageID string `json:"message_id,omitempty" jsonschema:"the id of a message you sent; without it, wait for the next message addressed to you"`
	TimeoutMs int64  `json:"timeout_ms,omitempty" jsonschema:"how long to wait in milliseconds (default 30000)"`
}

// Outcomes of wait_for_reply.
const (
	OutcomeReply         = "reply"         // an answer (or, without message_id, a message) arrived
	OutcomeTimeout       = "timeout"       // nothing arrived within timeout_ms; call again to keep waiting
	OutcomeUndeliverable = "undeliverable" // the message ended rejected, timeout or expired: no answer will come
)

// Where an answer came from (WaitOutput.Source).
const (
	// SourceMessage is an answer sent as a message correlated to the one
	// waited on.
	SourceMessage = "message"
	// SourceInline is the answer the receiver gave in its response to the
	// delivery (an ATP worker's result, a remote A2A agent's synchronous
	// answer): the receipt's reply.
	SourceInline = "inline"
)

// WaitOutput is wait_for_reply's output.
type WaitOutput struct {
	Outcome  string       `json:"outcome" jsonschema:"reply, timeout (call again to keep waiting) or undeliverable"`
	Source   string       `json:"source,omitempty" jsonschema:"where the reply came from: message (a correlated message) or inline (the receiver's answer to the delivery)"`
	Reply    *MessageView `json:"reply,omitempty" jsonschema:"the message that arrived"`
	Receipt  *ReceiptView `json:"receipt,omitempty" jsonschema:"the receipt of the message waited on"`
	WaitedMs int64        `json:"waited_ms"`
}

func (s *Server) waitForReply(ctx context.Context, req *sdk.CallToolRequest, in WaitInput) (*sdk.CallToolResult, WaitOutput, error) {
	c := s.callerOf(req.Extra)
	timeout, err := s.waitTimeout(in.TimeoutMs)
	if err != nil {
		return nil, WaitOutput{}, err
	}
	w, err := s.waiterFor(ctx, c, in.MessageID)
	if err != nil {
		return nil, WaitOutput{}, err
	}
	start := time.Now()
	r, err := s.wait(ctx, progressOf(req), w, timeout)
	if err != nil {
		return nil, WaitOutput{}, err
	}
	r.WaitedMs = time.Since(start).Milliseconds()
	return &sdk.CallToolResult{Content: r.content()}, r.WaitOutput, nil
}

// waitTimeout is a wait's timeout from timeout_ms (0: DefaultWait; at most
// MaxWait).
func (s *Server) waitTimeout(ms int64) (time.Duration, error) {
	switch {
	case ms < 0:
		return 0, invalid("timeout_ms must not be negative")
	case ms == 0:
		return s.opt.DefaultWait, nil
	case ms > s.opt.MaxWait.Milliseconds():
		return s.opt.MaxWait, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// waiterFor is the wait wait_for_reply does for c: for the answer to
// message id, which c must be allowed to read, or for the next message to
// c's agent.
func (s *Server) waiterFor(ctx context.Context, c caller, id string) (waiter, error) {
	if id != "" {
		rc, err := s.relay.ReceiptFor(ctx, c.p, id)
		if err != nil {
			return nil, err
		}
		return &resultWaiter{s: s, c: c, id: rc.MessageID}, nil
	}
	if err := s.ensureHost(ctx, c); err != nil {
		return nil, err
	}
	return &queueWaiter{s: s, c: c}, nil
}

// content is the unstructured content of a wait's result.
func (r *waitResult) content() []sdk.Content {
	switch {
	case r.Reply != nil:
		m := r.reply
		head := fmt.Sprintf("Message %s from %s (type %s):", m.ID, m.Sender, m.Type)
		if r.Source == SourceInline {
			head = fmt.Sprintf("%s answered message %s when it was delivered:", m.Sender, m.CorrelationID)
		}
		return append([]sdk.Content{&sdk.TextContent{Text: head}}, Contents(m.Parts)...)
	case r.Outcome == OutcomeUndeliverable:
		return []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("Message %s ended %s: no reply will come (%s).",
			r.Receipt.MessageID, r.Receipt.Status, r.Receipt.LastError)}}
	}
	return []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("No reply after %d ms; call wait_for_reply again to keep waiting.", r.WaitedMs)}}
}

// waitResult is a wait's outcome and the message behind it.
type waitResult struct {
	WaitOutput
	reply *core.Message
}

// waiter is one kind of wait: poll checks whether it is over.
type waiter interface {
	// poll returns a result when the wait is over, nil otherwise.
	poll(ctx context.Context) (*waitResult, error)
	// watch calls wake (which must not block) whenever the relay of this
	// instance may have changed what poll finds, until stop is called.
	watch(wake func()) (stop func())
	// describe is the progress message.
	describe() string
}

// progress sends a wait's progress notifications, when its request asked
// for them.
type progress func(ctx context.Context, elapsed, total time.Duration, msg string)

// progressOf is the progress of a tool call: notifications with its
// progress token, or none.
func progressOf(req *sdk.CallToolRequest) progress {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	return func(ctx context.Context, el, total time.Duration, msg string) {
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token,
			Progress: el.Seconds(), Total: total.Seconds(),
			Message: fmt.Sprintf("%s (%.0fs of %.0fs)", msg, el.Seconds(), total.Seconds())})
	}
}

// A wait's fallback polls see what other hub instances changed on a
// shared store (changes made on this instance wake it at once, see
// waiter.watch): the first comes Options.WaitPoll/8 after the start or a
// wake-up, each next one twice as far apart, up to Options.WaitPoll.
const waitPollSteps = 8

// wait polls w when the relay tells it something changed (and, as a
// fallback bounded by Options.WaitPoll, now and then), reporting
// progress every ProgressEvery when asked to, until w is done, timeout
// passes or ctx ends.
func (s *Server) wait(ctx context.Context, report progress, w waiter, timeout time.Duration) (*waitResult, error) {
	wake := make(chan struct{}, 1)
	stop := w.watch(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var tick <-chan time.Time
	if report != nil {
		t := time.NewTicker(s.opt.ProgressEvery)
		defer t.Stop()
		tick = t.C
	}
	poll := core.NewPoll(s.opt.WaitPoll/waitPollSteps, s.opt.WaitPoll)
	defer poll.Stop()
	start := time.Now()
	for {
		r, err := w.poll(ctx)
		if err != nil || r != nil {
			return r, err
		}
	idle:
		for {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-deadline.C:
				return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeTimeout}}, nil
			case <-wake:
				poll.Again()
				break idle
			case <-poll.C():
				poll.Fired()
				break idle
			case <-tick:
				report(ctx, time.Since(start), timeout, w.describe())
			}
		}
	}
}

// watchQueue wakes a wait for messages to agent: the relay's events of
// this instance that queue one.
func (s *Server) watchQueue(agent string, wake func()) (stop func()) {
	events, unsubscribe := s.relay.Events().Subscribe(64)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case e := <-events:
				if e.Receiver == agent && (e.Type == core.EventAccepted || e.Type == core.EventReplayed) {
					wake()
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { unsubscribe(); close(done) }) }
}

// resultWaiter waits for the answer to message id: a message correlated
// to it, or the receiver's inline answer in its delivery response.
type resultWaiter struct {
	s  *Server
	c  caller
	id string
}

func (w *resultWaiter) poll(ctx context.Context) (*waitResult, error) {
	ms, err := w.s.relay.ResultsFor(ctx, w.c.p, w.id, 0, 1)
	if err != nil {
		return nil, err
	}
	rc, err := w.s.relay.ReceiptFor(ctx, w.c.p, w.id)
	if err != nil {
		return nil, err
	}
	rv := receiptView(rc)
	if len(ms) > 0 {
		m := ms[0]
		if m.Receiver == w.c.agentID {
			// The answer is in the host's queue: it is delivered now.
			if _, err := w.s.relay.AckAs(ctx, w.c.p, w.c.agentID, []string{m.ID}); err != nil && !errIs(err, core.ErrNotFound) {
				return nil, err
			}
		}
		mv := messageView(m)
		return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeReply, Source: SourceMessage, Reply: &mv, Receipt: &rv}, reply: m}, nil
	}
	if m := inlineAnswer(rc); m != nil {
		mv := messageView(m)
		return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeReply, Source: SourceInline, Reply: &mv, Receipt: &rv}, reply: m}, nil
	}
	if rc.Status.Terminal() && rc.Status != core.StatusDelivered {
		return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeUndeliverable, Receipt: &rv}}, nil
	}
	return nil, nil
}

// watch wakes the wait when message id's receipt moves or a result
// correlated to it arrives (the relay's own notification, which no
// burst of other traffic can crowd out).
func (w *resultWaiter) watch(wake func()) func() {
	return w.s.relay.OnMessageEvent(w.id, func(string) { wake() })
}

func (w *resultWaiter) describe() string { return "waiting for the reply to " + w.id }

// queueWaiter waits for the next message queued for the host agent.
type queueWaiter struct {
	s *Server
	c caller
}

func (w *queueWaiter) poll(ctx context.Context) (*waitResult, error) {
	ms, err := w.s.relay.PullAs(ctx, w.c.p, w.c.agentID, 1, 0, true)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	m := ms[0]
	mv := messageView(m)
	return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeReply, Source: SourceMessage, Reply: &mv}, reply: m}, nil
}

func (w *queueWaiter) watch(wake func()) func() { return w.s.watchQueue(w.c.agentID, wake) }

func (w *queueWaiter) describe() string { return "waiting for a message to " + w.c.agentID }

// CheckInboxInput is check_inbox's input.
type CheckInboxInput struct {
	Max       int   `json:"max,omitempty" jsonschema:"at most this many messages (default 10, at most 100)"`
	TimeoutMs int64 `json:"timeout_ms,omitempty" jsonschema:"wait this long in milliseconds for a message when none is unread (default 0: do not wait)"`
	Ack       *bool `json:"ack,omitempty" jsonschema:"count the messages as read (default true); false leaves them unread until ack_messages, and they come back after lease_ms"`
	LeaseMs   int64 `json:"lease_ms,omitempty" jsonschema:"with ack false: how long the messages stay hidden from other reads (default 60000)"`
}

// CheckInboxOutput is check_inbox's output.
type CheckInboxOutput struct {
	AgentID  string        `json:"agent_id" jsonschema:"your agent id: the messages are addressed to it"`
	Messages []MessageView `json:"messages"`
}

func (s *Server) checkInbox(ctx context.Context, req *sdk.CallToolRequest, in CheckInboxInput) (*sdk.CallToolResult, CheckInboxOutput, error) {
	c := s.callerOf(req.Extra)
	max, err := limitOf(in.Max, 10, 100)
	if err != nil {
		return nil, CheckInboxOutput{}, err
	}
	if in.TimeoutMs < 0 || in.LeaseMs < 0 {
		return nil, CheckInboxOutput{}, invalid("timeout_ms and lease_ms must not be negative")
	}
	wait := min(time.Duration(in.TimeoutMs)*time.Millisecond, s.opt.MaxWait)
	lease := time.Duration(in.LeaseMs) * time.Millisecond
	if lease == 0 {
		lease = time.Minute
	}
	ack := in.Ack == nil || *in.Ack
	if err := s.ensureHost(ctx, c); err != nil {
		return nil, CheckInboxOutput{}, err
	}
	ms, err := s.inbox(ctx, progressOf(req), c, max, wait, lease, ack)
	if err != nil {
		return nil, CheckInboxOutput{}, err
	}
	out := CheckInboxOutput{AgentID: c.agentID, Messages: make([]MessageView, 0, len(ms))}
	content := []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%d unread message(s) for %s.", len(ms), c.agentID)}}
	for _, m := range ms {
		out.Messages = append(out.Messages, messageView(m))
		content = append(content, &sdk.TextContent{Text: renderMessage(m)})
	}
	return &sdk.CallToolResult{Content: content}, out, nil
}

// inbox pulls up to max of c's unread messages, waiting up to wait for
// one when there are none.
func (s *Server) inbox(ctx context.Context, report progress, c caller, max int, wait, lease time.Duration, ack bool) ([]*core.Message, error) {
	ms, err := s.relay.PullAs(ctx, c.p, c.agentID, max, lease, ack)
	if err != nil || len(ms) > 0 || wait <= 0 {
		return ms, err
	}
	w := &inboxWaiter{s: s, c: c, max: max, lease: lease, ack: ack}
	if _, err := s.wait(ctx, report, w, wait); err != nil {
		return nil, err
	}
	return w.got, nil
}

// inboxWaiter waits for messages to c's agent.
type inboxWaiter struct {
	s     *Server
	c     caller
	max   int
	lease time.Duration
	ack   bool
	got   []*core.Message
}

func (w *inboxWaiter) poll(ctx context.Context) (*waitResult, error) {
	ms, err := w.s.relay.PullAs(ctx, w.c.p, w.c.agentID, w.max, w.lease, w.ack)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	w.got = ms
	return &waitResult{WaitOutput: WaitOutput{Outcome: OutcomeReply}}, nil
}

func (w *inboxWaiter) watch(wake func()) func() { return w.s.watchQueue(w.c.agentID, wake) }

func (w *inboxWaiter) describe() string { return "waiting for a message to " + w.c.agentID }

// AckMessagesInput is ack_messages' input.
type AckMessagesInput struct {
	MessageIDs []string `json:"message_ids" jsonschema:"the ids of messages check_inbox returned"`
}

// AckMessagesOutput is ack_messages' output.
type AckMessagesOutput struct {
	Acknowledged int `json:"acknowledged" jsonschema:"how many were unread and are now read"`
}

func (s *Server) ackMessages(ctx context.Context, req *sdk.CallToolRequest, in AckMessagesInput) (*sdk.CallToolResult, AckMessagesOutput, error) {
	if len(in.MessageIDs) == 0 || len(in.MessageIDs) > 1000 {
		return nil, AckMessagesOutput{}, invalid("message_ids must hold 1 to 1000 ids")
	}
	c := s.callerOf(req.Extra)
	n, err := s.relay.AckAs(ctx, c.p, c.agentID, in.MessageIDs)
	if err != nil {
		return nil, AckMessagesOutput{}, err
	}
	return nil, AckMessagesOutput{Acknowledged: n}, nil
}
