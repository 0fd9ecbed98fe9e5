package jsonvalue_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

func TestDuplicateKey(t *testing.T) {
	many := func(n int, last string) string {
		var b strings.Builder
		b.WriteString(`{"x":{`)
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(`"` + last + `":0}}`)
		return b.String()
	}
	cases := []struct {
		name, in string
		key      string // "" for none
	}{
		{"none", `{"sender":"a","receiver":"b","payload":{"sender":"c"}}`, ""},
		{"top level", `{"sender":"a","receiver":"b","sender":"c"}`, "sender"},
		{"top level by case", `{"sender":"a","Sender":"c"}`, "Sender"},
		{"top level by Unicode folding", `{"sender":"a","ſender":"c"}`, "ſender"}, // U+017F folds to s
		{"top level by Kelvin sign", `{"kind":"a","\u212aind":"c"}`, "\u212aind"},
		{"escaped", `{"sender":"a","\u0073ender":"c"}`, "sender"},
		{"escaped both", `{"\u0061":1,"\u0061":2}`, "a"},
		{"nested", `{"payload":{"a":1,"b":2,"a":3}}`, "a"},
		{"nested in an array", `{"parts":[{"kind":"text"},{"kind":"text","kind":"data"}]}`, "kind"},
		{"nested case differs", `{"payload":{"a":1,"A":2}}`, ""},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2},"k":3}`, ""},
		{"same key at two depths", `{"k":{"k":{"k":1}}}`, ""},
		{"key after a closed object", `{"a":{"b":1},"b":2}`, ""},
		{"string values are not keys", `{"a":"a","b":["a","a"],"c":"a"}`, ""},
		{"escaped quote in a key", `{"a\"b":1,"a\"b":2}`, `a"b`},
		{"escaped quote in a value", `{"a":"x\":","a2":1}`, ""},
		{"backslash at a value's end", `{"a":"x\\","a":1}`, "a"},
		{"invalid UTF-8 reads as U+FFFD", "{\"\xff\":1,\"\xfe\":2}", "\ufffd"},
		{"white space before the colon", "{\"a\" \n: 1, \"a\"\t:2}", "a"},
		{"top-level array", `[{"a":1},{"a":1}]`, ""},
		{"top-level array, duplicate inside", `[{"a":1,"a":1}]`, "a"},
		{"scalar", `"a"`, ""},
		{"empty objects", `{"a":{},"b":{},"c":[]}`, ""},
		{"large object, none", many(100, "z"), ""},
		{"large object, duplicate", many(100, "k57"), "k57"},
		{"large top-level object by case", topLevel(40, "K39"), "K39"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !json.Valid([]byte(c.in)) {
				t.Fatalf("test input is not valid JSON: %s", c.in)
			}
			key, found := jsonvalue.DuplicateKey([]byte(c.in))
			if found != (c.key != "") || key != c.key {
				t.Errorf("DuplicateKey(%s) = %q, %v; want %q", c.in, key, found, c.key)
			}
			if rk, rf := referenceDuplicate(t, []byte(c.in)); rf != found || rk != key {
				t.Errorf("reference = %q, %v", rk, rf)
			}
		})
	}
}

// topLevel is a top-level object with keys k0..k(n-1) and then last.
func topLevel(n int, last string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"` + last + `":0}`)
	return b.String()
}

// referenceDuplicate finds duplicate keys the slow, obvious way: walking
// encoding/json's tokens and comparing each key with the earlier ones of
// its object (under strings.EqualFold in the top-level object).
func referenceDuplicate(t testing.TB, data []byte) (string, bool) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // any valid number, however large
	type frame struct {
		object bool
		keys   []string
		want   bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return "", false
		}
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.object && top.want
		if top != nil && top.object {
			top.want = !top.want
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{object: true, want: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].want = true
				}
			}
		case string:
			if !isKey {
				continue
			}
			for _, k := range top.keys {
				if k == v || (len(stack) == 1 && strings.EqualFold(k, v)) {
					return v, true
				}
			}
			top.keys = append(top.keys, v)
		}
	}
}

func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":{"a":2,"c":[{"a":1,"a":2}]}}`,
		`{"sender":"x","Sender":"y"}`,
		`{"\u0073":1,"s":2}`,
		`[{"k":"\"","k2":"\\"}]`,
		`{"ſ":1,"S":2}`,
		topLevel(20, "k3"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		key, found := jsonvalue.DuplicateKey(data) // must not panic on any input
		if !json.Valid(data) {
			return
		}
		rk, rf := referenceDuplicate(t, data)
		if found != rf || key != rk {
			t.Fatalf("DuplicateKey(%q) = %q, %v; the reference says %q, %v", data, key, found, rk, rf)
		}
	})
}

// BenchmarkDuplicateKey: a usual ATP envelope (no allocation), and 1 MiB of
// small objects whose every key is escaped — the costliest input per byte,
// each key unescaped once (it took 0.9 s a MiB when keys were unescaped at
// every comparison).
func BenchmarkDuplicateKey(b *testing.B) {
	var esc strings.Builder
	esc.WriteString("[")
	for esc.Len() < 1<<20 {
		esc.WriteString("{")
		for k := range 16 {
			if k > 0 {
				esc.WriteString(",")
			}
			fmt.Fprintf(&esc, `"\u00%02x":1`, 0x41+k)
		}
		esc.WriteString("},")
	}
	esc.WriteString("{}]")
	for _, c := range []struct{ name, data string }{
		{"envelope", `{"atp_version":"1.0","message_id":"m-1","sender":"planner","receiver":"worker","type":"task","timestamp":1764806400,"ttl_ms":60000,"correlation_id":null,"payload":{"text":"summarise the report"}}`},
		{"escaped keys", esc.String()},
	} {
		b.Run(c.name, func(b *testing.B) {
			data := []byte(c.data)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, dup := jsonvalue.DuplicateKey(data); dup {
					b.Fatal("no key is named twice")
				}
			}
		})
	}
}
