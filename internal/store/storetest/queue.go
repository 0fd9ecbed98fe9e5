package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

var queueCases = []testCase{
	{"expire due", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		mk := func(id, sender string, ttl time.Duration) {
			m, r := newMessage(id, sender, "bob", base)
			m.TTL, m.ExpiresAt = ttl, base.Add(ttl)
			r.ExpiresAt = m.ExpiresAt
			mustAcceptMsg(t, s, m, r)
		}
		mk("e2", "alice", 2*time.Minute)
		mk("e1", "alice", time.Minute)
		mk("e3", "carol", 3*time.Minute)
		mk("keep", "alice", time.Hour)
		// e3's lane is claimed by a worker when it expires.
		cs := claim(t, s, at(time.Second), at(time.Hour), "w", 10, 10)
		if len(cs) != 2 {
			t.Fatalf("claimed %q", claimShape(cs))
		}

		rs, err := s.ExpireDue(ctx, at(2*time.Minute), 1)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "ExpireDue limit 1", receiptIDs(rs), []string{"e1"})
		rs, err = s.ExpireDue(ctx, at(3*time.Minute), 10)
		if err != nil {
			t.Fatal(err)
		}
		got := receiptIDs(rs)
		slices.Sort(got)
		wantIDs(t, "ExpireDue", got, []string{"e2", "e3"})
		for _, r := range rs {
			if r.Status != core.StatusTimeout {
				t.Fatalf("expired receipt status = %s", r.Status)
			}
			wantTime(t, "expired UpdatedAt", r.UpdatedAt, at(3*time.Minute))
			if ev := lastEvent(t, r); ev.Status != core.StatusTimeout || !ev.At.Equal(at(3*time.Minute)) {
				t.Fatalf("last event = %+v", ev)
			}
		}
		if r := receipt(t, s, "e1"); r.Status != core.StatusTimeout || r.Attempts != 0 {
			t.Fatalf("e1 = %s attempts %d", r.Status, r.Attempts)
		}
		wantDepth(t, s, "bob", 1)
		rs, err = s.ExpireDue(ctx, at(3*time.Minute), 10)
		if err != nil || len(rs) != 0 {
			t.Fatalf("ExpireDue again = %v, %v; want none", receiptIDs(rs), err)
		}
		// The worker's late outcome for the expired message is ignored.
		var carol core.Lane
		for _, c := range cs {
			if c.Lane.Sender == "carol" {
				carol = c.Lane
			}
		}
		complete(t, s, "w", core.LaneResult{Lane: carol, Outcomes: []core.Outcome{{MessageID: "e3", Kind: core.OutcomeDelivered, At: at(4 * time.Minute)}}})
		if r := receipt(t, s, "e3"); r.Status != core.StatusTimeout {
			t.Fatalf("e3 after late delivery = %s, want timeout", r.Status)
		}
		wantDepth(t, s, "bob", 1)
		dl, err := s.DeadLetters(ctx, core.DeadLetterFilter{})
		if err != nil || len(dl) != 3 {
			t.Fatalf("DeadLetters = %v, %v; want 3", receiptIDs(dl), err)
		}
	}},
	{"wake returns depth and depth counts queued only", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		n, err := s.Wake(ctx, "nobody", base)
		if err != nil || n != 0 {
			t.Fatalf("Wake unknown = %d, %v", n, err)
		}
		wantDepth(t, s, "nobody", 0)
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "carol", "bob", base)
		send(t, s, "m3", "carol", "bob", base)
		send(t, s, "x", "carol", "dave", base)
		wantDepth(t, s, "bob", 3)
		settle(t, s, at(time.Second), map[string]core.Outcome{"m2": {Kind: core.OutcomeDelivered}})
		wantDepth(t, s, "bob", 2)
		n, err = s.Wake(ctx, "bob", at(time.Minute))
		if err != nil || n != 2 {
			t.Fatalf("Wake(bob) = %d, %v; want 2", n, err)
		}
		wantDepth(t, s, "dave", 1)
	}},
}

var pullCases = []testCase{
	{"pull leases until visibleAt", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "carol", "bob", at(time.Second))
		send(t, s, "m3", "alice", "bob", at(2*time.Second))
		send(t, s, "other", "alice", "dave", at(2*time.Second))
		pull := func(now, vis time.Duration, limit int) []*core.Message {
			t.Helper()
			ms, err := s.Pull(ctx, "bob", at(now), at(vis), limit, false)
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			return ms
		}
		ms := pull(10*time.Second, 40*time.Second, 2)
		wantIDs(t, "first pull", messageIDs(ms), []string{"m1", "m2"})
		if ms[0].Attempts != 1 || ms[0].Parts[0].Text != "body of m1" {
			t.Fatalf("pulled message = %s", jsonText(ms[0]))
		}
		if r := receipt(t, s, "m1"); r.Status != core.StatusQueued || r.Attempts != 1 {
			t.Fatalf("pulled receipt = %s attempts %d; want queued 1", r.Status, r.Attempts)
		}
		wantIDs(t, "second pull", messageIDs(pull(20*time.Second, 60*time.Second, 10)), []string{"m3"})
		wantIDs(t, "nothing visible", messageIDs(pull(30*time.Second, 60*time.Second, 10)), []string{})
		// Leased messages are not pushed either.
		wantClaims(t, "claim while leased", claim(t, s, at(30*time.Second), at(35*time.Second), "w", 10, 10), "dave/alice:other")
		wantDepth(t, s, "bob", 3)
		ms = pull(41*time.Second, 90*time.Second, 10)
		wantIDs(t, "after first lease", messageIDs(ms), []string{"m1", "m2"})
		if ms[0].Attempts != 2 {
			t.Fatalf("re-pulled attempts = %d, want 2", ms[0].Attempts)
		}
	}},
	{"accept pulled hands out only what a pull would", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		ap, ok := s.(core.AcceptPuller)
		if !ok {
			t.Fatal("the store does not implement core.AcceptPuller")
		}
		acceptPulled := func(id string, now, vis time.Duration) (*core.Message, core.AcceptResult, bool) {
			t.Helper()
			m, r := newMessage(id, "alice", "bob", at(now))
			res, pulled, err := ap.AcceptPulled(ctx, m, r, 0, at(now), at(vis))
			if err != nil {
				t.Fatalf("AcceptPulled %s: %v", id, err)
			}
			return m, res, pulled
		}
		send(t, s, "m1", "alice", "bob", base)
		// m1 can be pulled: handing m2 out would pass it.
		if _, _, pulled := acceptPulled("m2", time.Second, time.Minute); pulled {
			t.Fatal("m2 handed out while m1 waits in the queue")
		}
		ms, err := s.Pull(ctx, "bob", at(2*time.Second), at(30*time.Second), 10, false)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "pull", messageIDs(ms), []string{"m1", "m2"})
		// Everything of bob's is pulled now: m3 goes straight out.
		m3, res, pulled := acceptPulled("m3", 3*time.Second, 40*time.Second)
		if !pulled || m3.Attempts != 1 || m3.Seq == 0 {
			t.Fatalf("m3: pulled %v, attempts %d, seq %d; want handed out with one attempt and a seq", pulled, m3.Attempts, m3.Seq)
		}
		if res.Receipt.Status != core.StatusQueued || res.Receipt.Attempts != 1 || res.Duplicate {
			t.Fatalf("m3's receipt = %+v", res.Receipt)
		}
		r := receipt(t, s, "m3")
		if r.Status != core.StatusQueued || r.Attempts != 1 || len(r.History) != 2 || r.History[1].Detail != "pulled, awaiting ack" {
			t.Fatalf("stored receipt of m3 = %s attempts %d history %+v", r.Status, r.Attempts, r.History)
		}
		wantIDs(t, "pull while leased", messageIDs(mustPull(t, s, "bob", 4*time.Second, time.Minute)), []string{})
		wantDepth(t, s, "bob", 3)
		// A repeat is a duplicate and hands nothing out.
		if _, res, pulled := acceptPulled("m3", 5*time.Second, time.Minute); pulled || !res.Duplicate {
			t.Fatalf("repeated m3: pulled %v, duplicate %v", pulled, res.Duplicate)
		}
		// A message already past its TTL is stored ended, never handed out.
		m, r0 := newMessage("late", "alice", "bob", at(6*time.Second))
		r0.Status = core.StatusExpired
		if res, pulled, err := ap.AcceptPulled(ctx, m, r0, 0, at(6*time.Second), at(time.Minute)); err != nil || pulled || res.Receipt.Status != core.StatusExpired {
			t.Fatalf("expired message: pulled %v, status %s, %v", pulled, res.Receipt.Status, err)
		}
		// When the leases run out, all three come back, m3 on its second attempt.
		ms = mustPull(t, s, "bob", 41*time.Second, 2*time.Minute)
		wantIDs(t, "after the leases", messageIDs(ms), []string{"m1", "m2", "m3"})
		if ms[2].Attempts != 2 {
			t.Fatalf("m3 pulled again with attempts %d, want 2", ms[2].Attempts)
		}
	}},
	{"ack skips foreign and unknown ids", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		send(t, s, "m3", "alice", "bob", at(2*time.Second))
		send(t, s, "foreign", "alice", "dave", base)
		if _, err := s.Pull(ctx, "bob", at(10*time.Second), at(time.Minute), 10, false); err != nil {
			t.Fatal(err)
		}
		n, err := s.Ack(ctx, "bob", []string{"m1", "m2", "foreign", "unknown"}, at(20*time.Second))
		if err != nil || n != 2 {
			t.Fatalf("Ack = %d, %v; want 2", n, err)
		}
		for _, id := range []string{"m1", "m2"} {
			r := receipt(t, s, id)
			if r.Status != core.StatusDelivered || r.Attempts != 1 {
				t.Fatalf("%s after ack = %s attempts %d", id, r.Status, r.Attempts)
			}
			wantTime(t, id+" UpdatedAt", r.UpdatedAt, at(20*time.Second))
			if ev := lastEvent(t, r); ev.Status != core.StatusDelivered {
				t.Fatalf("%s last event = %+v", id, ev)
			}
		}
		if r := receipt(t, s, "foreign"); r.Status != core.StatusQueued {
			t.Fatalf("foreign = %s, want queued", r.Status)
		}
		wantDepth(t, s, "bob", 1)
		wantDepth(t, s, "dave", 1)
		n, err = s.Ack(ctx, "bob", []string{"m1", "m2"}, at(30*time.Second))
		if err != nil || n != 0 {
			t.Fatalf("Ack again = %d, %v; want 0", n, err)
		}
		ms, err := s.Pull(ctx, "bob", at(2*time.Minute), at(3*time.Minute), 10, false)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "pull after ack", messageIDs(ms), []string{"m3"})
	}},
	{"auto ack delivers at once", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		ms, err := s.Pull(ctx, "bob", at(10*time.Second), at(time.Minute), 10, true)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "auto-ack pull", messageIDs(ms), []string{"m1", "m2"})
		for _, id := range []string{"m1", "m2"} {
			if r := receipt(t, s, id); r.Status != core.StatusDelivered || r.Attempts != 1 {
				t.Fatalf("%s = %s attempts %d; want delivered 1", id, r.Status, r.Attempts)
			}
		}
		wantDepth(t, s, "bob", 0)
		ms, err = s.Pull(ctx, "bob", at(2*time.Minute), at(3*time.Minute), 10, true)
		if err != nil || len(ms) != 0 {
			t.Fatalf("second pull = %v, %v; want none", messageIDs(ms), err)
		}
		wantClaims(t, "claim after auto ack", claim(t, s, at(time.Hour), at(2*time.Hour), "w", 10, 10))
	}},
	{"expired messages are not pulled", func(t *testing.T, s core.Store) {
		m, r := newMessage("short", "alice", "bob", base)
		m.ExpiresAt, r.ExpiresAt = at(time.Minute), at(time.Minute)
		mustAcceptMsg(t, s, m, r)
		ms, err := s.Pull(context.Background(), "bob", at(2*time.Minute), at(3*time.Minute), 10, false)
		if err != nil || len(ms) != 0 {
			t.Fatalf("Pull = %v, %v; want none", messageIDs(ms), err)
		}
	}},
}
