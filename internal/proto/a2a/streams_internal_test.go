package a2a

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestStreamBound: a caller holding MaxStreamsPerCaller streams is refused
// one more, by SendStreamingMessage (which then starts no task) and by
// SubscribeToTask alike; once it closes one, a stream opens again.
func TestStreamBound(t *testing.T) {
	ctx := core.WithPrincipal(context.Background(), core.DevPrincipal())
	st := openStore(t)
	relay := core.NewRelay(st, nil, core.Config{}, nil)
	if _, _, err := relay.RegisterAs(ctx, core.DevPrincipal(), &core.Agent{ID: "w", Endpoint: core.Endpoint{Kind: core.EndpointPull}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	s := New(relay, Options{Records: st})
	relay.SetDeliverer(EndpointReply, s.ReplyDeliverer())
	h := s.Handler()
	ctx = withAgent(ctx, "w")
	caller := streamCaller(ctx)
	for range MaxStreamsPerCaller {
		if !s.streams.acquire(caller) {
			t.Fatal("the bound came before MaxStreamsPerCaller streams")
		}
	}
	send := &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("hi"))}
	tests := []struct {
		name   string
		stream func() (sdk.Event, error)
	}{
		{"SendStreamingMessage", func() (sdk.Event, error) {
			for ev, err := range h.SendStreamingMessage(ctx, send) {
				return ev, err
			}
			return nil, nil
		}},
		{"SubscribeToTask", func() (sdk.Event, error) {
			for ev, err := range h.SubscribeToTask(ctx, &sdk.SubscribeToTaskRequest{ID: "some-task"}) {
				return ev, err
			}
			return nil, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := tt.stream()
			if !errors.Is(err, sdk.ErrInternalError) || !strings.Contains(err.Error(), "streams open") {
				t.Fatalf("at the bound: %v, %v; want the bound's error", ev, err)
			}
		})
	}
	list, err := h.ListTasks(ctx, &sdk.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 0 {
		t.Errorf("a refused stream left %d tasks", len(list.Tasks))
	}
	s.streams.release(caller)
	ev, err := tests[0].stream()
	if err != nil {
		t.Fatalf("after one stream closed: %v", err)
	}
	if _, ok := ev.(*sdk.Task); !ok {
		t.Errorf("first event %T, want the task", ev)
	}
}
