package core_test

import (
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestDuplicateAnswersFirstConversation: a retry answers with the
// conversation of the message first accepted with the id, whatever
// conversation the retry names.
func TestDuplicateAnswersFirstConversation(t *testing.T) {
	f := newFixture(t, core.Config{})
	hub := core.InternalPrincipal("test")
	first := &core.Message{ID: "d1", Sender: "planner", Receiver: "worker", ConversationID: "conv-first",
		Parts: []core.Part{{Kind: core.PartText, Text: "hi"}}}
	if res, err := f.relay.SendAs(f.ctx, hub, first); err != nil || res.Duplicate {
		t.Fatalf("first send: %+v %v", res, err)
	}
	for _, conv := range []string{"", "conv-first", "conv-other"} {
		retry := &core.Message{ID: "d1", Sender: "planner", Receiver: "worker", ConversationID: conv,
			Parts: []core.Part{{Kind: core.PartText, Text: "hi"}}}
		res, err := f.relay.SendAs(f.ctx, hub, retry)
		if err != nil || !res.Duplicate || res.ConversationID != "conv-first" {
			t.Errorf("retry naming %q: %+v %v, want a duplicate in conv-first", conv, res, err)
		}
	}
	if res, err := f.relay.SendAs(f.ctx, hub, &core.Message{ID: "d2", Sender: "planner", Receiver: "worker"}); err != nil || res.ConversationID != "" {
		t.Errorf("a new message: %+v %v, want no conversation id in the result", res, err)
	}
}
