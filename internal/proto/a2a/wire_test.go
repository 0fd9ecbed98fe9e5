package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func TestCanTransition(t *testing.T) {
	tests := []struct {
		from, to sdk.TaskState
		ok       bool
	}{
		{sdk.TaskStateSubmitted, sdk.TaskStateWorking, true},
		{sdk.TaskStateSubmitted, sdk.TaskStateRejected, true},
		{sdk.TaskStateWorking, sdk.TaskStateWorking, true},
		{sdk.TaskStateWorking, sdk.TaskStateCompleted, true},
		{sdk.TaskStateWorking, sdk.TaskStateSubmitted, false},
		{sdk.TaskStateInputRequired, sdk.TaskStateSubmitted, true},
		{sdk.TaskStateAuthRequired, sdk.TaskStateWorking, true},
		{sdk.TaskStateCompleted, sdk.TaskStateWorking, false},
		{sdk.TaskStateCompleted, sdk.TaskStateCompleted, false},
		{sdk.TaskStateCanceled, sdk.TaskStateCompleted, false},
		{sdk.TaskStateFailed, sdk.TaskStateCanceled, false},
		{sdk.TaskStateRejected, sdk.TaskStateWorking, false},
	}
	for _, tt := range tests {
		if got := CanTransition(tt.from, tt.to); got != tt.ok {
			t.Errorf("CanTransition(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.ok)
		}
	}
	r := &TaskRecord{Task: &sdk.Task{ID: "t", Status: sdk.TaskStatus{State: sdk.TaskStateCompleted}}}
	if err := r.SetState(sdk.TaskStateWorking, nil, time.Now()); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("SetState from completed = %v, want ErrIllegalTransition", err)
	}
}

func TestParseBody(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		batch bool
		perr  int   // whole-body error code
		errs  []int // per-request error codes (0 = valid)
	}{
		{"valid", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, false, 0, []int{0}},
		{"not json", `{"jsonrpc":`, false, CodeParseError, nil},
		{"empty batch", `[]`, false, CodeInvalidRequest, nil},
		{"scalar", `42`, false, 0, []int{CodeInvalidRequest}},
		{"no version", `{"id":1,"method":"GetTask"}`, false, 0, []int{CodeInvalidRequest}},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"GetTask"}`, false, 0, []int{CodeInvalidRequest}},
		{"no method", `{"jsonrpc":"2.0","id":1}`, false, 0, []int{CodeInvalidRequest}},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"GetTask"}`, false, 0, []int{CodeInvalidRequest}},
		{"array params", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}`, false, 0, []int{CodeInvalidParams}},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"a"},1,{"jsonrpc":"2.0","method":"b"}]`, true, 0, []int{0, CodeInvalidRequest, 0}},
		{"id twice", `{"jsonrpc":"2.0","id":1,"method":"GetTask","id":2}`, false, 0, []int{CodeInvalidRequest}},
		{"method named again in capitals", `{"jsonrpc":"2.0","id":1,"method":"GetTask","Method":"CancelTask"}`, false, 0, []int{CodeInvalidRequest}},
		{"params key twice", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","id":"b"}}`, false, 0, []int{CodeInvalidRequest}},
		{"batch with a key twice", `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b","method":"c"}]`, true, 0, []int{0, CodeInvalidRequest}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs, errs, batch, perr := ParseBody([]byte(tt.body))
			if tt.perr != 0 {
				if perr == nil || perr.Code != tt.perr {
					t.Fatalf("whole-body error = %v, want %d", perr, tt.perr)
				}
				return
			}
			if perr != nil || batch != tt.batch || len(reqs) != len(tt.errs) {
				t.Fatalf("got %d requests, batch %v, err %v", len(reqs), batch, perr)
			}
			for i, want := range tt.errs {
				got := 0
				if errs[i] != nil {
					got = errs[i].Code
				}
				if got != want {
					t.Errorf("request %d error %d, want %d", i, got, want)
				}
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{"": V03, "0.3": V03, "0.3.0": V03, "1.0": V10, "1": V10, "1.0.1": V10} {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0.2", "2.0", "abc"} {
		if _, err := ParseVersion(in); !errors.Is(err, ErrVersion) {
			t.Errorf("ParseVersion(%q) = %v, want ErrVersion", in, err)
		}
	}
	if o, v, e := resolve("", false, "SendMessage"); e != nil || o != opSend || v != V10 {
		t.Errorf("headerless SendMessage: %v %v %v", o, v, e)
	}
	if _, _, e := resolve("1.0", true, "message/send"); e == nil || e.Code != CodeMethodNotFound {
		t.Errorf("0.3 method under 1.0 header: %v", e)
	}
	if _, _, e := resolve("9.9", true, "SendMessage"); e == nil || e.Code != CodeVersionNotSupported {
		t.Errorf("bad version: %v", e)
	}
}

func TestPartsRoundTrip(t *testing.T) {
	in := []core.Part{
		{Kind: core.PartText, Text: "hello"},
		{Kind: core.PartCode, Text: "fmt.Println(1)", Language: "go"},
		{Kind: core.PartImage, MediaType: "image/png", Name: "a.png", URL: "https://example.com/a.png"},
		{Kind: core.PartFile, MediaType: "application/pdf", Name: "b.pdf", Bytes: []byte{1, 2, 3}},
		{Kind: core.PartData, Data: json.RawMessage(`{"k":[1,2]}`)},
		{Kind: core.PartText, Text: "meta", Meta: map[string]any{"x": "y"}},
	}
	for _, v := range []Version{V10, V03} {
		msg := &sdk.Message{ID: "m", Role: sdk.MessageRoleUser, Parts: PartsFromCore(in)}
		raw, err := json.Marshal(EncodeMessage(v, msg))
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeMessage(v, raw)
		if err != nil {
			t.Fatalf("%s: decode %s: %v", v, raw, err)
		}
		out, err := PartsToCore(back.Parts)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalize(t, in), normalize(t, out)) {
			t.Errorf("%s round trip:\n in %+v\nout %+v", v, in, out)
		}
	}
}

func normalize(t *testing.T, ps []core.Part) []map[string]any {
	t.Helper()
	b, _ := json.Marshal(ps)
	var out []map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func TestV03DataCompat(t *testing.T) {
	// @a2a-js/sdk wraps a non-object data value as {"value": …} with the
	// data_part_compat flag; both directions keep the value.
	raw := `{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"data","data":{"value":[1,2]},"metadata":{"data_part_compat":true}}]}`
	m, err := DecodeMessage(V03, json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(m.Parts[0].Data()); string(got) != "[1,2]" || m.Parts[0].Metadata != nil {
		t.Fatalf("data = %s, metadata %v", got, m.Parts[0].Metadata)
	}
	b, _ := json.Marshal(EncodeMessage(V03, m))
	if want := `{"kind":"data","data":{"value":[1,2]},"metadata":{"data_part_compat":true}}`; !json.Valid(b) || !strings.Contains(string(b), want) {
		t.Fatalf("re-encoded %s, want part %s", b, want)
	}
}

func TestBadV03Parts(t *testing.T) {
	for name, raw := range map[string]string{
		"unknown kind":  `{"kind":"video"}`,
		"text no text":  `{"kind":"text"}`,
		"file nothing":  `{"kind":"file","file":{}}`,
		"file both":     `{"kind":"file","file":{"bytes":"AA==","uri":"http://x"}}`,
		"bad base64":    `{"kind":"file","file":{"bytes":"!!"}}`,
		"data not obj":  `{"kind":"data","data":[1]}`,
		"data missing":  `{"kind":"data"}`,
		"file no field": `{"kind":"file"}`,
	} {
		msg := `{"kind":"message","messageId":"m","role":"user","parts":[` + raw + `]}`
		if _, err := DecodeMessage(V03, json.RawMessage(msg)); err == nil {
			t.Errorf("%s: accepted %s", name, raw)
		}
	}
	if _, err := DecodeMessage(V03, json.RawMessage(`{"messageId":"m","role":"robot","parts":[]}`)); err == nil {
		t.Error("accepted role robot")
	}
}

func TestDiff(t *testing.T) {
	old := &sdk.Task{ID: "t", Status: sdk.TaskStatus{State: sdk.TaskStateWorking}}
	cur := &sdk.Task{ID: "t", Status: sdk.TaskStatus{State: sdk.TaskStateCompleted},
		Artifacts: []*sdk.Artifact{{ID: "a", Parts: []*sdk.Part{sdk.NewTextPart("x")}}}}
	evs := Diff(old, cur)
	if len(evs) != 2 {
		t.Fatalf("events = %d, want artifact + status", len(evs))
	}
	if _, ok := evs[0].(*sdk.TaskArtifactUpdateEvent); !ok {
		t.Errorf("first event %T", evs[0])
	}
	st, ok := EncodeEvent(V03, evs[1]).(v03StatusUpdate)
	if !ok || !st.Final || st.Status.State != "completed" {
		t.Errorf("0.3 status update = %+v", st)
	}
	if len(Diff(cur, cur)) != 0 {
		t.Error("no change gave events")
	}
}

func TestToRPCError(t *testing.T) {
	cases := []struct {
		err  error
		code int
	}{
		{fmt.Errorf("x: %w", ErrTaskNotFound), CodeTaskNotFound},
		{fmt.Errorf("x: %w", core.ErrInvalid), CodeInvalidParams},
		{fmt.Errorf("x: %w", core.ErrTooLarge), CodeInvalidParams},
		{fmt.Errorf("x: %w", core.ErrIDConflict), CodeInvalidParams},
		{fmt.Errorf("x: %w", core.ErrUnknownReceiver), CodeInvalidParams},
		{fmt.Errorf("x: %w", core.ErrContentType), CodeContentTypeUnsupported},
		{fmt.Errorf("x: %w", core.ErrQueueFull), CodeInternal},
		{errors.New("disk on fire"), CodeInternal},
	}
	for _, c := range cases {
		got := toRPCError(c.err)
		if got.Code != c.code {
			t.Errorf("%v: code %d, want %d", c.err, got.Code, c.code)
		}
		if c.code == CodeInternal && c.err.Error() == "disk on fire" && got.Message != "internal error" {
			t.Errorf("an unexpected error's text leaked: %q", got.Message)
		}
	}
}
