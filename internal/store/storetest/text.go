package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// textCases: text a store keeps in a column (ids, conversation, correlation
// and trace ids, capabilities, record keys) with a NUL character or invalid
// UTF-8 is refused with core.ErrInvalid before anything is written, the
// same on every backend (PostgreSQL's text and JSON types cannot hold a
// NUL); hub-made text (a receiver's error) is recorded whatever it holds.
var textCases = []testCase{
	{"message fields with a NUL or invalid UTF-8 are refused", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		cases := []struct {
			name string
			set  func(m *core.Message)
		}{
			{"id with NUL", func(m *core.Message) { m.ID = "m\x00" }},
			{"id not UTF-8", func(m *core.Message) { m.ID = "m\xff" }},
			{"conversation id with NUL", func(m *core.Message) { m.ConversationID = "c\x00x" }},
			{"correlation id with NUL", func(m *core.Message) { m.CorrelationID = "\x00" }},
			{"correlation id not UTF-8", func(m *core.Message) { m.CorrelationID = "\xc3\x28" }},
			{"receiver with NUL", func(m *core.Message) { m.Receiver = "bob\x00" }},
		}
		for i, c := range cases {
			m, r := newMessage("text-"+string(rune('a'+i)), "alice", "bob", at(0))
			c.set(m)
			r.MessageID, r.Receiver = m.ID, m.Receiver
			_, err := s.Accept(ctx, m, r, 0)
			if !errors.Is(err, core.ErrInvalid) {
				t.Errorf("%s: Accept = %v, want ErrInvalid", c.name, err)
			}
		}
		wantDepth(t, s, "bob", 0)
		if cs := claim(t, s, at(time.Second), at(time.Minute), "o", 10, 10); len(cs) != 0 {
			t.Errorf("refused messages were stored: %v", claimShape(cs))
		}
		// A good message after the refusals goes through.
		send(t, s, "text-ok", "alice", "bob", at(0))
		wantDepth(t, s, "bob", 1)
	}},
	{"NULs in content and metadata are kept", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		m, r := newMessage("nul-body", "alice", "bob", at(0))
		m.Parts = []core.Part{{Kind: core.PartText, Text: "a\x00b"}}
		m.Metadata = map[string]any{"trace_id": "t\x00id", "nested": map[string]any{"k\x00": "v"}}
		mustAcceptMsg(t, s, m, r)
		got, err := s.GetMessage(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Parts[0].Text != "a\x00b" || got.Metadata["trace_id"] != "t\x00id" {
			t.Errorf("content or metadata changed: %q, %q", got.Parts[0].Text, got.Metadata["trace_id"])
		}
	}},
	{"trace id with a NUL is refused", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		if err := s.CreateConversation(ctx, &core.Conversation{ID: "conv", CreatedAt: at(0)}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTraceID(ctx, "conv", "alice", "trace-1", at(0)); err != nil {
			t.Fatal(err)
		}
		err := s.SetTraceID(ctx, "conv", "alice", "trace\x00-2", at(time.Second))
		wantErr(t, "SetTraceID with NUL", err, core.ErrInvalid)
		err = s.SetTraceID(ctx, "conv", "bob\x00", "t", at(time.Second))
		wantErr(t, "SetTraceID with NUL agent", err, core.ErrInvalid)
		c, err := s.GetConversation(ctx, "conv")
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Participants) != 1 || c.Participants[0].TraceID != "trace-1" {
			t.Errorf("participants changed by a refused write: %+v", c.Participants)
		}
		err = s.CreateConversation(ctx, &core.Conversation{ID: "conv\x00", CreatedAt: at(0)})
		wantErr(t, "CreateConversation with NUL", err, core.ErrInvalid)
	}},
	{"capability with a NUL is refused", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		a := testAgent("worker")
		a.Capabilities = []string{"text.reverse", "bad\x00cap"}
		_, err := s.UpsertAgent(ctx, a)
		wantErr(t, "UpsertAgent with NUL capability", err, core.ErrInvalid)
		if _, err := s.GetAgent(ctx, "worker"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("refused agent stored: %v", err)
		}
		a = testAgent("worker")
		a.Card.Tools = []string{"\xff"}
		_, err = s.UpsertAgent(ctx, a)
		wantErr(t, "UpsertAgent with invalid UTF-8 tool", err, core.ErrInvalid)
	}},
	{"record keys with a NUL are refused", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		for _, r := range []core.Record{
			{Kind: "a2a_task", ID: "t1", Index: "ctx\x00", Data: []byte("{}"), UpdatedAt: at(0)},
			{Kind: "a2a_task", ID: "t\x00", Data: []byte("{}"), UpdatedAt: at(0)},
			{Kind: "a2a\x00", ID: "t1", Data: []byte("{}"), UpdatedAt: at(0)},
		} {
			_, err := s.PutRecord(ctx, r)
			wantErr(t, "PutRecord "+strings.ToValidUTF8(r.Kind+"/"+r.ID+"/"+r.Index, "?"), err, core.ErrInvalid)
		}
		rs, err := s.ListRecords(ctx, "a2a_task", "", 10)
		if err != nil || len(rs) != 0 {
			t.Errorf("refused records stored: %v %v", rs, err)
		}
		// Data is bytes: NULs are kept.
		r, err := s.PutRecord(ctx, core.Record{Kind: "a2a_task", ID: "t1", Index: "ctx", Data: []byte("{\"a\":\"\\u0000\"}\x00"), UpdatedAt: at(0)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRecord(ctx, "a2a_task", "t1")
		if err != nil || string(got.Data) != string(r.Data) {
			t.Errorf("record data: %q, %v", got.Data, err)
		}
	}},
	{"a receiver's error with a NUL is recorded", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", at(0))
		send(t, s, "m2", "alice", "carol", at(0))
		settle(t, s, at(time.Second), map[string]core.Outcome{
			"m1": {Kind: core.OutcomeRetry, Code: 500, Error: "boom\x00 \xff", NextAt: at(time.Hour)},
			"m2": {Kind: core.OutcomeRejected, Code: 422, Error: "no\x00", Detail: "refused\x00"},
		})
		if r := receipt(t, s, "m1"); !strings.HasPrefix(r.LastError, "boom") || r.Attempts != 1 {
			t.Errorf("retry not recorded: %+v", r)
		}
		if r := receipt(t, s, "m2"); r.Status != core.StatusRejected || !strings.HasPrefix(r.LastError, "no") {
			t.Errorf("rejection not recorded: %+v", r)
		}
	}},
	{"lookups by text no store could hold find nothing", func(t *testing.T, s core.Store) {
		// A key with a NUL or invalid UTF-8 was refused on the way in, so
		// every store answers a lookup by it as it answers any unknown key:
		// not found, or an empty list. (PostgreSQL, asked, would fail the
		// statement itself; a client must not see that difference.)
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", at(0))
		for _, k := range []string{"bob\x00", "\xff", "\x00"} {
			notFound := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, core.ErrNotFound) {
					t.Errorf("%s(%q) = %v, want ErrNotFound", what, k, err)
				}
			}
			empty := func(what string, n int, err error) {
				t.Helper()
				if err != nil || n != 0 {
					t.Errorf("%s(%q) = %d, %v; want nothing, no error", what, k, n, err)
				}
			}
			_, err := s.GetAgent(ctx, k)
			notFound("GetAgent", err)
			notFound("RenewLease", s.RenewLease(ctx, k, at(time.Hour), at(0)))
			notFound("DeleteAgent", s.DeleteAgent(ctx, k))
			as, err := s.ListAgents(ctx, core.AgentFilter{Capability: k})
			empty("ListAgents", len(as), err)
			_, err = s.GetMessage(ctx, k)
			notFound("GetMessage", err)
			_, err = s.GetReceipt(ctx, k)
			notFound("GetReceipt", err)
			_, err = s.Replay(ctx, k, at(time.Second), at(time.Hour))
			notFound("Replay", err)
			ms, err := s.Results(ctx, k, 10)
			empty("Results", len(ms), err)
			n, err := s.QueueDepth(ctx, k)
			empty("QueueDepth", n, err)
			n, err = s.Wake(ctx, k, at(time.Second))
			empty("Wake", n, err)
			ms, err = s.Pull(ctx, k, at(time.Second), at(time.Minute), 10, false)
			empty("Pull", len(ms), err)
			n, err = s.Ack(ctx, k, []string{"m1", k}, at(time.Second))
			empty("Ack", n, err)
			rs, err := s.DeadLetters(ctx, core.DeadLetterFilter{Receiver: k})
			empty("DeadLetters", len(rs), err)
			_, err = s.GetConversation(ctx, k)
			notFound("GetConversation", err)
			cs, err := s.ListConversations(ctx, k, 10)
			empty("ListConversations", len(cs), err)
			ms, err = s.ConversationMessages(ctx, k, 0, 10)
			empty("ConversationMessages", len(ms), err)
			_, err = s.GetRecord(ctx, "a2a_task", k)
			notFound("GetRecord", err)
			notFound("DeleteRecord", s.DeleteRecord(ctx, "a2a_task", k))
			recs, err := s.ListRecords(ctx, "a2a_task", k, 10)
			empty("ListRecords", len(recs), err)
			recs, err = s.ListRecordsAfter(ctx, "a2a_task", k, k, 10)
			empty("ListRecordsAfter", len(recs), err)
			if ms, ok := s.(core.MessageSearcher); ok {
				for _, q := range []core.MessageQuery{{Text: k}, {Agent: k}, {Sender: k}, {Receiver: k},
					{Protocol: k}, {ConversationID: k}, {Status: core.Status(k)}} {
					found, err := ms.SearchMessages(ctx, q)
					empty(fmt.Sprintf("SearchMessages %+v", q), len(found), err)
				}
			}
		}
		// The good message is untouched by all of that.
		wantDepth(t, s, "bob", 1)
		if r := receipt(t, s, "m1"); r.Status != core.StatusQueued {
			t.Errorf("m1 changed: %+v", r)
		}
	}}, {"text over MaxStoredText is refused, text at it is kept", func(t *testing.T, s core.Store) {
		// PostgreSQL refuses an index entry over about 2,700 bytes, SQLite
		// has no such limit: the bound makes both answer alike. The text is
		// random so that PostgreSQL cannot compress it below its limit.
		ctx := context.Background()
		text := func(n int) string {
			b := make([]byte, n)
			for i := range b {
				b[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[rand.IntN(62)]
			}
			return string(b)
		}
		atBound, over := text(core.MaxStoredText), text(core.MaxStoredText+1)
		m, r := newMessage("long-conv", "alice", "bob", at(0))
		m.ConversationID = over
		_, err := s.Accept(ctx, m, r, 0)
		wantErr(t, "Accept with a long conversation id", err, core.ErrInvalid)
		m, r = newMessage("long-corr", "alice", "bob", at(0))
		m.CorrelationID, m.ConversationID = atBound, text(core.MaxStoredText)
		mustAcceptMsg(t, s, m, r)
		if ms, err := s.Results(ctx, atBound, 10); err != nil || len(ms) != 1 {
			t.Errorf("Results by a correlation id at the bound: %d, %v", len(ms), err)
		}

		a := testAgent("long-caps")
		a.Capabilities = []string{over}
		_, err = s.UpsertAgent(ctx, a)
		wantErr(t, "UpsertAgent with a long capability", err, core.ErrInvalid)
		a.Capabilities = []string{atBound}
		if _, err := s.UpsertAgent(ctx, a); err != nil {
			t.Fatalf("UpsertAgent with a capability at the bound: %v", err)
		}
		if as, err := s.ListAgents(ctx, core.AgentFilter{Capability: atBound}); err != nil || len(as) != 1 {
			t.Errorf("ListAgents by a capability at the bound: %d, %v", len(as), err)
		}

		_, err = s.PutRecord(ctx, core.Record{Kind: "amp_session", ID: over, Data: []byte(`{}`), UpdatedAt: at(0)})
		wantErr(t, "PutRecord with a long id", err, core.ErrInvalid)
		_, err = s.PutRecord(ctx, core.Record{Kind: "a2a_task", ID: "t", Index: over, Data: []byte(`{}`), UpdatedAt: at(0)})
		wantErr(t, "PutRecord with a long index", err, core.ErrInvalid)
		if _, err := s.PutRecord(ctx, core.Record{Kind: "a2a_task", ID: atBound, Index: text(core.MaxStoredText), Data: []byte(`{}`), UpdatedAt: at(0)}); err != nil {
			t.Fatalf("PutRecord with id and index at the bound: %v", err)
		}
		if _, err := s.GetRecord(ctx, "a2a_task", atBound); err != nil {
			t.Errorf("GetRecord by an id at the bound: %v", err)
		}
		err = s.SetTraceID(ctx, "long-corr-conv", "alice", over, at(0))
		wantErr(t, "SetTraceID with a long trace id", err, core.ErrInvalid)
	}},
}
