package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestRecord(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(rec *Recorder) context.Context
		ev   Event
		want map[string]any
		none bool
	}{
		{"with the request's facts", func(rec *Recorder) context.Context {
			ctx := Into(context.Background(), rec)
			return WithRequest(ctx, &Request{ID: "r1", Method: "POST", Route: "POST /atp/send", Remote: "127.0.0.1", Principal: "agent:bob"})
		}, Event{Action: ActionRefused, Outcome: Refused, Status: 403, Reason: "forbidden"},
			map[string]any{"msg": "audit", "audit": true, "action": "request.refused", "outcome": "refused", "status": 403.0,
				"reason": "forbidden", "principal": "agent:bob", "route": "POST /atp/send", "request_id": "r1", "remote": "127.0.0.1"}, false},
		{"anonymous", func(rec *Recorder) context.Context {
			return WithRequest(Into(context.Background(), rec), &Request{Method: "GET", Route: "GET /v1/dlq"})
		}, Event{Action: ActionRefused, Outcome: Refused, Status: 401},
			map[string]any{"principal": "anonymous", "action": "request.refused"}, false},
		{"no request: just the event", func(rec *Recorder) context.Context { return Into(context.Background(), rec) },
			Event{Action: ActionAgentRegistered, Outcome: Allowed, Agent: "worker"},
			map[string]any{"action": "agent.registered", "agent": "worker", "outcome": "allowed"}, false},
		{"no recorder anywhere: nothing", func(*Recorder) context.Context { return context.Background() },
			Event{Action: ActionAgentRegistered, Outcome: Allowed}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			rec := New(slog.New(slog.NewJSONHandler(&buf, nil)))
			Record(tt.ctx(rec), tt.ev)
			if tt.none {
				if buf.Len() != 0 {
					t.Fatalf("recorded %s", buf.String())
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (record %s)", k, got[k], v, buf.String())
				}
			}
		})
	}
}

func TestDefaultRecorder(t *testing.T) {
	var buf bytes.Buffer
	SetDefault(New(slog.New(slog.NewJSONHandler(&buf, nil))))
	defer SetDefault(nil)
	Record(context.Background(), Event{Action: ActionTokenRevoked, Outcome: Allowed, Agent: "w"})
	if !bytes.Contains(buf.Bytes(), []byte(`"action":"token.revoked"`)) {
		t.Fatalf("default recorder wrote %q", buf.String())
	}
}
