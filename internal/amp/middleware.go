package amp

import (
	"context"
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/amp/guard"
)

// Middleware embeds the engine in a Go agent loop, for one session. Call
// OnPreToolUse before each tool call (and honour a denial), OnEvent for
// tool results and other lifecycle events, and OnModelOutput with each
// reply of the model.
type Middleware struct {
	engine    *Engine
	sessionID string
}

// NewMiddleware returns a Middleware for sessionID.
func NewMiddleware(e *Engine, sessionID string) *Middleware {
	return &Middleware{engine: e, sessionID: sessionID}
}

// SessionID returns the middleware's session.
func (m *Middleware) SessionID() string { return m.sessionID }

// OnEvent runs one event for the middleware's session (in.SessionID, if
// set, wins).
func (m *Middleware) OnEvent(ctx context.Context, in TickInput) (Result, error) {
	if in.SessionID == "" {
		in.SessionID = m.sessionID
	}
	return m.engine.Step(ctx, in)
}

// ToolDecision is OnPreToolUse's verdict.
type ToolDecision struct {
	Allowed  bool     `json:"allowed"`
	Reason   string   `json:"reason,omitempty"`
	Envelope Envelope `json:"amp"`
}

// OnPreToolUse checks a tool call with the guard. It fails closed: a guard
// fault denies the call. A state-store failure does not change the guard's
// verdict; it is returned as the error alongside the decision.
func (m *Middleware) OnPreToolUse(ctx context.Context, tool string, input map[string]any) (dec ToolDecision, err error) {
	defer func() {
		if p := recover(); p != nil {
			dec = ToolDecision{Allowed: false, Reason: fmt.Sprintf("%s: %v", guard.CodeGuardError, p), Envelope: denyEnvelope()}
			err = fmt.Errorf("amp: guard fault: %v", p)
		}
	}()
	verdict := guard.Check(guard.Request{Mode: m.engine.guardMode, Tool: tool, Input: input})
	r, err := m.engine.Step(ctx, TickInput{SessionID: m.sessionID, Event: HostPreToolUse, ToolName: tool, ToolInput: input})
	if err != nil {
		env := Envelope{Spec: SpecVersion, Events: []Event{}, Blocks: []Block{}, Gate: GateNone, State: EnvelopeState{Role: RoleNone}}
		if verdict.Deny {
			env = denyEnvelope()
		}
		return ToolDecision{Allowed: !verdict.Deny, Reason: verdict.Reason, Envelope: env}, err
	}
	return ToolDecision{Allowed: !r.Deny, Reason: r.Reason, Envelope: r.Envelope}, nil
}

func denyEnvelope() Envelope {
	return Envelope{Spec: SpecVersion, Events: []Event{EventFailure}, Blocks: []Block{BlockDiagnosis}, Gate: GatePreToolUse,
		State: EnvelopeState{Pressure: 0, Happened: true, Role: RoleNone}}
}

// ModelVerdict is OnModelOutput's verdict.
type ModelVerdict struct {
	// NeedsVerify is true when the reply claims completion without
	// evidence (the confidence gate) or locks in on one approach.
	NeedsVerify bool     `json:"needs_verify"`
	Injection   string   `json:"injection,omitempty"`
	Envelope    Envelope `json:"amp"`
}

// OnModelOutput checks a model reply for giving up, unverified completion
// claims and lock-in.
func (m *Middleware) OnModelOutput(ctx context.Context, text string) (ModelVerdict, error) {
	r, err := m.engine.Step(ctx, TickInput{SessionID: m.sessionID, Event: HostModelOutput, Message: text})
	if err != nil {
		return ModelVerdict{}, err
	}
	needs := r.Envelope.Gate == GateConfidence
	for _, ev := range r.Envelope.Events {
		if ev == EventPrematureConvergence {
			needs = true
		}
	}
	return ModelVerdict{NeedsVerify: needs, Injection: r.Injection, Envelope: r.Envelope}, nil
}
