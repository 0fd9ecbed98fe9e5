package jsonvalue_test

import (
	"testing"

	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

func TestEqual(t *testing.T) {
	cases := []struct {
		a, b  string
		equal bool
	}{
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, true},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`{"a":1}`, `{"b":1}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`[1,2]`, `[1,2,3]`, false},
		{`1`, `1.0`, true},
		{`0.5`, `5e-1`, true},
		{`-0`, `0`, true},
		{`1`, `2`, false},
		{`1`, `"1"`, false},
		{`"a"`, `"a"`, true},
		{`"a"`, `"b"`, false},
		{`true`, `true`, true},
		{`true`, `false`, false},
		{`null`, `null`, true},
		{`null`, `false`, false},
		{`{}`, `[]`, false},
		{`{"a":{"b":[{"c":1}]}}`, `{"a":{"b":[{"c":1.0}]}}`, true},
		{`{"a":{"b":[{"c":1}]}}`, `{"a":{"b":[{"c":2}]}}`, false},
		{`1e400`, `1e400`, true}, // the same text, though out of float64's range
		{`1e400`, `1e401`, false},
	}
	for _, c := range cases {
		a, err := jsonvalue.Decode([]byte(c.a))
		if err != nil {
			t.Fatalf("decode %s: %v", c.a, err)
		}
		b, err := jsonvalue.Decode([]byte(c.b))
		if err != nil {
			t.Fatalf("decode %s: %v", c.b, err)
		}
		if got := jsonvalue.Equal(a, b); got != c.equal {
			t.Errorf("Equal(%s, %s) = %v, want %v", c.a, c.b, got, c.equal)
		}
		if got := jsonvalue.Equal(b, a); got != c.equal {
			t.Errorf("Equal(%s, %s) = %v, want %v", c.b, c.a, got, c.equal)
		}
	}
}
