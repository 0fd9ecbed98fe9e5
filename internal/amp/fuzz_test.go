package amp

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeEnvelope checks that decoding never panics, that it fails only
// with the package's errors, and that whatever it accepts re-encodes into
// an envelope the schema and the typed check accept.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, tc := range schemaCases {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := DecodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidEnvelope) && !errors.Is(err, ErrUnknownSpec) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if ValidateJSON(data) == nil && !errors.Is(err, ErrUnknownSpec) {
				t.Fatalf("DecodeEnvelope rejected what ValidateJSON accepts: %v", err)
			}
			return
		}
		if err := env.Validate(); err != nil {
			t.Fatalf("accepted envelope fails Validate: %v", err)
		}
		out, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateJSON(out); err != nil {
			t.Fatalf("re-encoded %s fails the schema: %v", out, err)
		}
	})
}
