package amp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/amp/guard"
)

// Thresholds of the engine's rules.
const (
	// TriggerCooldown: a phrase trigger (giving up, frustration, claims,
	// lock-in) within this time of the previous one is reported but
	// neither injects nor raises pressure. Failures are always counted.
	TriggerCooldown = 30 * time.Second
	// TickCooldown: the high-pressure reminder on prompts is not repeated
	// within this time of the last tick that happened.
	TickCooldown = 4 * time.Second
	// RestoreWindow: a compaction checkpoint older than this is not
	// restored at session start.
	RestoreWindow = 2 * time.Hour
	// BreakthroughMinFailures: a real pass after at least this many
	// consecutive failures is a breakthrough and resets pressure.
	BreakthroughMinFailures = 3
	// ArenaPressure: the arena activates when pressure reaches this level.
	ArenaPressure = 2
	// VerifyPressure: at this pressure a tick that happens gates delivery
	// on independent verification.
	VerifyPressure = 3
	// HighPressure: from this level every prompt gets a reminder.
	HighPressure = 2
	// MaxSummary bounds the reasoning summary kept at compaction, in bytes.
	MaxSummary = 4000
)

// LadderLevel maps consecutive failures to a pressure level:
// ≥5 → 4, 4 → 3, 3 → 2, 2 → 1, else 0.
func LadderLevel(failures int) int {
	switch {
	case failures >= 5:
		return 4
	case failures >= 4:
		return 3
	case failures >= 3:
		return 2
	case failures >= 2:
		return 1
	}
	return 0
}

// HostEvent is the lifecycle event a tick reacts to.
type HostEvent string

// Host events. The first seven are Claude Code hook events; ModelOutput
// carries an agent's reply (Go middleware), Manual is an explicit tick.
const (
	HostSessionStart       HostEvent = "SessionStart"
	HostUserPromptSubmit   HostEvent = "UserPromptSubmit"
	HostPreToolUse         HostEvent = "PreToolUse"
	HostPostToolUse        HostEvent = "PostToolUse"
	HostPostToolUseFailure HostEvent = "PostToolUseFailure"
	HostPreCompact         HostEvent = "PreCompact"
	HostStop               HostEvent = "Stop"
	HostModelOutput        HostEvent = "ModelOutput"
	HostManual             HostEvent = "Manual"
)

var hostEventNames = map[string]HostEvent{
	"sessionstart": HostSessionStart, "session-start": HostSessionStart,
	"userpromptsubmit": HostUserPromptSubmit, "user-prompt": HostUserPromptSubmit, "user-prompt-submit": HostUserPromptSubmit,
	"pretooluse": HostPreToolUse, "pre-tool-use": HostPreToolUse,
	"posttooluse": HostPostToolUse, "post-tool-use": HostPostToolUse,
	"posttoolusefailure": HostPostToolUseFailure, "post-tool-use-failure": HostPostToolUseFailure,
	"precompact": HostPreCompact, "pre-compact": HostPreCompact,
	"stop":        HostStop,
	"modeloutput": HostModelOutput, "model-output": HostModelOutput,
	"manual": HostManual,
}

// ParseHostEvent accepts PascalCase (SessionStart) and kebab-case
// (session-start, user-prompt) event names.
func ParseHostEvent(s string) (HostEvent, bool) {
	e, ok := hostEventNames[strings.ToLower(strings.TrimSpace(s))]
	return e, ok
}

// ToolResult is the outcome of a tool call. Only real failure signals
// count: a non-zero exit code, an explicit error, or an interruption. A
// missing exit code is not a failure.
type ToolResult struct {
	ExitCode    *int   `json:"exit_code,omitempty"`
	Error       string `json:"error,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
}

// Failed reports whether the result carries a real failure signal.
func (r *ToolResult) Failed() bool {
	return r != nil && ((r.ExitCode != nil && *r.ExitCode != 0) || r.Error != "" || r.Interrupted)
}

// TickInput is one event for the engine.
type TickInput struct {
	SessionID string    `json:"session_id"`
	Event     HostEvent `json:"event"`
	// Message is the user's prompt (UserPromptSubmit), or the agent's
	// text (ModelOutput, Stop's last assistant message, Manual).
	Message   string         `json:"message,omitempty"`
	ToolName  string         `json:"tool_name,omitempty"`
	ToolInput map[string]any `json:"tool_input,omitempty"`
	// Result is the tool's outcome (PostToolUse). PostToolUseFailure is a
	// failure whatever Result says.
	Result *ToolResult `json:"tool_result,omitempty"`
	// Success is an external verifier's verdict: true is a real pass,
	// false a failure.
	Success *bool `json:"success,omitempty"`
	// Source is SessionStart's source (startup, resume, clear, compact).
	Source string `json:"source,omitempty"`
	// Trigger is PreCompact's trigger (manual, auto).
	Trigger string `json:"trigger,omitempty"`
	// Summary is the reasoning summary to keep at PreCompact.
	Summary string `json:"summary,omitempty"`
	// StopHookActive is true when the agent already continues because of
	// a Stop block; the confidence gate then does not block again.
	StopHookActive bool `json:"stop_hook_active,omitempty"`
	// Cwd is the host's working directory (the guard reads the branch).
	Cwd string `json:"cwd,omitempty"`
	// Force bypasses the cooldowns.
	Force bool `json:"force,omitempty"`
	// DetectedTriggers are triggers the host detected itself (the
	// reference's ids: giving_up_language, user_frustration,
	// premature_convergence, creative_block, consecutive_failures, …).
	DetectedTriggers []string `json:"detected_triggers,omitempty"`
	// Owner is the credential the session belongs to (a principal key such
	// as "agent:bob"; "" for none): sessions of different owners are kept
	// apart under OwnedSession(Owner, SessionID).
	Owner string `json:"-"`
}

// Result is a tick's full outcome: the envelope plus what the host should
// do with it.
type Result struct {
	Envelope Envelope `json:"amp"`
	// Injection is the text to add to the agent's context ("" if none).
	Injection string `json:"injection,omitempty"`
	// Deny is set when the guard denies a PreToolUse call.
	Deny bool `json:"deny,omitempty"`
	// Block is set when a Stop must not end the turn (confidence gate).
	Block bool `json:"block,omitempty"`
	// Reason explains Deny or Block.
	Reason string `json:"reason,omitempty"`
}

// Strategy is what a tick tries to achieve; it selects the role.
type Strategy string

// Strategies.
const (
	StrategyRepair   Strategy = "repair"
	StrategyInnovate Strategy = "innovate"
	StrategyOptimize Strategy = "optimize"
)

// RoleSelector picks the role for a tick that happened.
type RoleSelector func(s Strategy, st State) string

// DefaultRoleSelector maps repair → military-warrior, innovate →
// shaman-musk, optimize → military-commander.
func DefaultRoleSelector(s Strategy, _ State) string {
	switch s {
	case StrategyRepair:
		return "military-warrior"
	case StrategyInnovate:
		return "shaman-musk"
	}
	return "military-commander"
}

// Clock tells the time; tests inject a fake one.
type Clock interface{ Now() time.Time }

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now implements Clock.
func (f ClockFunc) Now() time.Time { return f() }

// Engine runs ticks against a StateStore. It is safe for concurrent use;
// atomicity per session is the store's (see StateStore.Update).
type Engine struct {
	store     StateStore
	clock     Clock
	match     *matcher
	roles     RoleSelector
	guardMode guard.Mode
}

// Option configures an Engine.
type Option func(*Engine)

// WithClock sets the clock (default: time.Now).
func WithClock(c Clock) Option { return func(e *Engine) { e.clock = c } }

// WithPhrases replaces the phrase lists.
func WithPhrases(p Phrases) Option { return func(e *Engine) { e.match = newMatcher(p) } }

// WithRoleSelector replaces the role selection.
func WithRoleSelector(r RoleSelector) Option { return func(e *Engine) { e.roles = r } }

// WithGuardMode sets the PreToolUse guard mode (default guard.ModeDev).
func WithGuardMode(m guard.Mode) Option { return func(e *Engine) { e.guardMode = m } }

// New returns an Engine persisting state in store.
func New(store StateStore, opts ...Option) *Engine {
	e := &Engine{store: store, clock: ClockFunc(time.Now), roles: DefaultRoleSelector, guardMode: guard.ModeDev}
	for _, o := range opts {
		o(e)
	}
	if e.match == nil {
		e.match = newMatcher(DefaultPhrases())
	}
	return e
}

// Store returns the engine's state store.
func (e *Engine) Store() StateStore { return e.store }

// GuardMode returns the engine's guard mode.
func (e *Engine) GuardMode() guard.Mode { return e.guardMode }

// ErrUnknownEvent is returned for a TickInput with an unknown Event.
var ErrUnknownEvent = errors.New("amp: unknown event")

// Tick runs one event and returns its envelope.
func (e *Engine) Tick(ctx context.Context, in TickInput) (Envelope, error) {
	r, err := e.Step(ctx, in)
	return r.Envelope, err
}

// Step runs one event, persisting the session's state, and returns the
// full result. An empty Event is Manual.
func (e *Engine) Step(ctx context.Context, in TickInput) (Result, error) {
	if in.Event == "" {
		in.Event = HostManual
	}
	if _, ok := hostEventNames[strings.ToLower(string(in.Event))]; !ok {
		return Result{}, fmt.Errorf("%w: %q", ErrUnknownEvent, in.Event)
	}
	in.Event, _ = ParseHostEvent(string(in.Event))
	if in.SessionID == "" {
		return Result{}, ErrEmptySession
	}
	if _, err := triggerDetection(&Detection{}, in.DetectedTriggers); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	now := e.clock.Now()
	// Fast path: most ticks (a successful command, a neutral prompt, an
	// allowed tool call) change nothing but LastActivity. Decide them on a
	// lock-free snapshot (stores write atomically, so it is consistent)
	// and skip the locked read-modify-write entirely.
	key := OwnedSession(in.Owner, in.SessionID)
	if snap, ok, err := e.store.Load(ctx, key); err == nil && ok {
		before := snap
		res := e.apply(&snap, in, now)
		if unchanged(before, snap) {
			if err := res.Envelope.Validate(); err != nil {
				return Result{}, fmt.Errorf("amp: tick produced an invalid envelope: %w", err)
			}
			return res, nil
		}
	}
	var res Result
	err := e.store.Update(ctx, key, func(st *State) error {
		res = e.apply(st, in, now)
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("amp: tick %s: %w", in.SessionID, err)
	}
	if err := res.Envelope.Validate(); err != nil {
		return Result{}, fmt.Errorf("amp: tick produced an invalid envelope: %w", err)
	}
	return res, nil
}

// unchanged reports whether a tick left the state as it was, apart from
// LastActivity (which is then not persisted).
func unchanged(before, after State) bool {
	after.LastActivity = before.LastActivity
	return before.SessionID == after.SessionID && before.Checkpoint == after.Checkpoint &&
		stateScalars(before) == stateScalars(after)
}

// stateScalars is State without its pointer field, for comparison.
func stateScalars(s State) State {
	s.Checkpoint = nil
	return s
}

// tick accumulates one tick's outcome.
type tick struct {
	events   []Event
	parts    []string
	strategy Strategy
	confirm  bool // confidence gate
	deny     bool
	block    bool
	reason   string
	dream    bool
}

func (t *tick) event(ev Event) {
	for _, x := range t.events {
		if x == ev {
			return
		}
	}
	t.events = append(t.events, ev)
}

func (t *tick) say(s string) {
	if s != "" {
		t.parts = append(t.parts, s)
	}
}

// apply is the pure rule set: it updates st for in at time now.
func (e *Engine) apply(st *State, in TickInput, now time.Time) Result {
	if st.StartedAt.IsZero() {
		st.StartedAt = now
	}
	// The state names the session as its owner knows it.
	st.SessionID, st.Owner = in.SessionID, in.Owner
	var t tick
	switch in.Event {
	case HostPreToolUse:
		e.preToolUse(st, in, &t)
	case HostPostToolUse, HostPostToolUseFailure:
		e.postToolUse(st, in, now, &t)
	case HostPreCompact:
		t.event(EventCompaction)
		summary := TailString(in.Summary, MaxSummary)
		st.Checkpoint = &Checkpoint{At: now, Trigger: in.Trigger, Pressure: st.Pressure, Failures: st.Failures, Role: st.Role, Summary: summary}
	case HostSessionStart:
		e.sessionStart(st, in, now, &t)
	default: // UserPromptSubmit, ModelOutput, Stop, Manual
		e.message(st, in, now, &t)
	}
	st.LastActivity = now

	injection := strings.Join(t.parts, "\n\n")
	if t.deny || t.block {
		injection = "" // the reason carries the text
	}
	happened := injection != "" || t.deny || t.block
	text := injection + "\n" + t.reason
	var blocks []Block
	for _, b := range Blocks {
		if strings.Contains(text, string(b)) {
			blocks = append(blocks, b)
		}
	}
	role := RoleNone
	if happened {
		st.LastHappened = now
		if t.strategy != "" || t.deny {
			st.Triggers++ // a report-only Stop is not a trigger
		}
		if t.strategy != "" {
			role = e.roles(t.strategy, *st)
			st.Role = role
		}
	}
	gate := GateNone
	switch {
	case t.deny:
		gate = GatePreToolUse
	case t.confirm:
		gate = GateConfidence
	case happened && st.Pressure >= VerifyPressure:
		gate = GateVerify
	case containsBlock(blocks, BlockDiagnosis):
		gate = GateDiagnosis
	}
	if t.events == nil {
		t.events = []Event{}
	}
	if blocks == nil {
		blocks = []Block{}
	}
	return Result{
		Envelope: Envelope{
			Spec:   SpecVersion,
			Events: t.events,
			Blocks: blocks,
			Gate:   gate,
			State: EnvelopeState{
				Pressure: st.Pressure,
				Arena:    st.Arena || containsBlock(blocks, BlockArena),
				Dream:    st.Dream || t.dream || containsBlock(blocks, BlockDream),
				Happened: happened,
				Role:     role,
			},
		},
		Injection: injection,
		Deny:      t.deny,
		Block:     t.block,
		Reason:    t.reason,
	}
}

func containsBlock(bs []Block, b Block) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}

func (e *Engine) preToolUse(st *State, in TickInput, t *tick) {
	d := guard.Check(guard.Request{Mode: e.guardMode, Tool: in.ToolName, Input: in.ToolInput, Cwd: in.Cwd})
	if !d.Deny {
		return
	}
	st.Denials++
	t.deny = true
	t.event(EventFailure)
	t.reason = DenyReason(d.Reason)
}

// isCommandTool reports whether a tool's success is a real pass (a shell
// command ran and exited cleanly). Other tools' successes are neutral.
func isCommandTool(name string) bool {
	switch strings.ToLower(name) {
	case "bash", "shell", "execute", "exec", "run_command", "run_shell_command", "terminal", "powershell", "sh":
		return true
	}
	return false
}

func (e *Engine) postToolUse(st *State, in TickInput, now time.Time, t *tick) {
	failed := in.Event == HostPostToolUseFailure || in.Result.Failed() || (in.Success != nil && !*in.Success)
	if failed {
		e.fail(st, fmt.Sprintf("%d consecutive tool failures (last: %s)", st.Failures+1, toolLabel(in.ToolName)), t)
		return
	}
	if (in.Success != nil && *in.Success) || isCommandTool(in.ToolName) {
		e.pass(st, t)
	}
}

// fail counts one failure and raises the ladder; it injects only when the
// level rises (never subject to a cooldown: the ladder rises at most four
// times).
func (e *Engine) fail(st *State, why string, t *tick) {
	st.Failures++
	st.TotalFailures++
	t.event(EventFailure)
	level := LadderLevel(st.Failures)
	if level <= st.Pressure {
		if st.Failures == 1 {
			// The first failure of a run switches to a repair role and
			// sets the diagnosis gate at once, as the reference does.
			t.say(firstFailureText(st.Pressure, why))
			t.strategy = StrategyRepair
		}
		return
	}
	e.raise(st, level, why, t)
	t.strategy = StrategyRepair
}

// raise sets the pressure level, activating the arena at ArenaPressure,
// and injects the runtime block of the new level.
func (e *Engine) raise(st *State, level int, why string, t *tick) {
	if level > MaxPressure {
		level = MaxPressure
	}
	st.Pressure = level
	if level > st.PeakPressure {
		st.PeakPressure = level
	}
	t.say(runtimeText(level, why))
	if level >= ArenaPressure && !st.Arena {
		st.Arena = true
		t.say(arenaText())
	}
}

// pass handles a real pass: after BreakthroughMinFailures consecutive
// failures it is a breakthrough that resets pressure; otherwise it only
// ends the run of consecutive failures.
func (e *Engine) pass(st *State, t *tick) {
	if st.Failures >= BreakthroughMinFailures {
		t.event(EventBreakthrough)
		t.say(breakthroughText(st.Failures, st.Pressure))
		st.Breakthroughs++
		st.Pressure = 0
		st.Dream = false
		t.strategy = StrategyOptimize
	}
	st.Failures = 0
}

func (e *Engine) message(st *State, in TickInput, now time.Time, t *tick) {
	user := in.Event == HostUserPromptSubmit || in.Event == HostManual
	agent := in.Event == HostModelOutput || in.Event == HostStop || in.Event == HostManual
	// A Stop tick only records the session's end: a verdict given with it
	// is not a new failure (the reference's Stop tick is silent).
	if in.Success != nil && in.Event != HostStop {
		if *in.Success {
			e.pass(st, t)
		} else {
			e.fail(st, fmt.Sprintf("%d consecutive failures (verifier)", st.Failures+1), t)
		}
	}
	d := Detection{}
	if !(in.Event == HostStop && in.StopHookActive) {
		d = e.match.detect(in.Message, user, agent)
	}
	if failed, _ := triggerDetection(&d, in.DetectedTriggers); failed && in.Event != HostStop {
		e.fail(st, fmt.Sprintf("%d consecutive failures (detected by the host)", st.Failures+1), t)
	}
	if d.GivingUp != "" {
		t.event(EventGivingUp)
	}
	if d.Claim != "" || d.LockIn != "" {
		t.event(EventPrematureConvergence)
	}
	// Stop is a session boundary: it bypasses the trigger cooldown.
	cooled := !in.Force && in.Event != HostStop && !st.LastPhraseTrigger.IsZero() && now.Sub(st.LastPhraseTrigger) < TriggerCooldown
	if d.Any() && !cooled {
		st.LastPhraseTrigger = now
		if d.GivingUp != "" || d.Frustration != "" {
			why := "giving-up language: \u201c" + firstNonEmpty(d.GivingUp, d.Frustration) + "\u201d"
			if d.GivingUp == "" {
				why = "user frustration: \u201c" + d.Frustration + "\u201d"
			}
			e.raise(st, max(st.Pressure+1, 1), why, t)
			t.strategy = StrategyRepair
		}
		if d.LockIn != "" {
			st.Dream = true
			t.dream = true
			t.say(dreamText(d.LockIn))
			if t.strategy == "" {
				t.strategy = StrategyInnovate
			}
		}
		if d.Claim != "" {
			t.confirm = true
			text := confidenceText(d.Claim)
			if in.Event == HostStop {
				t.block = true
				t.reason = text
			} else {
				t.say(text)
			}
			if t.strategy == "" {
				t.strategy = StrategyOptimize
			}
		}
	} else if !d.Any() && st.Pressure >= HighPressure && (in.Event == HostUserPromptSubmit || in.Event == HostManual) &&
		len(t.parts) == 0 && (in.Force || st.LastHappened.IsZero() || now.Sub(st.LastHappened) >= TickCooldown) {
		t.say(runtimeText(st.Pressure, "pressure still high"))
		t.strategy = StrategyRepair
	}
	if in.Event == HostStop && st.Triggers > 0 && !t.block {
		t.say(reportText(st))
	}
}

func (e *Engine) sessionStart(st *State, in TickInput, now time.Time, t *tick) {
	if in.Source == "clear" {
		return // the user asked for a clean context
	}
	if st.Pressure > 0 || st.Failures > 0 {
		t.say(restoreText(st))
		if st.Pressure > 0 {
			t.say(runtimeText(st.Pressure, "restored pressure"))
			t.strategy = StrategyRepair
		}
		if st.Arena {
			t.say(arenaText())
		}
	}
	if c := st.Checkpoint; c != nil && now.Sub(c.At) < RestoreWindow && (in.Source == "compact" || in.Source == "resume") {
		t.say(checkpointText(c))
		if t.strategy == "" {
			t.strategy = StrategyOptimize
		}
	}
}

// TailString returns at most the last n bytes of s, cut at a rune
// boundary (n <= 0 means no limit).
func TailString(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func toolLabel(name string) string {
	if name == "" {
		return "tool"
	}
	return name
}
