package amp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const validEnvelope = `{"spec":"AMP/0.1","events":["failure"],"blocks":["[PUAX-RUNTIME]","[PUAX-ARENA]","[PUAX-DIAGNOSIS]"],"gate":"diagnosis","state":{"pressure":2,"arena":true,"dream":false,"happened":true,"role":"military-warrior"}}`

var schemaCases = []struct {
	name string
	doc  string
	want error // nil: accepted
}{
	{"spec example", validEnvelope, nil},
	{"silent tick", `{"spec":"AMP/0.1","events":[],"blocks":[],"gate":"none","state":{"pressure":0,"arena":false,"dream":false,"happened":false,"role":"none"}}`, nil},
	{"unknown fields ignored", `{"spec":"AMP/0.1","extra":{"x":1},"events":["breakthrough"],"blocks":[],"gate":"confidence","state":{"pressure":4,"arena":false,"dream":true,"happened":true,"role":"r","mood":"ok"}}`, nil},
	{"free event strings", `{"spec":"AMP/0.1","events":["custom_event"],"blocks":["[X]"],"gate":"verify","state":{"pressure":3,"arena":false,"dream":false,"happened":true,"role":"r"}}`, nil},
	{"integer written as 2.0", `{"spec":"AMP/0.1","events":[],"blocks":[],"gate":"pretooluse","state":{"pressure":2.0,"arena":false,"dream":false,"happened":true,"role":"none"}}`, nil},
	{"spec alone", `{"spec":"AMP/0.1"}`, ErrInvalidEnvelope},
	{"unknown spec", strings.Replace(validEnvelope, "AMP/0.1", "AMP/0.2-unreleased", 1), ErrUnknownSpec},
	{"numeric spec", strings.Replace(validEnvelope, `"AMP/0.1"`, `1`, 1), ErrUnknownSpec},
	{"bad gate", strings.Replace(validEnvelope, `"diagnosis"`, `"open"`, 1), ErrInvalidEnvelope},
	{"pressure 9", strings.Replace(validEnvelope, `"pressure":2`, `"pressure":9`, 1), ErrInvalidEnvelope},
	{"pressure -1", strings.Replace(validEnvelope, `"pressure":2`, `"pressure":-1`, 1), ErrInvalidEnvelope},
	{"pressure 1.5", strings.Replace(validEnvelope, `"pressure":2`, `"pressure":1.5`, 1), ErrInvalidEnvelope},
	{"pressure string", strings.Replace(validEnvelope, `"pressure":2`, `"pressure":"2"`, 1), ErrInvalidEnvelope},
	{"empty role", strings.Replace(validEnvelope, `"military-warrior"`, `""`, 1), ErrInvalidEnvelope},
	{"missing role", strings.Replace(validEnvelope, `,"role":"military-warrior"`, ``, 1), ErrInvalidEnvelope},
	{"object blocks (4.0.0 form)", strings.Replace(validEnvelope, `["[PUAX-RUNTIME]","[PUAX-ARENA]","[PUAX-DIAGNOSIS]"]`, `{"runtime":true}`, 1), ErrInvalidEnvelope},
	{"object gate", strings.Replace(validEnvelope, `"diagnosis"`, `{"name":"diagnosis"}`, 1), ErrInvalidEnvelope},
	{"event not a string", strings.Replace(validEnvelope, `["failure"]`, `[1]`, 1), ErrInvalidEnvelope},
	{"arena not boolean", strings.Replace(validEnvelope, `"arena":true`, `"arena":"yes"`, 1), ErrInvalidEnvelope},
	{"state not object", `{"spec":"AMP/0.1","events":[],"blocks":[],"gate":"none","state":[]}`, ErrInvalidEnvelope},
	{"not an object", `[]`, ErrInvalidEnvelope},
	{"malformed", `{"spec":`, ErrInvalidEnvelope},
	{"trailing data", validEnvelope + ` {}`, ErrInvalidEnvelope},
	{"stray brace", validEnvelope + `}`, ErrInvalidEnvelope},
	{"stray bracket", validEnvelope + ` ]`, ErrInvalidEnvelope},
}

func TestValidateJSONAndDecode(t *testing.T) {
	for _, tc := range schemaCases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateJSON([]byte(tc.doc))
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("ValidateJSON = %v, want %v", err, tc.want)
			}
			env, err := DecodeEnvelope([]byte(tc.doc))
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("DecodeEnvelope = %v, want %v", err, tc.want)
			}
			if tc.want == nil {
				// A decoded envelope passes the typed check and re-encodes valid.
				if err := env.Validate(); err != nil {
					t.Fatalf("Validate after decode: %v", err)
				}
				assertSchemaValid(t, env)
			}
		})
	}
}

func TestDecodeKeepsFields(t *testing.T) {
	env, err := DecodeEnvelope([]byte(validEnvelope))
	if err != nil {
		t.Fatal(err)
	}
	want := Envelope{Spec: SpecVersion, Events: []Event{EventFailure}, Blocks: []Block{BlockRuntime, BlockArena, BlockDiagnosis},
		Gate: GateDiagnosis, State: EnvelopeState{Pressure: 2, Arena: true, Happened: true, Role: "military-warrior"}}
	got, _ := json.Marshal(env)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Fatalf("decoded %s, want %s", got, exp)
	}
}

func TestTypedValidate(t *testing.T) {
	ok := Envelope{Spec: SpecVersion, Events: []Event{}, Blocks: []Block{}, Gate: GateNone, State: EnvelopeState{Role: RoleNone}}
	tests := []struct {
		name   string
		mutate func(*Envelope)
		want   error
	}{
		{"ok", func(*Envelope) {}, nil},
		{"spec", func(e *Envelope) { e.Spec = "AMP/1.0" }, ErrUnknownSpec},
		{"nil events", func(e *Envelope) { e.Events = nil }, ErrInvalidEnvelope},
		{"nil blocks", func(e *Envelope) { e.Blocks = nil }, ErrInvalidEnvelope},
		{"gate", func(e *Envelope) { e.Gate = "open" }, ErrInvalidEnvelope},
		{"pressure", func(e *Envelope) { e.State.Pressure = 5 }, ErrInvalidEnvelope},
		{"role", func(e *Envelope) { e.State.Role = "" }, ErrInvalidEnvelope},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := ok
			tc.mutate(&e)
			err := e.Validate()
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			// The typed check and the schema agree (nil slices marshal as []).
			if tc.name != "nil events" && tc.name != "nil blocks" {
				data, _ := json.Marshal(e)
				if serr := ValidateJSON(data); (serr == nil) != (err == nil) {
					t.Fatalf("schema says %v, Validate says %v for %s", serr, err, data)
				}
			}
		})
	}
}

func TestSchemaCompiler(t *testing.T) {
	if _, err := compiledSchema(); err != nil {
		t.Fatalf("embedded schema: %v", err)
	}
	if string(EnvelopeSchema()) != string(envelopeSchema) {
		t.Fatal("EnvelopeSchema differs from the embedded bytes")
	}
	for _, bad := range []string{
		`{"type":"object","patternProperties":{}}`,
		`{"type":"object","properties":{"a":{"oneOf":[]}}}`,
		`{"type":"tuple"}`,
		`{"type":"array","items":{"format":"x"}}`,
	} {
		if _, err := compileSchema([]byte(bad)); err == nil {
			t.Errorf("compileSchema(%s) accepted an unsupported construct", bad)
		}
	}
	n, err := compileSchema([]byte(`{"type":"object","properties":{"a":{"type":"number"}},"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.validate(map[string]any{"b": true}, "$"); !errors.Is(err, ErrInvalidEnvelope) {
		t.Fatalf("additionalProperties:false not enforced: %v", err)
	}
}

func TestSpecDocument(t *testing.T) {
	d, err := Spec()
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec != SpecVersion {
		t.Fatalf("spec = %q", d.Spec)
	}
	eq := func(name string, got, want []string) {
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	toS := func(n int, f func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	eq("events", toS(len(d.Objects.Events), func(i int) string { return string(d.Objects.Events[i]) }),
		toS(len(Events), func(i int) string { return string(Events[i]) }))
	eq("blocks", toS(len(d.Objects.Blocks), func(i int) string { return string(d.Objects.Blocks[i]) }),
		toS(len(Blocks), func(i int) string { return string(Blocks[i]) }))
	eq("gates", toS(len(d.Objects.Gates), func(i int) string { return string(d.Objects.Gates[i]) }),
		toS(len(Gates), func(i int) string { return string(Gates[i]) }))
	if d.Endpoints["mcp_resource"] != SpecResourceURI {
		t.Errorf("mcp_resource = %q, want %q", d.Endpoints["mcp_resource"], SpecResourceURI)
	}
}

// assertSchemaValid marshals e and validates it against the embedded schema.
func assertSchemaValid(t *testing.T, e Envelope) {
	t.Helper()
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateJSON(data); err != nil {
		t.Fatalf("envelope %s fails the schema: %v", data, err)
	}
}
