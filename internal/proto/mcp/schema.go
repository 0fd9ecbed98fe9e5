package mcp

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool schemas are inferred from the Go types of each tool's input and
// output, then made portable: hosts that map tool schemas onto a dialect
// with a single "type" per schema (the OpenAPI subset of some model
// providers) reject or mangle what JSON Schema allows beyond it, and the
// MCP Inspector warns of each such construct. So:
//
//   - a Go slice, map or pointer infers {"type": ["null", X]}; every one of
//     them in these types is either left out when empty (omitempty) or
//     never nil, so it becomes {"type": X};
//   - a field of type any infers {} (anything). Part.data and a receipt's
//     reply hold any JSON value, said with one single-typed branch per
//     JSON type ({"anyOf": [{"type": "object"}, {"type": "array"}, …]}).
//
// TestToolSchemasPortable checks every tool's schemas.

var schemas sync.Map // reflect.Type → *jsonschema.Schema

// schemaFor returns the portable schema of T (cached; callers get a copy).
func schemaFor[T any]() *jsonschema.Schema {
	t := reflect.TypeFor[T]()
	if s, ok := schemas.Load(t); ok {
		return s.(*jsonschema.Schema).CloneSchemas()
	}
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %v: %v", t, err)) // a programming error: the types are ours
	}
	portable(s)
	schemas.Store(t, s)
	return s.CloneSchemas()
}

// anyJSON is the schema of any JSON value but null, one type per branch.
func anyJSON() []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, t := range []string{"object", "array", "string", "number", "boolean"} {
		out = append(out, &jsonschema.Schema{Type: t})
	}
	return out
}

// portable rewrites s in place as the package comment says.
func portable(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && (s.Types[0] == "null" || s.Types[1] == "null") {
		t := s.Types[0]
		if t == "null" {
			t = s.Types[1]
		}
		s.Types, s.Type = nil, t
	}
	if unconstrained(s) {
		s.AnyOf = anyJSON()
	}
	for _, p := range s.Properties {
		portable(p)
	}
	portable(s.Items)
	if s.AdditionalProperties != nil && !isFalse(s.AdditionalProperties) {
		portable(s.AdditionalProperties)
	}
}

// unconstrained reports whether s says nothing about the value's type.
func unconstrained(s *jsonschema.Schema) bool {
	return s.Type == "" && len(s.Types) == 0 && s.Ref == "" && len(s.AnyOf) == 0 && len(s.OneOf) == 0 &&
		len(s.AllOf) == 0 && s.Not == nil && len(s.Enum) == 0 && s.Const == nil && len(s.Properties) == 0 && s.Items == nil
}

// isFalse reports whether s is the schema false ({"not": {}}).
func isFalse(s *jsonschema.Schema) bool {
	return s.Not != nil && unconstrained(s.Not)
}
