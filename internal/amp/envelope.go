// Package amp implements the AMP 0.1 "agent motivation protocol" engine:
// deterministic detection of failures, giving up and premature convergence,
// a per-session pressure ladder, and the envelope every tick produces.
//
// The engine is pure apart from its StateStore and its Clock, both injected,
// so its rules are testable with a fake clock. Hosts reach it through the
// hook adapter (package hook), the HTTP face (package ampapi), the Go
// Middleware, or Engine.Tick directly.
package amp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// SpecVersion is the only value of the envelope's spec discriminator that
// this package accepts.
const SpecVersion = "AMP/0.1"

// Event is an AMP event code.
type Event string

// The closed set of AMP 0.1 events.
const (
	EventFailure              Event = "failure"
	EventGivingUp             Event = "giving_up"
	EventPrematureConvergence Event = "premature_convergence"
	EventBreakthrough         Event = "breakthrough"
	EventCompaction           Event = "compaction"
)

// Events lists the AMP 0.1 events in protocol order.
var Events = []Event{EventFailure, EventGivingUp, EventPrematureConvergence, EventBreakthrough, EventCompaction}

// Block is an AMP commitment block tag as it appears in injected text.
type Block string

// The AMP 0.1 blocks this engine emits, in canonical (envelope) order.
const (
	BlockDiagnosis Block = "[PUAX-DIAGNOSIS]"
	BlockDream     Block = "[DREAM]"
	BlockReport    Block = "[PUAX-REPORT]"
	BlockArena     Block = "[PUAX-ARENA]"
	BlockRuntime   Block = "[PUAX-RUNTIME]"
)

// Blocks lists the blocks in the order an envelope reports them.
var Blocks = []Block{BlockDiagnosis, BlockDream, BlockReport, BlockArena, BlockRuntime}

// Gate is an AMP gate.
type Gate string

// The five AMP 0.1 gates.
const (
	GateNone       Gate = "none"
	GateDiagnosis  Gate = "diagnosis"
	GateConfidence Gate = "confidence"
	GateVerify     Gate = "verify"
	GatePreToolUse Gate = "pretooluse"
)

// Gates lists the AMP 0.1 gates.
var Gates = []Gate{GateNone, GateDiagnosis, GateConfidence, GateVerify, GatePreToolUse}

// Valid reports whether g is one of the five gates.
func (g Gate) Valid() bool {
	for _, x := range Gates {
		if g == x {
			return true
		}
	}
	return false
}

// RoleNone is the role reported when no role was selected.
const RoleNone = "none"

// MaxPressure is the top of the pressure ladder (L0–L4).
const MaxPressure = 4

// Envelope is the AMP 0.1 wire object produced by every tick.
type Envelope struct {
	Spec   string        `json:"spec"`
	Events []Event       `json:"events"`
	Blocks []Block       `json:"blocks"`
	Gate   Gate          `json:"gate"`
	State  EnvelopeState `json:"state"`
}

// EnvelopeState is the state vector carried in an envelope.
type EnvelopeState struct {
	Pressure int    `json:"pressure"`
	Arena    bool   `json:"arena"`
	Dream    bool   `json:"dream"`
	Happened bool   `json:"happened"`
	Role     string `json:"role"`
}

// Errors returned by envelope decoding and validation; match with errors.Is.
var (
	// ErrUnknownSpec means the spec discriminator is not AMP/0.1; the
	// whole envelope must be rejected.
	ErrUnknownSpec = errors.New("amp: unknown spec")
	// ErrInvalidEnvelope means the document does not satisfy the schema.
	ErrInvalidEnvelope = errors.New("amp: invalid envelope")
)

// Validate checks e against the AMP 0.1 envelope rules (the same
// constraints as the embedded schema, on the typed value).
func (e Envelope) Validate() error {
	if e.Spec != SpecVersion {
		return fmt.Errorf("%w: %q", ErrUnknownSpec, e.Spec)
	}
	switch {
	case e.Events == nil:
		return fmt.Errorf("%w: events is missing", ErrInvalidEnvelope)
	case e.Blocks == nil:
		return fmt.Errorf("%w: blocks is missing", ErrInvalidEnvelope)
	case !e.Gate.Valid():
		return fmt.Errorf("%w: gate %q is not one of none, diagnosis, confidence, verify, pretooluse", ErrInvalidEnvelope, e.Gate)
	case e.State.Pressure < 0 || e.State.Pressure > MaxPressure:
		return fmt.Errorf("%w: state.pressure %d is outside 0–4", ErrInvalidEnvelope, e.State.Pressure)
	case e.State.Role == "":
		return fmt.Errorf("%w: state.role is empty", ErrInvalidEnvelope)
	}
	return nil
}

// MarshalJSON encodes the envelope with empty (never null) arrays.
func (e Envelope) MarshalJSON() ([]byte, error) {
	type plain Envelope
	p := plain(e)
	if p.Events == nil {
		p.Events = []Event{}
	}
	if p.Blocks == nil {
		p.Blocks = []Block{}
	}
	return json.Marshal(p)
}

// DecodeEnvelope parses and validates an AMP 0.1 envelope. Unknown fields
// are ignored; an envelope whose spec is not AMP/0.1 is rejected with
// ErrUnknownSpec, any other schema violation with ErrInvalidEnvelope.
func DecodeEnvelope(data []byte) (Envelope, error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	if !atEnd(dec) {
		return Envelope{}, fmt.Errorf("%w: trailing data after the JSON value", ErrInvalidEnvelope)
	}
	if obj, ok := doc.(map[string]any); ok {
		if s, present := obj["spec"]; present && s != SpecVersion {
			return Envelope{}, fmt.Errorf("%w: %v", ErrUnknownSpec, s)
		}
	}
	if err := validateValue(doc); err != nil {
		return Envelope{}, err
	}
	return fromValidated(doc.(map[string]any)), nil
}

// fromValidated builds an Envelope from a document that passed the schema
// (so every type assertion holds; 2.0 is a valid integer pressure).
func fromValidated(obj map[string]any) Envelope {
	e := Envelope{Spec: SpecVersion, Events: []Event{}, Blocks: []Block{}}
	for _, v := range obj["events"].([]any) {
		e.Events = append(e.Events, Event(v.(string)))
	}
	for _, v := range obj["blocks"].([]any) {
		e.Blocks = append(e.Blocks, Block(v.(string)))
	}
	e.Gate = Gate(obj["gate"].(string))
	st := obj["state"].(map[string]any)
	p, _ := st["pressure"].(json.Number).Float64()
	e.State = EnvelopeState{
		Pressure: int(p),
		Arena:    st["arena"].(bool),
		Dream:    st["dream"].(bool),
		Happened: st["happened"].(bool),
		Role:     st["role"].(string),
	}
	return e
}
