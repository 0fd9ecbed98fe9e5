// Package jsonvalue reads JSON values by what they mean rather than how
// they are written: Equal compares objects by their key sets, arrays in
// order, numbers by value; DuplicateKey finds objects whose meaning is
// open because they name a key twice.
package jsonvalue

import (
	"bytes"
	"encoding/json"
)

// Decode decodes one JSON value from data with numbers kept as
// json.Number, the form Equal compares.
func Decode(data []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Equal reports whether a and b, decoded with json.Number for numbers (as
// Decode does), are the same JSON value: objects with the same keys and
// equal values whatever their order, arrays with equal elements in order,
// numbers equal in value (1, 1.0 and 1e0 alike; compared as float64, so
// integers past 2^53 that differ only beyond its precision are equal),
// strings, booleans and null as themselves.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		fx, errX := x.Float64()
		fy, errY := y.Float64()
		return errX == nil && errY == nil && fx == fy
	default:
		return a == b // string, bool, nil
	}
}
