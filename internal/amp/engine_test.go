package amp

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 9, 12, 10, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type harness struct {
	t     *testing.T
	e     *Engine
	clock *fakeClock
	store *MemoryStore
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	c := newFakeClock()
	s := NewMemoryStore()
	return &harness{t: t, e: New(s, append([]Option{WithClock(c)}, opts...)...), clock: c, store: s}
}

// step runs one tick, checks its envelope against the schema and returns it.
func (h *harness) step(in TickInput) Result {
	h.t.Helper()
	if in.SessionID == "" {
		in.SessionID = "s"
	}
	r, err := h.e.Step(context.Background(), in)
	if err != nil {
		h.t.Fatalf("Step(%+v): %v", in, err)
	}
	assertSchemaValid(h.t, r.Envelope)
	return r
}

func (h *harness) state() State {
	h.t.Helper()
	st, _, err := h.store.Load(context.Background(), "s")
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func intp(i int) *int    { return &i }
func boolp(b bool) *bool { return &b }

func bashFail() TickInput {
	return TickInput{Event: HostPostToolUse, ToolName: "Bash", Result: &ToolResult{ExitCode: intp(1)}}
}
func bashPass() TickInput {
	return TickInput{Event: HostPostToolUse, ToolName: "Bash", Result: &ToolResult{ExitCode: intp(0)}}
}

func events(r Result) []Event { return r.Envelope.Events }

func TestLadderLevel(t *testing.T) {
	for failures, want := range []int{0, 0, 1, 2, 3, 4, 4, 4} {
		if got := LadderLevel(failures); got != want {
			t.Errorf("LadderLevel(%d) = %d, want %d", failures, got, want)
		}
	}
}

func TestFailureLadderInjectsOnlyOnRise(t *testing.T) {
	h := newHarness(t)
	wantPressure := []int{0, 1, 2, 3, 4, 4}
	for i, want := range wantPressure {
		h.clock.Advance(time.Second) // fast failures are all counted
		r := h.step(bashFail())
		env := r.Envelope
		if !slices.Equal(env.Events, []Event{EventFailure}) {
			t.Fatalf("failure %d: events %v", i+1, env.Events)
		}
		if env.State.Pressure != want {
			t.Fatalf("failure %d: pressure %d, want %d", i+1, env.State.Pressure, want)
		}
		rose := i > 0 && want > wantPressure[i-1]
		first := i == 0 // the first failure of a run sets the diagnosis gate
		if env.State.Happened != (rose || first) || (r.Injection != "") != (rose || first) {
			t.Fatalf("failure %d: happened=%v injection=%q, want rise=%v", i+1, env.State.Happened, r.Injection, rose)
		}
		if first {
			if !strings.Contains(r.Injection, "[PUAX-DIAGNOSIS]") || env.Gate != GateDiagnosis || env.State.Role != "military-warrior" {
				t.Fatalf("first failure: %q %+v", r.Injection, env)
			}
		} else if rose {
			if !strings.Contains(r.Injection, "[PUAX-RUNTIME] pressure "+levelTitles[want]) {
				t.Fatalf("failure %d: injection %q lacks the L%d block", i+1, r.Injection, want)
			}
			if env.State.Role != "military-warrior" {
				t.Fatalf("role %q", env.State.Role)
			}
		} else if env.State.Role != RoleNone {
			t.Fatalf("silent tick role %q", env.State.Role)
		}
	}
	st := h.state()
	if st.Failures != 6 || st.TotalFailures != 6 || st.PeakPressure != 4 {
		t.Fatalf("state %+v", st)
	}
}

func TestGatesFollowPressure(t *testing.T) {
	h := newHarness(t)
	gates := []Gate{GateDiagnosis, GateDiagnosis, GateDiagnosis, GateVerify, GateVerify}
	for i, want := range gates {
		if got := h.step(bashFail()).Envelope.Gate; got != want {
			t.Fatalf("failure %d: gate %q, want %q", i+1, got, want)
		}
	}
}

func TestArenaActivatesAtL2(t *testing.T) {
	h := newHarness(t)
	h.step(bashFail())
	r := h.step(bashFail())
	if r.Envelope.State.Arena || slices.Contains(r.Envelope.Blocks, BlockArena) {
		t.Fatalf("arena at L1: %+v", r.Envelope)
	}
	r = h.step(bashFail())
	if !r.Envelope.State.Arena || !slices.Equal(r.Envelope.Blocks, []Block{BlockDiagnosis, BlockArena, BlockRuntime}) {
		t.Fatalf("L2 envelope %+v", r.Envelope)
	}
	r = h.step(bashFail()) // L3: arena stays on, its block is not repeated
	if !r.Envelope.State.Arena || slices.Contains(r.Envelope.Blocks, BlockArena) {
		t.Fatalf("L3 envelope %+v", r.Envelope)
	}
}

func TestFailureSignals(t *testing.T) {
	tests := []struct {
		name string
		in   TickInput
		fail bool
	}{
		{"non-zero exit", bashFail(), true},
		{"zero exit", bashPass(), false},
		{"missing exit code (Claude's Bash response)", TickInput{Event: HostPostToolUse, ToolName: "Bash", Result: &ToolResult{}}, false},
		{"no result at all", TickInput{Event: HostPostToolUse, ToolName: "Bash"}, false},
		{"explicit error", TickInput{Event: HostPostToolUse, ToolName: "Edit", Result: &ToolResult{Error: "old_string not found"}}, true},
		{"interrupted", TickInput{Event: HostPostToolUse, ToolName: "Bash", Result: &ToolResult{Interrupted: true}}, true},
		{"PostToolUseFailure", TickInput{Event: HostPostToolUseFailure, ToolName: "Bash"}, true},
		{"verifier false", TickInput{Event: HostPostToolUse, ToolName: "verify", Success: boolp(false)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			r := h.step(tc.in)
			if got := slices.Contains(events(r), EventFailure); got != tc.fail {
				t.Fatalf("failure event = %v, want %v", got, tc.fail)
			}
			if got := h.state().Failures; got != map[bool]int{true: 1, false: 0}[tc.fail] {
				t.Fatalf("failures = %d", got)
			}
		})
	}
}

func TestBreakthrough(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		h.step(bashFail())
	}
	// A successful Read is neutral: not a real pass.
	r := h.step(TickInput{Event: HostPostToolUse, ToolName: "Read", Result: &ToolResult{}})
	if len(events(r)) != 0 || h.state().Failures != 3 {
		t.Fatalf("neutral success changed things: %+v, state %+v", r.Envelope, h.state())
	}
	r = h.step(TickInput{Event: HostPostToolUse, ToolName: "Bash", Result: &ToolResult{}})
	env := r.Envelope
	if !slices.Equal(env.Events, []Event{EventBreakthrough}) || env.State.Pressure != 0 || !env.State.Happened {
		t.Fatalf("breakthrough envelope %+v", env)
	}
	if !strings.Contains(r.Injection, "after 3 consecutive failures; pressure L2 reset to L0") {
		t.Fatalf("injection %q", r.Injection)
	}
	st := h.state()
	if st.Failures != 0 || st.Pressure != 0 || st.Breakthroughs != 1 || st.PeakPressure != 2 {
		t.Fatalf("state %+v", st)
	}
	// The next pass is ordinary.
	if r := h.step(bashPass()); len(events(r)) != 0 || r.Envelope.State.Happened {
		t.Fatalf("second pass %+v", r.Envelope)
	}
}

func TestPassBelowThresholdOnlyEndsTheRun(t *testing.T) {
	h := newHarness(t)
	h.step(bashFail())
	h.step(bashFail()) // L1
	r := h.step(bashPass())
	if len(events(r)) != 0 || r.Envelope.State.Happened || r.Envelope.State.Pressure != 1 {
		t.Fatalf("pass after 2 failures: %+v", r.Envelope)
	}
	if st := h.state(); st.Failures != 0 || st.Pressure != 1 {
		t.Fatalf("state %+v", st)
	}
	// Consecutive: two more failures do not jump past L1 (no rise, no injection).
	h.step(bashFail())
	if r := h.step(bashFail()); r.Envelope.State.Happened || r.Envelope.State.Pressure != 1 {
		t.Fatalf("%+v", r.Envelope)
	}
}

func TestVerifierSuccessIsAPass(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		h.step(bashFail())
	}
	r := h.step(TickInput{Event: HostManual, Success: boolp(true)})
	if !slices.Equal(events(r), []Event{EventBreakthrough}) {
		t.Fatalf("verifier pass %+v", r.Envelope)
	}
}

func TestGivingUp(t *testing.T) {
	for _, msg := range []string{
		"这个问题太难了，建议放弃",
		"Honestly I think this cannot be done.",
		"I cannot do this",
		"I’m unable to fix the flaky test", // curly apostrophe
	} {
		t.Run(msg, func(t *testing.T) {
			h := newHarness(t)
			r := h.step(TickInput{Event: HostUserPromptSubmit, Message: msg})
			env := r.Envelope
			if !slices.Equal(env.Events, []Event{EventGivingUp}) || env.Gate != GateDiagnosis || env.State.Pressure != 1 ||
				!env.State.Happened || env.State.Role != "military-warrior" {
				t.Fatalf("envelope %+v", env)
			}
			if !slices.Equal(env.Blocks, []Block{BlockDiagnosis, BlockRuntime}) {
				t.Fatalf("blocks %v", env.Blocks)
			}
		})
	}
}

func TestFrustrationRaisesPressureWithoutEvent(t *testing.T) {
	h := newHarness(t)
	r := h.step(TickInput{Event: HostUserPromptSubmit, Message: "为什么还不行？"})
	if len(events(r)) != 0 || r.Envelope.State.Pressure != 1 || !strings.Contains(r.Injection, "user frustration: “为什么还不行”") {
		t.Fatalf("%+v %q", r.Envelope, r.Injection)
	}
}

func TestNeutralPromptIsSilent(t *testing.T) {
	h := newHarness(t)
	r := h.step(TickInput{Event: HostUserPromptSubmit, Message: "Please add a --verbose flag to the CLI."})
	want := Envelope{Spec: SpecVersion, Events: []Event{}, Blocks: []Block{}, Gate: GateNone, State: EnvelopeState{Role: RoleNone}}
	if !slices.Equal(r.Envelope.Events, want.Events) || r.Envelope.Gate != GateNone || r.Envelope.State != want.State || r.Injection != "" {
		t.Fatalf("%+v %q", r.Envelope, r.Injection)
	}
}

func TestTriggerCooldown(t *testing.T) {
	h := newHarness(t)
	gu := TickInput{Event: HostUserPromptSubmit, Message: "I give up"}
	if r := h.step(gu); !r.Envelope.State.Happened || r.Envelope.State.Pressure != 1 {
		t.Fatalf("first trigger %+v", r.Envelope)
	}
	h.clock.Advance(TriggerCooldown - time.Second)
	r := h.step(gu)
	if !slices.Equal(events(r), []Event{EventGivingUp}) || r.Envelope.State.Happened || r.Envelope.State.Pressure != 1 || r.Injection != "" {
		t.Fatalf("inside the cooldown: %+v %q", r.Envelope, r.Injection)
	}
	// Failures are counted inside the cooldown (the reference loses them).
	h.step(bashFail())
	h.step(bashFail())
	if st := h.state(); st.Failures != 2 {
		t.Fatalf("failures during cooldown = %d", st.Failures)
	}
	// Force bypasses it.
	if r := h.step(TickInput{Event: HostUserPromptSubmit, Message: "I give up", Force: true}); !r.Envelope.State.Happened {
		t.Fatalf("forced %+v", r.Envelope)
	}
	h.clock.Advance(TriggerCooldown)
	if r := h.step(gu); !r.Envelope.State.Happened || r.Envelope.State.Pressure != 3 {
		t.Fatalf("after the cooldown: %+v", r.Envelope)
	}
}

func TestHighPressureReminderAndTickCooldown(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		h.step(bashFail()) // L2
	}
	prompt := TickInput{Event: HostUserPromptSubmit, Message: "ok, what next?"}
	if r := h.step(prompt); r.Envelope.State.Happened {
		t.Fatalf("reminder within TickCooldown of the last injection: %+v", r.Envelope)
	}
	h.clock.Advance(TickCooldown)
	r := h.step(prompt)
	if !r.Envelope.State.Happened || r.Envelope.Gate != GateDiagnosis || !strings.Contains(r.Injection, "pressure still high") {
		t.Fatalf("reminder %+v %q", r.Envelope, r.Injection)
	}
	if r := h.step(prompt); r.Envelope.State.Happened {
		t.Fatal("reminder repeated inside TickCooldown")
	}
}

func TestCompletionClaims(t *testing.T) {
	tests := []struct {
		name, text string
		gate       Gate
		event      bool
	}{
		{"zh claim", "我觉得应该修复好了，没有其他问题了", GateConfidence, true},
		{"en claim", "All tests passed, ready to merge.", GateConfidence, true},
		{"claim with PASS evidence", "All tests passed:\n--- PASS: TestX (0.00s)\nPASS", GateNone, false},
		{"claim with 验证步骤", "应该修复好了。验证步骤：go test ./... 全绿", GateNone, false},
		{"no claim", "I am reading the parser now.", GateNone, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			r := h.step(TickInput{Event: HostModelOutput, Message: tc.text})
			if r.Envelope.Gate != tc.gate || slices.Contains(events(r), EventPrematureConvergence) != tc.event {
				t.Fatalf("%+v", r.Envelope)
			}
			if tc.event && !strings.Contains(r.Injection, "AMP confidence gate") {
				t.Fatalf("injection %q", r.Injection)
			}
		})
	}
}

func TestLockInStartsDream(t *testing.T) {
	h := newHarness(t)
	r := h.step(TickInput{Event: HostModelOutput, Message: "This is the only way to do it."})
	env := r.Envelope
	if !slices.Equal(env.Events, []Event{EventPrematureConvergence}) || !slices.Equal(env.Blocks, []Block{BlockDream}) ||
		!env.State.Dream || env.State.Role != "shaman-musk" || env.Gate != GateNone {
		t.Fatalf("%+v", env)
	}
	if !h.state().Dream {
		t.Fatal("dream not persisted")
	}
	for range 3 {
		h.step(bashFail())
	}
	if r := h.step(bashPass()); r.Envelope.State.Dream || h.state().Dream {
		t.Fatal("breakthrough should end the dream route")
	}
}

func TestStopConfidenceGate(t *testing.T) {
	h := newHarness(t)
	claim := "Done! The fix is complete and everything works."
	r := h.step(TickInput{Event: HostStop, Message: claim})
	if !r.Block || r.Envelope.Gate != GateConfidence || !strings.HasPrefix(r.Reason, "AMP confidence gate") || r.Injection != "" {
		t.Fatalf("%+v", r)
	}
	// Stop bypasses the trigger cooldown, but not stop_hook_active.
	r = h.step(TickInput{Event: HostStop, Message: claim, StopHookActive: true})
	if r.Block || r.Envelope.Gate != GateConfidence && len(events(r)) != 0 {
		t.Fatalf("stop_hook_active: %+v", r)
	}
	if r.Block || len(events(r)) != 0 {
		t.Fatalf("stop_hook_active must not detect or block: %+v", r)
	}
	// A plain Stop after activity gives the session report.
	r = h.step(TickInput{Event: HostStop, Message: "Here is the summary of the change."})
	if r.Block || !slices.Equal(r.Envelope.Blocks, []Block{BlockReport}) ||
		!strings.Contains(r.Injection, "[PUAX-REPORT] Session report: peak pressure L0, 0 failures, 1 triggers") {
		t.Fatalf("%+v %q", r.Envelope, r.Injection)
	}
}

func TestCompactionCheckpointAndRestore(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		h.step(bashFail())
	}
	r := h.step(TickInput{Event: HostPreCompact, Trigger: "auto", Summary: "Hypothesis: the cache key ignores the locale."})
	if !slices.Equal(events(r), []Event{EventCompaction}) || r.Envelope.State.Happened || r.Injection != "" ||
		r.Envelope.State.Pressure != 2 {
		t.Fatalf("precompact %+v", r.Envelope)
	}
	cp := h.state().Checkpoint
	if cp == nil || cp.Pressure != 2 || cp.Failures != 3 || cp.Trigger != "auto" || !strings.Contains(cp.Summary, "cache key") {
		t.Fatalf("checkpoint %+v", cp)
	}
	h.clock.Advance(10 * time.Minute)
	r = h.step(TickInput{Event: HostSessionStart, Source: "compact"})
	for _, want := range []string{
		"[PUAX 会话恢复] Session restored: pressure L2, 3 consecutive failures",
		"[PUAX-RUNTIME] pressure L2 换框 reframe · restored pressure",
		"[PUAX-ARENA]",
		"[PUAX 断点恢复] Checkpoint from compaction (auto) at 2026-09-12T10:00:00Z: pressure L2, 3 consecutive failures.",
		"Hypothesis: the cache key ignores the locale.",
	} {
		if !strings.Contains(r.Injection, want) {
			t.Fatalf("restore lacks %q:\n%s", want, r.Injection)
		}
	}
	if !r.Envelope.State.Happened || !r.Envelope.State.Arena {
		t.Fatalf("%+v", r.Envelope)
	}
	// After the restore window the summary is no longer injected.
	h.clock.Advance(RestoreWindow)
	if r := h.step(TickInput{Event: HostSessionStart, Source: "resume"}); strings.Contains(r.Injection, "断点恢复") {
		t.Fatalf("stale checkpoint restored: %s", r.Injection)
	}
	// "clear" asks for a clean context.
	if r := h.step(TickInput{Event: HostSessionStart, Source: "clear"}); r.Injection != "" {
		t.Fatalf("clear injected %q", r.Injection)
	}
}

func TestFreshSessionStartIsSilent(t *testing.T) {
	h := newHarness(t)
	if r := h.step(TickInput{Event: HostSessionStart, Source: "startup"}); r.Envelope.State.Happened || r.Injection != "" {
		t.Fatalf("%+v", r)
	}
}

func TestPreToolUseDeny(t *testing.T) {
	h := newHarness(t)
	r := h.step(TickInput{Event: HostPreToolUse, ToolName: "Bash", ToolInput: map[string]any{"command": "git reset --hard HEAD"}})
	env := r.Envelope
	if !r.Deny || env.Gate != GatePreToolUse || !slices.Equal(env.Events, []Event{EventFailure}) ||
		!slices.Equal(env.Blocks, []Block{BlockDiagnosis}) || env.State.Role != RoleNone || !env.State.Happened {
		t.Fatalf("%+v", r)
	}
	if st := h.state(); st.Denials != 1 || st.Failures != 0 {
		t.Fatalf("a denial is not a tool failure: %+v", st)
	}
	r = h.step(TickInput{Event: HostPreToolUse, ToolName: "Read", ToolInput: map[string]any{"file_path": "src/index.ts"}})
	if r.Deny || r.Envelope.Gate != GateNone || r.Envelope.State.Happened {
		t.Fatalf("%+v", r)
	}
}

func TestStepErrors(t *testing.T) {
	e := New(NewMemoryStore())
	if _, err := e.Step(context.Background(), TickInput{SessionID: "s", Event: "Nope"}); !errors.Is(err, ErrUnknownEvent) {
		t.Fatalf("unknown event: %v", err)
	}
	if _, err := e.Step(context.Background(), TickInput{}); !errors.Is(err, ErrEmptySession) {
		t.Fatalf("empty session: %v", err)
	}
	env, err := e.Tick(context.Background(), TickInput{SessionID: "s", Event: "user-prompt", Message: "hi"})
	if err != nil || env.Spec != SpecVersion {
		t.Fatalf("kebab-case event: %v %+v", err, env)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Tick(ctx, TickInput{SessionID: "s"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestRoleSelectorIsPluggable(t *testing.T) {
	h := newHarness(t, WithRoleSelector(func(s Strategy, _ State) string { return "custom-" + string(s) }))
	h.step(bashFail())
	if r := h.step(bashFail()); r.Envelope.State.Role != "custom-repair" {
		t.Fatalf("role %q", r.Envelope.State.Role)
	}
}

func TestSessionsAreIndependent(t *testing.T) {
	h := newHarness(t)
	h.step(bashFail())
	h.step(bashFail())
	other := bashFail()
	other.SessionID = "other"
	if r := h.step(other); r.Envelope.State.Pressure != 0 {
		t.Fatalf("pressure leaked across sessions: %+v", r.Envelope)
	}
}

func TestMiddleware(t *testing.T) {
	h := newHarness(t)
	m := NewMiddleware(h.e, "s")
	ctx := context.Background()
	d, err := m.OnPreToolUse(ctx, "Bash", map[string]any{"command": "rm -rf .git"})
	if err != nil || d.Allowed || d.Envelope.Gate != GatePreToolUse || !strings.Contains(d.Reason, "DESTRUCTIVE_BLOCK") {
		t.Fatalf("%+v %v", d, err)
	}
	d, err = m.OnPreToolUse(ctx, "ReadFile", map[string]any{"path": "test/hidden/secret.key"})
	if err != nil || d.Allowed {
		t.Fatalf("hidden file allowed: %+v %v", d, err)
	}
	d, err = m.OnPreToolUse(ctx, "ReadFile", map[string]any{"path": "src/index.ts"})
	if err != nil || !d.Allowed {
		t.Fatalf("normal file denied: %+v %v", d, err)
	}
	v, err := m.OnModelOutput(ctx, "我觉得应该修复好了，没有其他问题了")
	if err != nil || !v.NeedsVerify || !slices.Contains(v.Envelope.Events, EventPrematureConvergence) {
		t.Fatalf("%+v %v", v, err)
	}
	h.clock.Advance(TriggerCooldown)
	v, err = m.OnModelOutput(ctx, "我无法完成，没有办法了")
	if err != nil || !slices.Contains(v.Envelope.Events, EventGivingUp) {
		t.Fatalf("%+v %v", v, err)
	}
	r, err := m.OnEvent(ctx, TickInput{Event: HostPreCompact})
	if err != nil || !slices.Equal(r.Envelope.Events, []Event{EventCompaction}) {
		t.Fatalf("%+v %v", r, err)
	}
}

// failingStore fails every operation.
type failingStore struct{}

var errStore = errors.New("store down")

func (failingStore) Load(context.Context, string) (State, bool, error) {
	return State{}, false, errStore
}
func (failingStore) Update(context.Context, string, func(*State) error) error {
	return errStore
}

func TestMiddlewareGuardSurvivesStoreFailure(t *testing.T) {
	m := NewMiddleware(New(failingStore{}), "s")
	d, err := m.OnPreToolUse(context.Background(), "Bash", map[string]any{"command": "git clean -fdx"})
	if !errors.Is(err, errStore) || d.Allowed || d.Envelope.Gate != GatePreToolUse {
		t.Fatalf("%+v %v", d, err)
	}
	d, err = m.OnPreToolUse(context.Background(), "Bash", map[string]any{"command": "go test ./..."})
	if !errors.Is(err, errStore) || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
}

// countingStore counts Updates, to check the lock-free fast path.
type countingStore struct {
	*MemoryStore
	updates int
}

func (c *countingStore) Update(ctx context.Context, id string, fn func(*State) error) error {
	c.updates++
	return c.MemoryStore.Update(ctx, id, fn)
}

func TestNeutralTicksSkipTheWrite(t *testing.T) {
	cs := &countingStore{MemoryStore: NewMemoryStore()}
	e := New(cs, WithClock(newFakeClock()))
	ctx := context.Background()
	step := func(in TickInput) {
		t.Helper()
		in.SessionID = "s"
		if _, err := e.Step(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	step(bashPass()) // first tick of a session: StartedAt is written
	if cs.updates != 1 {
		t.Fatalf("updates %d", cs.updates)
	}
	step(bashPass())
	step(TickInput{Event: HostUserPromptSubmit, Message: "add a flag"})
	step(TickInput{Event: HostPreToolUse, ToolName: "Read", ToolInput: map[string]any{"file_path": "a.go"}})
	if cs.updates != 1 {
		t.Fatalf("neutral ticks wrote the state: %d updates", cs.updates)
	}
	step(bashFail())
	if cs.updates != 2 {
		t.Fatalf("a failure was not written: %d updates", cs.updates)
	}
}

func TestReferenceFidelity(t *testing.T) {
	no := false
	cases := []struct {
		name   string
		in     TickInput
		events []Event
		inject bool
		err    error
	}{
		{"lock-in phrase in a prompt", TickInput{Event: HostUserPromptSubmit, Message: "Just do it, this is the only way."},
			[]Event{EventPrematureConvergence}, true, nil},
		{"detected giving_up_language", TickInput{Event: HostUserPromptSubmit, DetectedTriggers: []string{"giving_up_language"}},
			[]Event{EventGivingUp}, true, nil},
		{"detected premature_convergence", TickInput{Event: HostManual, DetectedTriggers: []string{"premature_convergence"}},
			[]Event{EventPrematureConvergence}, true, nil},
		{"detected camelCase bashFailure", TickInput{Event: HostManual, DetectedTriggers: []string{"bashFailure"}},
			[]Event{EventFailure}, true, nil},
		{"ignored reference trigger", TickInput{Event: HostManual, DetectedTriggers: []string{"surface_fix"}},
			[]Event{}, false, nil},
		{"unknown trigger", TickInput{Event: HostManual, DetectedTriggers: []string{"bored"}}, nil, false, ErrUnknownTrigger},
		{"stop with success false is silent", TickInput{Event: HostStop, Success: &no}, []Event{}, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			c.in.SessionID = "s"
			r, err := h.e.Step(context.Background(), c.in)
			if !errors.Is(err, c.err) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			if err != nil {
				return
			}
			if !slices.Equal(r.Envelope.Events, c.events) || (r.Injection != "") != c.inject {
				t.Fatalf("events %v injection %q; want %v inject=%v", r.Envelope.Events, r.Injection, c.events, c.inject)
			}
			if c.in.Event == HostStop {
				if st := h.state(); st.Failures != 0 || st.TotalFailures != 0 {
					t.Fatalf("a Stop tick counted a failure: %+v", st)
				}
			}
		})
	}
}
