package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/postgres"
)

// outcome is a lane result with one outcome.
func outcome(l core.Lane, id string, kind core.OutcomeKind, at time.Time) core.LaneResult {
	return core.LaneResult{Lane: l, Outcomes: []core.Outcome{{MessageID: id, Kind: kind, At: at, Code: 200}}}
}

// laneOwners reads each lane's owner and claim, as "receiver/sender" →
// "owner@seconds after base" ("" for a released lane).
func laneOwners(t *testing.T, u string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT receiver, sender, owner, claim_until FROM lanes")
	if err != nil {
		t.Fatalf("read lanes: %v", err)
	}
	out := map[string]string{}
	var r, s, o string
	var until time.Time
	_, err = pgx.ForEachRow(rows, []any{&r, &s, &o, &until}, func() error {
		if o == "" {
			out[r+"/"+s] = ""
		} else {
			out[r+"/"+s] = fmt.Sprintf("%s@%d", o, int(until.Sub(base)/time.Second))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read lanes: %v", err)
	}
	return out
}

func wantStatus(t *testing.T, s core.Store, id string, want core.Status) {
	t.Helper()
	r, err := s.GetReceipt(context.Background(), id)
	if err != nil || r.Status != want {
		t.Fatalf("receipt %s = %v, %v; want %s", id, r, err, want)
	}
}

func wantMapEq(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// Several lanes completed by one batch statement, with mixed outcomes and a
// lane whose claim another owner took: each lane gets its own next
// messages, the emptied lane is released, the taken lane is left to its
// new owner (its late outcome still counts, as for a single lane), and
// the others are renewed.
func TestCompleteRenewBatch(t *testing.T) {
	ctx := context.Background()
	u, schema := freshSchema(t)
	s := openAt(t, u, schema)
	sends := []struct{ id, sender, receiver string }{
		{"a1", "alice", "bob"}, {"a2", "alice", "bob"}, {"a3", "alice", "bob"},
		{"c1", "carol", "bob"}, {"c2", "carol", "bob"},
		{"d1", "dave", "erin"},
		{"f1", "frank", "erin"}, {"f2", "frank", "erin"}, {"f3", "frank", "erin"}, {"f4", "frank", "erin"},
		{"g1", "gina", "erin"}, {"g2", "gina", "erin"},
	}
	for i, m := range sends {
		accept(t, s, m.id, m.sender, m.receiver, base.Add(time.Duration(i)*time.Millisecond))
	}
	// "old" claims every lane until 30s; "new" takes gina's lane (the
	// last due) once that lapsed, and "old" claims the others again.
	if cs, err := s.Claim(ctx, base.Add(10*time.Second), base.Add(30*time.Second), "old", 10, 1); err != nil || len(cs) != 5 {
		t.Fatalf("Claim = %v, %v; want 5 lanes", cs, err)
	}
	// Mark every lane but gina's due later, so "new" takes only hers.
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if _, err := conn.Exec(ctx, "UPDATE lanes SET next_at = $1 WHERE sender <> 'gina'", base.Add(time.Hour)); err != nil {
		t.Fatalf("delay lanes: %v", err)
	}
	conn.Close(ctx)
	if cs, err := s.Claim(ctx, base.Add(40*time.Second), base.Add(70*time.Second), "new", 10, 1); err != nil || len(cs) != 1 || cs[0].Lane.Sender != "gina" {
		t.Fatalf("Claim by new = %v, %v; want gina's lane", cs, err)
	}

	at := base.Add(45 * time.Second)
	lane := func(sender, receiver string) core.Lane { return core.Lane{Receiver: receiver, Sender: sender} }
	delivered := outcome(lane("frank", "erin"), "f1", core.OutcomeDelivered, at)
	delivered.Outcomes[0].Reply = []byte(`{"ok":true}`)
	rs := []postgres.Renewal{
		{Owner: "old", Res: outcome(lane("alice", "bob"), "a1", core.OutcomeDelivered, at)},
		{Owner: "old", Res: outcome(lane("carol", "bob"), "c1", core.OutcomeRejected, at)},
		{Owner: "old", Res: outcome(lane("dave", "erin"), "d1", core.OutcomeTimeout, at)},
		{Owner: "old", Res: delivered},
		{Owner: "old", Res: outcome(lane("gina", "erin"), "g1", core.OutcomeDelivered, at)},
	}
	for i := range rs {
		rs[i].Now, rs[i].ClaimUntil, rs[i].PerLane = at, base.Add(75*time.Second), 2
	}
	next, errs, err := postgres.CompleteRenewBatch(s, rs, false)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	want := [][]string{{"a2", "a3"}, {"c2"}, {}, {"f2", "f3"}, {}}
	for i := range rs {
		if errs[i] != nil || !slices.Equal(ids(next[i]), want[i]) {
			t.Errorf("lane %v: next %v, %v; want %v", rs[i].Res.Lane, ids(next[i]), errs[i], want[i])
		}
	}
	for id, st := range map[string]core.Status{
		"a1": core.StatusDelivered, "c1": core.StatusRejected, "d1": core.StatusTimeout, "f1": core.StatusDelivered,
		"g1": core.StatusDelivered, // the late outcome counts
		"a2": core.StatusQueued, "c2": core.StatusQueued, "f2": core.StatusQueued, "g2": core.StatusQueued,
	} {
		wantStatus(t, s, id, st)
	}
	if r, err := s.GetReceipt(ctx, "f1"); err != nil || !strings.Contains(string(r.Reply), "ok") {
		t.Errorf("f1 receipt %v, %v; want its reply stored", r, err)
	}
	wantMapEq(t, "lanes after the batch", laneOwners(t, u), map[string]string{
		"bob/alice": "old@75", "bob/carol": "old@75", "erin/dave": "", "erin/frank": "old@75", "erin/gina": "new@70",
	})
}

// A batch in which one lane's outcome cannot be stored fails as a whole,
// writes nothing, and is retried one lane at a time: that lane gets its
// own error and is left as it was, the others complete.
func TestCompleteRenewBatchOneFails(t *testing.T) {
	ctx := context.Background()
	u, schema := freshSchema(t)
	s := openAt(t, u, schema)
	for i, m := range []struct{ id, sender string }{{"a1", "alice"}, {"a2", "alice"}, {"c1", "carol"}, {"c2", "carol"}, {"d1", "dave"}} {
		accept(t, s, m.id, m.sender, "bob", base.Add(time.Duration(i)*time.Millisecond))
	}
	if cs, err := s.Claim(ctx, base.Add(10*time.Second), base.Add(40*time.Second), "w", 10, 1); err != nil || len(cs) != 3 {
		t.Fatalf("Claim = %v, %v; want 3 lanes", cs, err)
	}
	at := base.Add(11 * time.Second)
	rs := []postgres.Renewal{
		{Res: outcome(core.Lane{Receiver: "bob", Sender: "alice"}, "a1", core.OutcomeDelivered, at)},
		{Res: outcome(core.Lane{Receiver: "bob", Sender: "carol"}, "c1\x00", core.OutcomeDelivered, at)}, // NUL: PostgreSQL refuses it
		{Res: outcome(core.Lane{Receiver: "bob", Sender: "dave"}, "d1", core.OutcomeDelivered, at)},
	}
	for i := range rs {
		rs[i].Owner, rs[i].Now, rs[i].ClaimUntil, rs[i].PerLane = "w", at, base.Add(41*time.Second), 10
	}
	before := map[string]string{"bob/alice": "w@40", "bob/carol": "w@40", "bob/dave": "w@40"}
	if _, _, err := postgres.CompleteRenewBatch(s, rs, false); err == nil {
		t.Fatal("batch with a NUL in an id succeeded")
	}
	wantMapEq(t, "lanes after the failed batch", laneOwners(t, u), before)
	wantStatus(t, s, "a1", core.StatusQueued)

	next, errs, _ := postgres.CompleteRenewBatch(s, rs, true)
	if errs[0] != nil || !slices.Equal(ids(next[0]), []string{"a2"}) {
		t.Errorf("alice: %v, %v; want [a2]", ids(next[0]), errs[0])
	}
	if !errors.Is(errs[1], core.ErrInvalid) || len(next[1]) != 0 {
		t.Errorf("carol: %v, %v; want no messages and an ErrInvalid", ids(next[1]), errs[1])
	}
	if errs[2] != nil || len(next[2]) != 0 {
		t.Errorf("dave: %v, %v; want none (released)", ids(next[2]), errs[2])
	}
	wantStatus(t, s, "a1", core.StatusDelivered)
	wantStatus(t, s, "c1", core.StatusQueued)
	wantStatus(t, s, "d1", core.StatusDelivered)
	wantMapEq(t, "lanes after the retries", laneOwners(t, u), map[string]string{"bob/alice": "w@41", "bob/carol": "w@40", "bob/dave": ""})
}

// Lane goroutines completing at once through CompleteRenew (gathered into
// batches by the store's worker) each get their own lane's messages, in
// order, each once.
func TestCompleteRenewConcurrentLanes(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	const lanes, per = 16, 12
	for i := range per {
		for l := range lanes {
			accept(t, s, fmt.Sprintf("s%02d-%02d", l, i), fmt.Sprintf("s%02d", l), "bob", base.Add(time.Duration(i*lanes+l)*time.Millisecond))
		}
	}
	cs, err := s.Claim(ctx, base.Add(10*time.Second), base.Add(40*time.Second), "w", lanes, 2)
	if err != nil || len(cs) != lanes {
		t.Fatalf("Claim = %d lanes, %v; want %d", len(cs), err, lanes)
	}
	got := make([][]string, lanes)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			at := base.Add(11 * time.Second)
			for round := 0; len(c.Messages) > 0 && round < per; round++ {
				res := core.LaneResult{Lane: c.Lane}
				for _, m := range c.Messages {
					got[i] = append(got[i], m.ID)
					res.Outcomes = append(res.Outcomes, core.Outcome{MessageID: m.ID, Kind: core.OutcomeDelivered, At: at, Code: 200})
				}
				next, err := s.CompleteRenew(ctx, "w", res, at, at.Add(30*time.Second), 2)
				if err != nil {
					t.Errorf("lane %v: CompleteRenew: %v", c.Lane, err)
					return
				}
				c.Messages = next
			}
		})
	}
	wg.Wait()
	for i, c := range cs {
		var want []string
		for j := range per {
			want = append(want, fmt.Sprintf("%s-%02d", c.Lane.Sender, j))
		}
		if !slices.Equal(got[i], want) {
			t.Errorf("lane %v delivered %v, want %v", c.Lane, got[i], want)
		}
	}
	for _, c := range cs {
		wantStatus(t, s, c.Lane.Sender+"-11", core.StatusDelivered)
	}
	if cs, err := s.Claim(ctx, base.Add(12*time.Second), base.Add(42*time.Second), "x", lanes, 2); err != nil || len(cs) != 0 {
		t.Fatalf("Claim after = %v, %v; want nothing left", cs, err)
	}
}

// A batch bounds each lane's bodies by the store's ReadBytes on its own:
// the lanes before it do not use up a lane's share.
func TestCompleteRenewBatchReadBytes(t *testing.T) {
	ctx := context.Background()
	u, schema := freshSchema(t)
	s, err := postgres.Open(ctx, u, postgres.Options{MaxConns: 4, ChannelPrefix: schema, ReadBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	text := strings.Repeat("x", 1000) // a body of 1000–1400 bytes: two fit under 2000
	senders := []string{"s1", "s2", "s3"}
	for i := range 4 {
		for j, snd := range senders {
			at := base.Add(time.Duration(i*len(senders)+j) * time.Millisecond)
			id := fmt.Sprintf("%s-%d", snd, i)
			m := &core.Message{ID: id, Sender: snd, Receiver: "bob", Type: "message", Parts: []core.Part{{Kind: core.PartText, Text: text}},
				ReceivedAt: at, ExpiresAt: at.Add(time.Hour), TTL: time.Hour}
			r := &core.Receipt{MessageID: id, Sender: snd, Receiver: "bob", Status: core.StatusQueued, CreatedAt: at, UpdatedAt: at, ExpiresAt: m.ExpiresAt}
			if _, err := s.Accept(ctx, m, r, 0); err != nil {
				t.Fatalf("Accept %s: %v", id, err)
			}
		}
	}
	for range senders { // one a claim: a claim's bodies share one bound
		if cs, err := s.Claim(ctx, base.Add(10*time.Second), base.Add(40*time.Second), "w", 1, 1); err != nil || len(cs) != 1 {
			t.Fatalf("Claim = %v, %v; want a lane", cs, err)
		}
	}
	at := base.Add(11 * time.Second)
	var rs []postgres.Renewal
	for _, snd := range senders {
		rs = append(rs, postgres.Renewal{Owner: "w", Res: outcome(core.Lane{Receiver: "bob", Sender: snd}, snd+"-0", core.OutcomeDelivered, at),
			Now: at, ClaimUntil: at.Add(30 * time.Second), PerLane: 10})
	}
	next, errs, err := postgres.CompleteRenewBatch(s, rs, false)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	for i, snd := range senders {
		if want := []string{snd + "-1", snd + "-2"}; errs[i] != nil || !slices.Equal(ids(next[i]), want) {
			t.Errorf("lane %s: %v, %v; want %v", snd, ids(next[i]), errs[i], want)
		}
	}
}
