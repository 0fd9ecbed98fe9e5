package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func participants(c *core.Conversation) map[string]core.Participant {
	out := make(map[string]core.Participant, len(c.Participants))
	for _, p := range c.Participants {
		out[p.AgentID] = p
	}
	return out
}

func sendIn(t *testing.T, s core.Store, conv, id, sender, receiver string, recv time.Time) *core.Message {
	t.Helper()
	m, r := newMessage(id, sender, receiver, recv)
	m.ConversationID = conv
	mustAcceptMsg(t, s, m, r)
	return m
}

func conversationIDs(cs []*core.Conversation) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

var conversationCases = []testCase{
	{"accept creates and updates the conversation", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		sendIn(t, s, "c1", "m1", "alice", "bob", at(time.Second))
		sendIn(t, s, "c1", "m2", "bob", "alice", at(2*time.Second))
		sendIn(t, s, "c1", "m3", "alice", "carol", at(3*time.Second))
		c, err := s.GetConversation(ctx, "c1")
		if err != nil {
			t.Fatalf("GetConversation: %v", err)
		}
		wantTime(t, "CreatedAt", c.CreatedAt, at(time.Second))
		wantTime(t, "LastMessageAt", c.LastMessageAt, at(3*time.Second))
		if c.Messages != 3 {
			t.Fatalf("Messages = %d, want 3", c.Messages)
		}
		ps := participants(c)
		if len(ps) != 3 {
			t.Fatalf("participants = %s", jsonText(c.Participants))
		}
		wantTime(t, "alice joined", ps["alice"].JoinedAt, at(time.Second))
		wantTime(t, "bob joined", ps["bob"].JoinedAt, at(time.Second))
		wantTime(t, "carol joined", ps["carol"].JoinedAt, at(3*time.Second))
		m, err := s.GetMessage(ctx, "m2")
		if err != nil || m.ConversationID != "c1" {
			t.Fatalf("message conversation = %v, %v", m, err)
		}
		_, err = s.GetConversation(ctx, "nope")
		wantErr(t, "GetConversation unknown", err, core.ErrNotFound)
	}},
	{"create conflict and trace ids", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		c := &core.Conversation{ID: "c2", CreatedAt: at(5 * time.Second), Participants: []core.Participant{
			{AgentID: "alice", TraceID: "trace-a"}, {AgentID: "dave", TraceID: "trace-d"},
		}}
		if err := s.CreateConversation(ctx, c); err != nil {
			t.Fatalf("CreateConversation: %v", err)
		}
		wantErr(t, "CreateConversation again", s.CreateConversation(ctx, c), core.ErrConflict)
		got, err := s.GetConversation(ctx, "c2")
		if err != nil {
			t.Fatal(err)
		}
		wantTime(t, "CreatedAt", got.CreatedAt, at(5*time.Second))
		ps := participants(got)
		if got.Messages != 0 || len(ps) != 2 || ps["alice"].TraceID != "trace-a" || ps["dave"].TraceID != "trace-d" {
			t.Fatalf("created conversation = %s", jsonText(got))
		}
		// Messages join an existing conversation without resetting it.
		sendIn(t, s, "c2", "m1", "alice", "bob", at(10*time.Second))
		if err := s.SetTraceID(ctx, "c2", "bob", "trace-b", at(11*time.Second)); err != nil {
			t.Fatalf("SetTraceID existing participant: %v", err)
		}
		if err := s.SetTraceID(ctx, "c2", "erin", "trace-e", at(12*time.Second)); err != nil {
			t.Fatalf("SetTraceID new participant: %v", err)
		}
		if err := s.SetTraceID(ctx, "c2", "dave", "trace-d2", at(13*time.Second)); err != nil {
			t.Fatalf("SetTraceID change: %v", err)
		}
		got, err = s.GetConversation(ctx, "c2")
		if err != nil {
			t.Fatal(err)
		}
		ps = participants(got)
		wantTime(t, "CreatedAt after message", got.CreatedAt, at(5*time.Second))
		wantTime(t, "LastMessageAt", got.LastMessageAt, at(10*time.Second))
		if got.Messages != 1 || len(ps) != 4 {
			t.Fatalf("conversation = %s", jsonText(got))
		}
		for agent, want := range map[string]string{"alice": "trace-a", "bob": "trace-b", "dave": "trace-d2", "erin": "trace-e"} {
			if ps[agent].TraceID != want {
				t.Fatalf("%s trace id = %q, want %q", agent, ps[agent].TraceID, want)
			}
		}
		wantTime(t, "erin joined", ps["erin"].JoinedAt, at(12*time.Second))
		wantErr(t, "SetTraceID unknown conversation", s.SetTraceID(ctx, "nope", "a", "t", base), core.ErrNotFound)
	}},
	{"list by agent, most recent first", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		sendIn(t, s, "c1", "m1", "alice", "bob", at(1*time.Second))
		sendIn(t, s, "c2", "m2", "alice", "carol", at(2*time.Second))
		sendIn(t, s, "c3", "m3", "dave", "bob", at(3*time.Second))
		sendIn(t, s, "c1", "m4", "bob", "alice", at(4*time.Second)) // c1 becomes the most recent
		tests := []struct {
			agent string
			limit int
			want  []string
		}{
			{"", 0, []string{"c1", "c3", "c2"}},
			{"alice", 0, []string{"c1", "c2"}},
			{"bob", 0, []string{"c1", "c3"}},
			{"carol", 0, []string{"c2"}},
			{"nobody", 0, []string{}},
			{"", 2, []string{"c1", "c3"}},
		}
		for _, tt := range tests {
			cs, err := s.ListConversations(ctx, tt.agent, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			wantIDs(t, fmt.Sprintf("ListConversations(%q, %d)", tt.agent, tt.limit), conversationIDs(cs), tt.want)
		}
		cs, _ := s.ListConversations(ctx, "carol", 0)
		if len(cs) == 1 && (cs[0].Messages != 1 || len(cs[0].Participants) != 2) {
			t.Fatalf("listed conversation = %s", jsonText(cs[0]))
		}
	}},
	{"messages after seq", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		sendIn(t, s, "c1", "m1", "alice", "bob", at(1*time.Second))
		sendIn(t, s, "c1", "m2", "bob", "alice", at(2*time.Second))
		sendIn(t, s, "other", "x", "bob", "alice", at(2*time.Second))
		sendIn(t, s, "c1", "m3", "alice", "bob", at(3*time.Second))
		all, err := s.ConversationMessages(ctx, "c1", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "all", messageIDs(all), []string{"m1", "m2", "m3"})
		after, err := s.ConversationMessages(ctx, "c1", all[0].Seq, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "after m1", messageIDs(after), []string{"m2", "m3"})
		lim, err := s.ConversationMessages(ctx, "c1", 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "limit 1", messageIDs(lim), []string{"m1"})
		none, err := s.ConversationMessages(ctx, "c1", all[2].Seq, 0)
		if err != nil || len(none) != 0 {
			t.Fatalf("after last = %v, %v", messageIDs(none), err)
		}
	}},
}
