package amp

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

//go:embed amp-envelope.schema.json
var envelopeSchema []byte

// EnvelopeSchema returns the embedded JSON Schema (draft-07) of the AMP 0.1
// envelope, byte for byte as published.
func EnvelopeSchema() []byte { return bytes.Clone(envelopeSchema) }

// ValidateJSON validates a JSON document against the embedded envelope
// schema. It reports the first violation found, wrapped in
// ErrInvalidEnvelope (or ErrUnknownSpec for a wrong spec constant).
func ValidateJSON(data []byte) error {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	if !atEnd(dec) {
		return fmt.Errorf("%w: trailing data after the JSON value", ErrInvalidEnvelope)
	}
	return validateValue(doc)
}

// atEnd reports whether only white space follows the value dec decoded.
// (More would let a stray } or ] through.)
func atEnd(dec *json.Decoder) bool {
	_, err := dec.Token()
	return err == io.EOF
}

// validateValue validates a value decoded with UseNumber.
func validateValue(doc any) error {
	root, err := compiledSchema()
	if err != nil {
		return err
	}
	return root.validate(doc, "$")
}

// schemaNode is the subset of draft-07 the envelope schema uses: type,
// required, properties, additionalProperties (boolean or schema), items,
// const, enum, minimum, maximum, minLength. Annotation keywords are
// accepted and ignored; any other keyword is a compile error, so the schema
// cannot grow a construct this validator silently skips.
type schemaNode struct {
	Type                 string                 `json:"type"`
	Required             []string               `json:"required"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties json.RawMessage        `json:"additionalProperties"`
	Items                *schemaNode            `json:"items"`
	Const                json.RawMessage        `json:"const"`
	Enum                 []json.RawMessage      `json:"enum"`
	Minimum              *float64               `json:"minimum"`
	Maximum              *float64               `json:"maximum"`
	MinLength            *int                   `json:"minLength"`

	additional     *schemaNode // compiled additionalProperties schema
	noAdditional   bool        // additionalProperties: false
	constValue     any
	hasConst       bool
	enumValues     []any
	propertyOrders []string
}

var knownKeywords = map[string]bool{
	"$schema": true, "$id": true, "title": true, "description": true, "$comment": true,
	"type": true, "required": true, "properties": true, "additionalProperties": true,
	"items": true, "const": true, "enum": true, "minimum": true, "maximum": true, "minLength": true,
}

var compiledSchema = sync.OnceValues(func() (*schemaNode, error) {
	return compileSchema(envelopeSchema)
})

// compileSchema parses a schema in the supported subset.
func compileSchema(data []byte) (*schemaNode, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("amp: schema: %w", err)
	}
	for k := range raw {
		if !knownKeywords[k] {
			return nil, fmt.Errorf("amp: schema: unsupported keyword %q", k)
		}
	}
	var n schemaNode
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("amp: schema: %w", err)
	}
	switch n.Type {
	case "", "object", "array", "string", "integer", "number", "boolean", "null":
	default:
		return nil, fmt.Errorf("amp: schema: unsupported type %q", n.Type)
	}
	if rawProps, ok := raw["properties"]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(rawProps, &props); err != nil {
			return nil, fmt.Errorf("amp: schema: properties: %w", err)
		}
		n.Properties = make(map[string]*schemaNode, len(props))
		for name, p := range props {
			c, err := compileSchema(p)
			if err != nil {
				return nil, fmt.Errorf("%w (in property %q)", err, name)
			}
			n.Properties[name] = c
			n.propertyOrders = append(n.propertyOrders, name)
		}
		sort.Strings(n.propertyOrders)
	}
	if rawItems, ok := raw["items"]; ok {
		c, err := compileSchema(rawItems)
		if err != nil {
			return nil, fmt.Errorf("%w (in items)", err)
		}
		n.Items = c
	}
	if len(n.AdditionalProperties) > 0 {
		switch string(bytes.TrimSpace(n.AdditionalProperties)) {
		case "true":
		case "false":
			n.noAdditional = true
		default:
			c, err := compileSchema(n.AdditionalProperties)
			if err != nil {
				return nil, fmt.Errorf("%w (in additionalProperties)", err)
			}
			n.additional = c
		}
	}
	if len(n.Const) > 0 {
		v, err := decodeNumberJSON(n.Const)
		if err != nil {
			return nil, fmt.Errorf("amp: schema: const: %w", err)
		}
		n.constValue, n.hasConst = v, true
	}
	for _, e := range n.Enum {
		v, err := decodeNumberJSON(e)
		if err != nil {
			return nil, fmt.Errorf("amp: schema: enum: %w", err)
		}
		n.enumValues = append(n.enumValues, v)
	}
	return &n, nil
}

func decodeNumberJSON(data []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := dec.Decode(&v)
	return v, err
}

func (n *schemaNode) validate(v any, at string) error {
	if n.Type != "" && !hasType(v, n.Type) {
		return fmt.Errorf("%w: %s: expected %s, got %s", ErrInvalidEnvelope, at, n.Type, typeName(v))
	}
	if n.hasConst && !jsonvalue.Equal(v, n.constValue) {
		if at == "$.spec" {
			return fmt.Errorf("%w: %s is %v, want %v", ErrUnknownSpec, at, v, n.constValue)
		}
		return fmt.Errorf("%w: %s must equal %v", ErrInvalidEnvelope, at, n.constValue)
	}
	if n.enumValues != nil {
		ok := false
		for _, e := range n.enumValues {
			if jsonvalue.Equal(v, e) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%w: %s: %v is not an allowed value", ErrInvalidEnvelope, at, v)
		}
	}
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidEnvelope, at, err)
		}
		if n.Minimum != nil && f < *n.Minimum {
			return fmt.Errorf("%w: %s: %v is below the minimum %v", ErrInvalidEnvelope, at, x, *n.Minimum)
		}
		if n.Maximum != nil && f > *n.Maximum {
			return fmt.Errorf("%w: %s: %v is above the maximum %v", ErrInvalidEnvelope, at, x, *n.Maximum)
		}
	case string:
		if n.MinLength != nil && utf8.RuneCountInString(x) < *n.MinLength {
			return fmt.Errorf("%w: %s: shorter than %d characters", ErrInvalidEnvelope, at, *n.MinLength)
		}
	case []any:
		if n.Items != nil {
			for i, item := range x {
				if err := n.Items.validate(item, at+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		for _, r := range n.Required {
			if _, ok := x[r]; !ok {
				return fmt.Errorf("%w: %s: missing required property %q", ErrInvalidEnvelope, at, r)
			}
		}
		for _, name := range n.propertyOrders {
			if pv, ok := x[name]; ok {
				if err := n.Properties[name].validate(pv, at+"."+name); err != nil {
					return err
				}
			}
		}
		if n.noAdditional || n.additional != nil {
			keys := make([]string, 0, len(x))
			for k := range x {
				if _, declared := n.Properties[k]; !declared {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				if n.noAdditional {
					return fmt.Errorf("%w: %s: property %q is not allowed", ErrInvalidEnvelope, at, k)
				}
				if err := n.additional.validate(x[k], at+"."+k); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		num, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := num.Float64()
		// draft-07: an integer is any number with a zero fractional part (1.0 counts).
		return err == nil && !math.IsInf(f, 0) && f == math.Trunc(f)
	}
	return false
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
