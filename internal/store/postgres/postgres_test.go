package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/postgres"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// The suite needs a server: SWITCHBOARD_TEST_POSTGRES is its URL (see
// scripts/postgres-test-server.sh). Without it the tests skip, except under
// CI, where they fail so the PostgreSQL backend cannot go untested.
const envURL = "SWITCHBOARD_TEST_POSTGRES"

func serverURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(envURL)
	if u == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is not set: CI must run the PostgreSQL store tests (export %s=\"$(scripts/postgres-test-server.sh start)\")", envURL, envURL)
		}
		tb.Skipf("%s is not set; start a server with scripts/postgres-test-server.sh", envURL)
	}
	return u
}

// freshSchema creates an empty schema that is dropped when the test ends and
// returns a URL that selects it (search_path) and its name, which tests also
// use as the notification channel prefix so parallel runs do not cross-talk.
func freshSchema(tb testing.TB) (string, string) {
	tb.Helper()
	base := serverURL(tb)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := "sbtest_" + hex.EncodeToString(rnd[:])
	admin := func(sql string) {
		tb.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Fatalf("connect to %s: %v", envURL, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			tb.Fatalf("%s: %v", sql, err)
		}
	}
	admin("CREATE SCHEMA " + schema)
	tb.Cleanup(func() { admin("DROP SCHEMA " + schema + " CASCADE") })
	return withSearchPath(tb, base, schema), schema
}

func withSearchPath(tb testing.TB, base, schema string) string {
	if !strings.Contains(base, "://") { // key=value connection string
		return base + " search_path=" + schema
	}
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("parse %s: %v", envURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func openAt(tb testing.TB, dbURL, prefix string) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(context.Background(), dbURL, postgres.Options{MaxConns: 8, ChannelPrefix: prefix})
	if err != nil {
		tb.Fatalf("postgres.Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// twoInstances opens two stores on one fresh schema, as two hub
// instances sharing a database would.
func twoInstances(tb testing.TB) (*postgres.Store, *postgres.Store) {
	tb.Helper()
	u, schema := freshSchema(tb)
	return openAt(tb, u, schema), openAt(tb, u, schema)
}

func open(tb testing.TB) *postgres.Store {
	tb.Helper()
	u, schema := freshSchema(tb)
	return openAt(tb, u, schema)
}

func TestContract(t *testing.T) {
	serverURL(t) // skip (or fail under CI) once, not in every case
	storetest.Run(t, func(t *testing.T) core.Store { return open(t) })
}

func TestReadBytes(t *testing.T) {
	serverURL(t)
	storetest.RunReadBytes(t, func(t *testing.T) core.Store {
		u, schema := freshSchema(t)
		s, err := postgres.Open(context.Background(), u, postgres.Options{MaxConns: 8, ChannelPrefix: schema, ReadBytes: storetest.ReadBytes})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// BenchmarkStore runs the store benchmarks with the production pool size
// (Options.MaxConns zero: 16 connections).
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) core.Store {
		u, schema := freshSchema(b)
		s, err := postgres.Open(context.Background(), u, postgres.Options{ChannelPrefix: schema})
		if err != nil {
			b.Fatalf("postgres.Open: %v", err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}

func TestMigrate(t *testing.T) {
	ctx := context.Background()
	u, schema := freshSchema(t)
	if err := postgres.Migrate(ctx, u); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if err := postgres.Migrate(ctx, u); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	// Instances starting together each run the migrations; all must succeed.
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			s, err := postgres.Open(ctx, u, postgres.Options{MaxConns: 2, ChannelPrefix: schema})
			if err == nil {
				err = s.Ping(ctx)
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open: %v", err)
		}
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, maxVersion int
	if err := conn.QueryRow(ctx, "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &maxVersion); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	last, _, _ := strings.Cut(filepath.Base(files[len(files)-1]), "_")
	if n != len(files) || strconv.Itoa(maxVersion) != strings.TrimLeft(last, "0") {
		t.Fatalf("schema_migrations: %d rows, max version %d; want each of the %d migrations once, the last %s", n, maxVersion, len(files), last)
	}
}

func TestMigrateFresh(t *testing.T) {
	// A fresh schema opened concurrently without a prior Migrate.
	ctx := context.Background()
	u, schema := freshSchema(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(ctx, u, postgres.Options{MaxConns: 2, ChannelPrefix: schema})
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open on a fresh schema: %v", err)
		}
	}
}

var base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func accept(t *testing.T, s core.Store, id, sender, receiver string, at time.Time) {
	t.Helper()
	m := &core.Message{ID: id, Sender: sender, Receiver: receiver, Type: "message", ReceivedAt: at, ExpiresAt: at.Add(time.Hour), TTL: time.Hour}
	r := &core.Receipt{MessageID: id, Sender: sender, Receiver: receiver, Status: core.StatusQueued, CreatedAt: at, UpdatedAt: at, ExpiresAt: m.ExpiresAt}
	if _, err := s.Accept(context.Background(), m, r, 0); err != nil {
		t.Fatalf("Accept %s: %v", id, err)
	}
}

// Two instances on one database, each with several scheduler goroutines,
// claim concurrently: every lane goes to exactly one of them.
func TestClaimExclusiveAcrossInstances(t *testing.T) {
	s1, s2 := twoInstances(t)
	const lanes, perLane = 120, 3
	for l := range lanes {
		for i := range perLane {
			accept(t, s1, fmt.Sprintf("m-%d-%d", l, i), fmt.Sprintf("sender-%d", l), fmt.Sprintf("receiver-%d", l%7), base)
		}
	}
	type grab struct {
		owner string
		ids   []string
	}
	var mu sync.Mutex
	got := make(map[core.Lane][]grab)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, s := range []*postgres.Store{s1, s2, s1, s2, s1, s2} {
		owner := fmt.Sprintf("instance-%d/worker-%d", i%2, i)
		wg.Go(func() {
			<-start
			empty := 0
			for empty < 3 {
				cs, err := s.Claim(context.Background(), base.Add(time.Minute), base.Add(time.Hour), owner, 4, 10)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(cs) == 0 {
					empty++
					continue
				}
				empty = 0
				mu.Lock()
				for _, c := range cs {
					var ids []string
					for _, m := range c.Messages {
						ids = append(ids, m.ID)
					}
					got[c.Lane] = append(got[c.Lane], grab{owner, ids})
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(got) != lanes {
		t.Fatalf("%d lanes claimed, want %d", len(got), lanes)
	}
	owners := map[string]int{}
	for l, gs := range got {
		if len(gs) != 1 {
			t.Fatalf("lane %v claimed %d times: %+v", l, len(gs), gs)
		}
		if len(gs[0].ids) != perLane {
			t.Fatalf("lane %v claimed with %v, want %d messages", l, gs[0].ids, perLane)
		}
		owners[gs[0].owner[:len("instance-0")]]++
	}
	t.Logf("lanes per instance: %v", owners)
}

// An instance that claimed lanes and died: the other takes them over after
// claim_until, not before.
func TestCrashTakeoverAcrossInstances(t *testing.T) {
	ctx := context.Background()
	s1, s2 := twoInstances(t)
	accept(t, s1, "m1", "alice", "bob", base)
	cs, err := s1.Claim(ctx, base, base.Add(30*time.Second), "instance-1", 10, 10)
	if err != nil || len(cs) != 1 {
		t.Fatalf("instance-1 Claim = %v, %v", cs, err)
	}
	s1.Close() // crash: the claim is never completed
	cs, err = s2.Claim(ctx, base.Add(29*time.Second), base.Add(time.Minute), "instance-2", 10, 10)
	if err != nil || len(cs) != 0 {
		t.Fatalf("instance-2 Claim before claimUntil = %v, %v; want nothing", cs, err)
	}
	cs, err = s2.Claim(ctx, base.Add(31*time.Second), base.Add(time.Minute), "instance-2", 10, 10)
	if err != nil || len(cs) != 1 || cs[0].Messages[0].ID != "m1" {
		t.Fatalf("instance-2 Claim after claimUntil = %v, %v; want the lane with m1", cs, err)
	}
	if err := s2.Complete(ctx, "instance-2", []core.LaneResult{{Lane: cs[0].Lane, Outcomes: []core.Outcome{
		{MessageID: "m1", Kind: core.OutcomeDelivered, At: base.Add(32 * time.Second)},
	}}}); err != nil {
		t.Fatal(err)
	}
	r, err := s2.GetReceipt(ctx, "m1")
	if err != nil || r.Status != core.StatusDelivered {
		t.Fatalf("receipt = %v, %v", r, err)
	}
}

func recv(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	return waitfor.Recv(t, "a notification: "+what, ch)
}

// A NOTIFY from one instance reaches another's listener, both raw and as the
// store's own wake-ups after Accept and Complete.
func TestNotifyAcrossInstances(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, schema := freshSchema(t)
	s1, s2 := openAt(t, u, schema), openAt(t, u, schema)

	raw, err := s2.Notifier().Listen(ctx, schema+"_custom")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if err := s1.Notifier().Notify(ctx, schema+"_custom", "hello"); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	if p := recv(t, raw, "raw notify"); p != "hello" {
		t.Fatalf("payload = %q, want hello", p)
	}

	due, err := s2.Notifier().Listen(ctx, s2.DueChannel())
	if err != nil {
		t.Fatal(err)
	}
	receipts, err := s2.Notifier().Listen(ctx, s2.ReceiptChannel())
	if err != nil {
		t.Fatal(err)
	}
	accept(t, s1, "m1", "alice", "bob", base)
	p := recv(t, due, "due after Accept on the other instance")
	// The accepting instance claims the lane itself (its relay has woken
	// its scheduler); the other only wakes its streams.
	if s1.DueWake(p) != postgres.WakeNone || s2.DueWake(p) != postgres.WakeStreams {
		t.Fatalf("due payload %q after Accept: DueWake %v on the accepting instance, %v on the other; want WakeNone, WakeStreams",
			p, s1.DueWake(p), s2.DueWake(p))
	}

	cs, err := s1.Claim(ctx, base, base.Add(time.Minute), "instance-1", 10, 10)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim = %v, %v", cs, err)
	}
	if err := s1.Complete(ctx, "instance-1", []core.LaneResult{{Lane: cs[0].Lane, Outcomes: []core.Outcome{
		{MessageID: "m1", Kind: core.OutcomeDelivered, At: base.Add(time.Second)},
	}}}); err != nil {
		t.Fatal(err)
	}
	// The releasing instance looks at the lane again (an accept elsewhere
	// may have raced the release); the other only wakes its streams.
	p = recv(t, due, "due after Complete released the lane")
	if s1.DueWake(p) != postgres.WakeAll || s2.DueWake(p) != postgres.WakeStreams {
		t.Fatalf("due payload %q after a release: DueWake %v on the releasing instance, %v on the other; want WakeAll, WakeStreams",
			p, s1.DueWake(p), s2.DueWake(p))
	}
	// The notification carries the receipt as stored.
	notes := postgres.ParseReceipts(recv(t, receipts, "receipt after Complete"))
	if len(notes) != 1 || notes[0].ID != "m1" || notes[0].Receipt == nil {
		t.Fatalf("receipt notes %+v, want m1 with its receipt", notes)
	}
	stored, err := s2.GetReceipt(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, notes[0].Receipt), jsonOf(t, stored); got != want {
		t.Fatalf("notified receipt\n %s\nstored\n %s", got, want)
	}

	// A listener whose context ends gets its channel closed.
	sub, cancelSub := context.WithCancel(ctx)
	ch, err := s2.Notifier().Listen(sub, schema+"_short")
	if err != nil {
		t.Fatal(err)
	}
	cancelSub()
	waitfor.OK(t, "the channel to close after its context ended", func() error {
		select {
		case _, ok := <-ch:
			if ok {
				t.Fatal("unexpected notification")
			}
			return nil
		default:
			return errors.New("still open")
		}
	})
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReceiptNotifications: what the receipt channel carries for each way
// a message ends on another instance — the receipt as stored when the
// ending write has it and it fits, else the id alone (a listener reads
// the receipt).
func TestReceiptNotifications(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s1, s2 := twoInstances(t)
	receipts, err := s2.Notifier().Listen(ctx, s2.ReceiptChannel())
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(id string, o core.Outcome, renew bool) {
		t.Helper()
		cs, err := s1.Claim(ctx, base, base.Add(time.Minute), "instance-1", 10, 10)
		if err != nil || len(cs) != 1 || cs[0].Messages[0].ID != id {
			t.Fatalf("Claim = %v, %v; want %s's lane", cs, err, id)
		}
		o.MessageID = id
		res := core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{o}}
		if renew {
			_, err = s1.CompleteRenew(ctx, "instance-1", res, base, base.Add(time.Minute), 10)
		} else {
			err = s1.Complete(ctx, "instance-1", []core.LaneResult{res})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	at := base.Add(time.Second)
	for _, c := range []struct {
		name        string
		end         func(id string)
		wantReceipt bool
	}{
		{"delivered (Complete)", func(id string) {
			deliver(id, core.Outcome{Kind: core.OutcomeDelivered, At: at, Code: 200, Reply: []byte(`{"ok":true}`)}, false)
		}, true},
		{"delivered (CompleteRenew)", func(id string) {
			deliver(id, core.Outcome{Kind: core.OutcomeDelivered, At: at, Code: 200}, true)
		}, true},
		{"rejected", func(id string) {
			deliver(id, core.Outcome{Kind: core.OutcomeRejected, At: at, Code: 422, Error: "no", Reply: []byte(`{"error":"no"}`)}, false)
		}, true},
		{"reply too large for a notification", func(id string) {
			reply := []byte(`{"pad":"` + strings.Repeat("x", 8000) + `"}`)
			deliver(id, core.Outcome{Kind: core.OutcomeDelivered, At: at, Code: 200, Reply: reply}, false)
		}, false},
		{"expired", func(id string) {
			if rs, err := s1.ExpireDue(ctx, base.Add(2*time.Hour), 10); err != nil || len(rs) != 1 {
				t.Fatalf("ExpireDue = %v, %v", rs, err)
			}
		}, true},
		{"acknowledged", func(id string) {
			if n, err := s1.Ack(ctx, "bob", []string{id}, at); err != nil || n != 1 {
				t.Fatalf("Ack = %d, %v", n, err)
			}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := strings.ReplaceAll(c.name, " ", "-")
			accept(t, s1, id, "alice", "bob", base)
			c.end(id)
			notes := postgres.ParseReceipts(recv(t, receipts, "receipt of "+id))
			if len(notes) != 1 || notes[0].ID != id {
				t.Fatalf("notes %+v, want one for %s", notes, id)
			}
			if got := notes[0].Receipt != nil; got != c.wantReceipt {
				t.Fatalf("receipt carried: %v, want %v", got, c.wantReceipt)
			}
			stored, err := s2.GetReceipt(ctx, id)
			if err != nil || !stored.Status.Terminal() {
				t.Fatalf("stored receipt %+v, %v; want terminal", stored, err)
			}
			if c.wantReceipt {
				if got, want := jsonOf(t, notes[0].Receipt), jsonOf(t, stored); got != want {
					t.Fatalf("notified receipt\n %s\nstored\n %s", got, want)
				}
			}
		})
	}
}

// TestDueOfRestoredLanes: lanes the store restores itself (a sweep finds
// queued messages without a lane) are notified for every instance to
// claim now: no instance's relay made them due, so none has woken.
func TestDueOfRestoredLanes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, schema := freshSchema(t)
	s1, s2 := openAt(t, u, schema), openAt(t, u, schema)
	accept(t, s1, "m1", "alice", "bob", base)
	due, err := s2.Notifier().Listen(ctx, s2.DueChannel())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DELETE FROM lanes"); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.PurgeBefore(ctx, base, 100); err != nil {
		t.Fatal(err)
	}
	// The accept's own notification may come first (it is sent after
	// the commit, by the notify loop); the sweep's follows.
	p := recv(t, due, "due after the sweep restored the lane")
	if p != "" && s2.DueWake(p) == postgres.WakeStreams && s1.DueWake(p) == postgres.WakeNone {
		p = recv(t, due, "due after the sweep restored the lane, after the accept's")
	}
	if s1.DueWake(p) != postgres.WakeAll || s2.DueWake(p) != postgres.WakeAll {
		t.Fatalf("due payload %q: DueWake %v, %v; want WakeAll on both", p, s1.DueWake(p), s2.DueWake(p))
	}
	if cs, err := s2.Claim(ctx, base, base.Add(time.Minute), "instance-2", 10, 10); err != nil || len(cs) != 1 {
		t.Fatalf("Claim after the restore = %v, %v; want m1's lane", cs, err)
	}
}

// The listening connection is killed by the server; the notifier reconnects,
// tells listeners to re-read (empty payload) and delivers again.
func TestListenerReconnects(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, schema := freshSchema(t)
	s := openAt(t, u, schema)
	ch, err := s.Notifier().Listen(ctx, schema+"_x")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
		schema+"_listener").Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminate listener: %d killed, %v", killed, err)
	}
	if p := recv(t, ch, "after reconnect"); p != "" {
		t.Fatalf("first payload after reconnect = %q, want empty", p)
	}
	if err := s.Notifier().Notify(ctx, schema+"_x", "again"); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, ch, "notify after reconnect"); p != "again" {
		t.Fatalf("payload = %q, want again", p)
	}
}

// TestAcceptPulledReadsABoundedHead hands a message out only when the first
// 256 messages of the receiver's queue show that nothing can be pulled: a
// receiver with more claimed messages than that gets no hand-off (it pulls
// instead), so an accept never reads a long queue.
func TestAcceptPulledReadsABoundedHead(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	msg := func(id string) (*core.Message, *core.Receipt) {
		m := &core.Message{ID: id, Sender: "a", Receiver: "r", Type: "t", TTL: time.Hour, ReceivedAt: now, ExpiresAt: now.Add(time.Hour)}
		return m, &core.Receipt{MessageID: id, Sender: "a", Receiver: "r", Status: core.StatusQueued, CreatedAt: now, UpdatedAt: now, ExpiresAt: m.ExpiresAt}
	}
	for i := range 257 {
		m, r := msg(fmt.Sprintf("q%03d", i))
		if _, err := s.Accept(ctx, m, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	if ms, err := s.Pull(ctx, "r", now, now.Add(time.Minute), 1000, false); err != nil || len(ms) != 257 {
		t.Fatalf("pull: %d messages, %v", len(ms), err)
	}
	m, r := msg("over")
	if _, pulled, err := s.AcceptPulled(ctx, m, r, 0, now, now.Add(time.Minute)); err != nil || pulled {
		t.Fatalf("with 257 claimed messages queued: pulled %v, %v; want not handed out", pulled, err)
	}
	// Leave 256 claimed ones: the head now tells.
	if n, err := s.Ack(ctx, "r", []string{"q000", "over"}, now); err != nil || n != 2 {
		t.Fatalf("ack: %d, %v", n, err)
	}
	m, r = msg("within")
	if _, pulled, err := s.AcceptPulled(ctx, m, r, 0, now, now.Add(time.Minute)); err != nil || !pulled {
		t.Fatalf("with 256 claimed messages queued: pulled %v, %v; want handed out", pulled, err)
	}
}
