package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func deadLetterFixture(t *testing.T, s core.Store) {
	t.Helper()
	ctx := context.Background()
	send(t, s, "d1", "alice", "bob", base)
	send(t, s, "ok", "carol", "bob", base)
	m, r := newMessage("d2", "dave", "bob", base)
	m.ExpiresAt, r.ExpiresAt = at(20*time.Second), at(20*time.Second)
	mustAcceptMsg(t, s, m, r)
	send(t, s, "d3", "alice", "erin", base)
	send(t, s, "q", "frank", "bob", at(time.Hour))
	settle(t, s, at(10*time.Second), map[string]core.Outcome{
		"d1": {Kind: core.OutcomeRejected, Code: 422},
		"ok": {Kind: core.OutcomeDelivered},
	})
	if _, err := s.ExpireDue(ctx, at(20*time.Second), 10); err != nil {
		t.Fatal(err)
	}
	settle(t, s, at(30*time.Second), map[string]core.Outcome{"d3": {Kind: core.OutcomeRejected, Code: 400}})
}

var deadLetterCases = []testCase{
	{"history search, newest first, a page at a time", func(t *testing.T, s core.Store) {
		searcher, ok := s.(core.MessageSearcher)
		if !ok {
			t.Skip("the store does not implement core.MessageSearcher")
		}
		ctx := context.Background()
		for i, m := range []struct{ id, from, to string }{
			{"h1", "alice", "bob"}, {"h2", "carol", "bob"}, {"h3", "alice", "dave"}, {"h4", "bob", "alice"}, {"h5", "alice", "bob"},
		} {
			send(t, s, m.id, m.from, m.to, at(time.Duration(i)*time.Second))
		}
		mm, r := newMessage("h6", "erin", "bob", at(6*time.Second))
		mm.Parts = []core.Part{{Kind: core.PartText, Text: "a needle in the body"}}
		mm.Protocol = "mamp"
		mm.ConversationID = "conv-h6"
		mustAcceptMsg(t, s, mm, r)
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "o", 10, 10)
		for _, c := range cs {
			if c.Lane.Sender == "carol" {
				complete(t, s, "o", core.LaneResult{Lane: c.Lane, Outcomes: []core.Outcome{{MessageID: "h2", Kind: core.OutcomeDelivered, At: at(11 * time.Second), Code: 200}}})
			}
		}
		ids := func(q core.MessageQuery) string {
			t.Helper()
			got, err := searcher.SearchMessages(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, sm := range got {
				if sm.Message.ID != sm.Receipt.MessageID {
					t.Fatalf("message %s with receipt %s", sm.Message.ID, sm.Receipt.MessageID)
				}
				out = append(out, sm.Message.ID+":"+string(sm.Receipt.Status))
			}
			return strings.Join(out, ",")
		}
		tests := []struct {
			name string
			q    core.MessageQuery
			want string
		}{
			{"all", core.MessageQuery{}, "h6:queued,h5:queued,h4:queued,h3:queued,h2:delivered,h1:queued"},
			{"agent as sender or receiver", core.MessageQuery{Agent: "alice"}, "h5:queued,h4:queued,h3:queued,h1:queued"},
			{"sender and receiver", core.MessageQuery{Sender: "alice", Receiver: "bob"}, "h5:queued,h1:queued"},
			{"status", core.MessageQuery{Status: core.StatusDelivered}, "h2:delivered"},
			{"text in the content", core.MessageQuery{Text: "needle"}, "h6:queued"},
			{"text in an id", core.MessageQuery{Text: "h3"}, "h3:queued"},
			{"protocol", core.MessageQuery{Protocol: "mamp"}, "h6:queued"},
			{"conversation", core.MessageQuery{ConversationID: "conv-h6"}, "h6:queued"},
			{"agent and text", core.MessageQuery{Agent: "bob", Text: "erin"}, "h6:queued"},
			{"every filter", core.MessageQuery{Agent: "bob", Sender: "erin", Receiver: "bob", Status: core.StatusQueued,
				ConversationID: "conv-h6", Protocol: "mamp", Text: "needle", BeforeSeq: 1 << 40}, "h6:queued"},
			{"every filter, one off", core.MessageQuery{Agent: "bob", Sender: "erin", Receiver: "bob", Status: core.StatusQueued,
				ConversationID: "conv-h6", Protocol: "mamp", Text: "haystack", BeforeSeq: 1 << 40}, ""},
			{"first page", core.MessageQuery{Limit: 2}, "h6:queued,h5:queued"},
			{"nothing", core.MessageQuery{Text: "absent"}, ""},
		}
		for _, tt := range tests {
			if got := ids(tt.q); got != tt.want {
				t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
			}
		}
		page, err := searcher.SearchMessages(ctx, core.MessageQuery{Limit: 2})
		if err != nil || len(page) != 2 {
			t.Fatalf("first page: %v %v", page, err)
		}
		if got := ids(core.MessageQuery{Limit: 2, BeforeSeq: page[1].Message.Seq}); got != "h4:queued,h3:queued" {
			t.Errorf("second page: %s, want h4, h3", got)
		}
	}},
	{"newest first, filtered", func(t *testing.T, s core.Store) {
		deadLetterFixture(t, s)
		tests := []struct {
			f    core.DeadLetterFilter
			want []string
		}{
			{core.DeadLetterFilter{}, []string{"d3", "d2", "d1"}},
			{core.DeadLetterFilter{Receiver: "bob"}, []string{"d2", "d1"}},
			{core.DeadLetterFilter{Receiver: "erin"}, []string{"d3"}},
			{core.DeadLetterFilter{Receiver: "nobody"}, []string{}},
			{core.DeadLetterFilter{Limit: 2}, []string{"d3", "d2"}},
		}
		for _, tt := range tests {
			rs, err := s.DeadLetters(context.Background(), tt.f)
			if err != nil {
				t.Fatal(err)
			}
			wantIDs(t, fmt.Sprintf("DeadLetters(%+v)", tt.f), receiptIDs(rs), tt.want)
		}
		rs, _ := s.DeadLetters(context.Background(), core.DeadLetterFilter{Receiver: "erin"})
		if len(rs) == 1 && (rs[0].Status != core.StatusRejected || rs[0].Code != 400) {
			t.Fatalf("dead letter receipt = %s", jsonText(rs[0]))
		}
	}},
	{"replay", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		deadLetterFixture(t, s)
		r, err := s.Replay(ctx, "d1", at(2*time.Hour), at(3*time.Hour))
		if err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if r.MessageID != "d1" || r.Status != core.StatusQueued {
			t.Fatalf("replayed receipt = %s", jsonText(r))
		}
		wantTime(t, "replayed ExpiresAt", r.ExpiresAt, at(3*time.Hour))
		wantTime(t, "replayed UpdatedAt", r.UpdatedAt, at(2*time.Hour))
		if ev := lastEvent(t, r); ev.Status != core.StatusQueued || !ev.At.Equal(at(2*time.Hour)) {
			t.Fatalf("replay event = %+v", ev)
		}
		if g := receipt(t, s, "d1"); g.Status != core.StatusQueued {
			t.Fatalf("stored status = %s", g.Status)
		}
		m, err := s.GetMessage(ctx, "d1")
		if err != nil {
			t.Fatal(err)
		}
		wantTime(t, "replayed message ExpiresAt", m.ExpiresAt, at(3*time.Hour))
		// d2 (timeout) replays too, onto a lane that was dropped.
		if _, err := s.Replay(ctx, "d2", at(2*time.Hour), at(3*time.Hour)); err != nil {
			t.Fatalf("Replay timeout: %v", err)
		}
		wantDepth(t, s, "bob", 3) // d1, d2 and q
		dl, err := s.DeadLetters(ctx, core.DeadLetterFilter{})
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "dead letters after replay", receiptIDs(dl), []string{"d3"})
		cs := claim(t, s, at(2*time.Hour), at(3*time.Hour), "w", 10, 10)
		got := claimShape(cs)
		slices.Sort(got)
		wantIDs(t, "claim after replay", got, []string{"bob/alice:d1", "bob/dave:d2", "bob/frank:q"})

		_, err = s.Replay(ctx, "ok", at(2*time.Hour), at(3*time.Hour))
		wantErr(t, "Replay delivered", err, core.ErrConflict)
		_, err = s.Replay(ctx, "q", at(2*time.Hour), at(3*time.Hour))
		wantErr(t, "Replay queued", err, core.ErrConflict)
		_, err = s.Replay(ctx, "nope", at(2*time.Hour), at(3*time.Hour))
		wantErr(t, "Replay unknown", err, core.ErrNotFound)
	}},
	{"replay wakes a parked lane", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		settle(t, s, at(10*time.Second), map[string]core.Outcome{"m1": {Kind: core.OutcomeRejected, Code: 409}})
		cs := claim(t, s, at(20*time.Second), at(time.Minute), "w", 10, 10)
		wantClaims(t, "claim", cs, "bob/alice:m2")
		complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, Park: true})
		if _, err := s.Replay(ctx, "m1", at(time.Hour), at(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantClaims(t, "after replay", claim(t, s, at(time.Hour), at(2*time.Hour), "w", 10, 10), "bob/alice:m1,m2")
	}},
	{"purge before", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		deadLetterFixture(t, s) // terminal: ok, d1 at 10s; d2 at 20s; d3 at 30s; queued: q
		n, err := s.PurgeBefore(ctx, at(15*time.Second), 100)
		if err != nil || n != 2 {
			t.Fatalf("PurgeBefore 15s = %d, %v; want 2", n, err)
		}
		for _, id := range []string{"ok", "d1"} {
			_, err := s.GetReceipt(ctx, id)
			wantErr(t, "purged receipt "+id, err, core.ErrNotFound)
			_, err = s.GetMessage(ctx, id)
			wantErr(t, "purged message "+id, err, core.ErrNotFound)
		}
		receipt(t, s, "d2")
		n, err = s.PurgeBefore(ctx, at(48*time.Hour), 1)
		if err != nil || n != 1 {
			t.Fatalf("PurgeBefore limit 1 = %d, %v; want 1", n, err)
		}
		n, err = s.PurgeBefore(ctx, at(48*time.Hour), 100)
		if err != nil || n != 1 {
			t.Fatalf("PurgeBefore rest = %d, %v; want 1", n, err)
		}
		n, err = s.PurgeBefore(ctx, at(48*time.Hour), 100)
		if err != nil || n != 0 {
			t.Fatalf("PurgeBefore nothing left = %d, %v; want 0", n, err)
		}
		if r := receipt(t, s, "q"); r.Status != core.StatusQueued {
			t.Fatalf("queued message purged or changed: %s", r.Status)
		}
		wantDepth(t, s, "bob", 1)
	}},
}
