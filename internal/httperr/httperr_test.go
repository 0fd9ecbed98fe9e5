package httperr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/jsonvalue"
)

func TestDecodeJSON(t *testing.T) {
	type body struct {
		Name  string   `json:"name"`
		N     int      `json:"n"`
		Tags  []string `json:"tags"`
		Inner struct {
			On bool `json:"on"`
		} `json:"inner"`
	}
	const max = 64
	cases := []struct {
		name, in string
		status   int    // 0: decoded
		code     string // error code
		message  string // part of the message
	}{
		{"object", `{"name":"a","n":2}`, 0, "", ""},
		{"white space around", " \r\n\t{\"n\":1}\n\n ", 0, "", ""},
		{"exactly the limit", `{"name":"` + strings.Repeat("a", max-11) + `"}`, 0, "", ""},
		{"empty", ``, 400, CodeInvalidJSON, "empty"},
		{"only white space", "  \n", 400, CodeInvalidJSON, "empty"},
		{"syntax", `{"name":}`, 400, CodeInvalidJSON, "malformed JSON body"},
		{"cut short", `{"name":"a"`, 400, CodeInvalidJSON, "malformed JSON body"},
		{"second value", `{} {}`, 400, CodeInvalidJSON, "trailing data"},
		{"stray brace", `{"n":1}}`, 400, CodeInvalidJSON, "trailing data"},
		{"stray bracket", `{"n":1}]`, 400, CodeInvalidJSON, "trailing data"},
		{"array, not object", `[]`, 400, CodeInvalidJSON, "must be an object, not array"},
		{"string field as number", `{"name":1}`, 400, CodeInvalidField, "name must be a string, not number"},
		{"integer field as float", `{"n":1.5}`, 400, CodeInvalidField, "n must be an integer"},
		{"integer out of range", `{"n":1e40}`, 400, CodeInvalidField, "n must be an integer"},
		{"array field as string", `{"tags":"x"}`, 400, CodeInvalidField, "tags must be an array"},
		{"nested field", `{"inner":{"on":"yes"}}`, 400, CodeInvalidField, "inner.on must be true or false"},
		{"key twice", `{"n":1,"name":"a","n":2}`, 400, CodeInvalidJSON, `key "n" appears twice`},
		{"key twice, once escaped", `{"n":1,"\u006e":2}`, 400, CodeInvalidJSON, `key "n" appears twice`},
		{"top-level keys that differ by case", `{"name":"a","Name":"b"}`, 400, CodeInvalidJSON, `key "Name" appears twice`},
		{"nested key twice", `{"inner":{"on":true,"on":false}}`, 400, CodeInvalidJSON, `key "on" appears twice`},
		{"nested keys that differ by case", `{"inner":{"on":true,"On":false}}`, 0, "", ""},
		{"one key in two objects", `{"n":1,"inner":{"n":1}}`, 0, "", ""},
		{"over the limit", `{"name":"` + strings.Repeat("a", max) + `"}`, 413, CodeTooLarge, "exceeds 64 bytes"},
		{"over the limit after the value", `{"n":1}` + strings.Repeat(" ", max), 413, CodeTooLarge, "exceeds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(c.in))
			r.Header.Set("Content-Type", "application/json")
			var v body
			ok := DecodeJSON(w, r, max, &v)
			if c.status == 0 {
				if !ok {
					t.Fatalf("refused: %d %s", w.Code, w.Body)
				}
				return
			}
			var e Body
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
				t.Fatalf("answer is not JSON: %v %q", err, w.Body)
			}
			if ok || w.Code != c.status || e.Error != c.code || e.StatusCode != c.status || !strings.Contains(e.Message, c.message) {
				t.Fatalf("ok=%v %d %+v, want %d %s with %q", ok, w.Code, e, c.status, c.code, c.message)
			}
		})
	}
}

// FuzzDecodeJSON: DecodeJSON accepts a body exactly when encoding/json
// accepts it as one object of the target type (white space around it
// allowed) and no object in it names a key twice, and otherwise answers a
// typed JSON error.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"n":1}`, ` {"name":"a"} `, `{"n":1}}`, `{"n":1}]`, `[]`, ``, `{"tags":"x"}`, `{"n":1} x`, `null`, `{"n":1,"N":2}`, `{"tags":[],"t\u0061gs":[]}`} {
		f.Add([]byte(s))
	}
	type body struct {
		Name string   `json:"name"`
		N    int      `json:"n"`
		Tags []string `json:"tags"`
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(in)))
		r.Header.Set("Content-Type", "application/json")
		var got body
		ok := DecodeJSON(w, r, 1<<16, &got)
		var want body
		_, dup := jsonvalue.DuplicateKey(in)
		wantOK := json.Unmarshal(in, &want) == nil && !dup
		if ok != wantOK {
			t.Fatalf("DecodeJSON ok=%v, json.Unmarshal ok=%v for %q (%s)", ok, wantOK, in, w.Body)
		}
		if ok {
			return
		}
		var e Body
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.StatusCode != w.Code || e.Error == "" || e.Message == "" {
			t.Fatalf("refusal is not a typed JSON error: %d %q", w.Code, w.Body)
		}
	})
}

// TestJSONContentType: a body not declared JSON is refused with 415 before
// it is read, so that a web page's cross-site form or text/plain POST
// (which a browser sends without asking) cannot write to the hub.
func TestJSONContentType(t *testing.T) {
	for _, c := range []struct {
		ct string
		ok bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON", true},
		{"application/merge-patch+json", true},
		{"", false},
		{"text/plain", false},
		{"text/plain; charset=utf-8", false},
		{"application/x-www-form-urlencoded", false},
		{"multipart/form-data; boundary=x", false},
		{"application/jsonx", false},
		{"json", false},
	} {
		t.Run(c.ct, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"name":"x"}`))
			if c.ct != "" {
				r.Header.Set("Content-Type", c.ct)
			}
			var got struct {
				Name string `json:"name"`
			}
			ok := DecodeJSON(w, r, 1<<10, &got)
			if ok != c.ok {
				t.Fatalf("DecodeJSON ok=%v, want %v (%d %s)", ok, c.ok, w.Code, w.Body)
			}
			if !ok {
				var b Body
				_ = json.Unmarshal(w.Body.Bytes(), &b)
				if w.Code != http.StatusUnsupportedMediaType || b.Error != CodeUnsupportedMediaType {
					t.Errorf("answer %d %+v, want 415 %s", w.Code, b, CodeUnsupportedMediaType)
				}
				if got.Name != "" {
					t.Errorf("the body was decoded anyway: %+v", got)
				}
			}
		})
	}
}

func TestFromRetryAfter(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
		retry  string
	}{
		{fmt.Errorf("postgres: accept: %w: dial tcp: refused 10.0.0.7:5432", core.ErrUnavailable), 503, CodeUnavailable, "2"},
		{fmt.Errorf("body: %w", core.ErrOverloaded), 507, CodeOverBudget, "1"},
		{fmt.Errorf("receiver x: %w", core.ErrQueueFull), 429, CodeQueueFull, "1"},
		{fmt.Errorf("sqlite: %w", core.ErrStorageFull), 507, CodeStorageFull, "30"},
		{fmt.Errorf("x: %w", core.ErrInvalid), 400, CodeInvalidField, ""},
		{errors.New("boom"), 500, CodeInternal, ""},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		From(w, c.err)
		var b Body
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
			t.Fatal(err)
		}
		if w.Code != c.status || b.Error != c.code || w.Header().Get("Retry-After") != c.retry {
			t.Errorf("%v: %d %s Retry-After %q, want %d %s %q", c.err, w.Code, b.Error, w.Header().Get("Retry-After"), c.status, c.code, c.retry)
		}
		if strings.Contains(b.Message, "10.0.0.7") {
			t.Errorf("%v: the answer leaks the store's address: %s", c.err, b.Message)
		}
	}
}

func TestQueryBool(t *testing.T) {
	for _, c := range []struct {
		query string
		want  bool
		ok    bool
	}{
		{"", false, true}, {"alive=", false, true}, {"alive=true", true, true}, {"alive=1", true, true},
		{"alive=false", false, true}, {"alive=0", false, true},
		{"alive=maybe", false, false}, {"alive=True", false, false}, {"alive=yes", false, false},
	} {
		got, err := QueryBool(httptest.NewRequest(http.MethodGet, "/x?"+c.query, nil), "alive")
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("%q: %v, %v; want %v, ok %v", c.query, got, err, c.want, c.ok)
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != CodeInvalidField) {
			t.Errorf("%q: %v, want 400 invalid_field", c.query, err)
		}
	}
}
