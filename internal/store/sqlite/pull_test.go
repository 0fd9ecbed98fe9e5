package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testMessage(id, sender, receiver string, now time.Time, ttl time.Duration) (*core.Message, *core.Receipt) {
	m := &core.Message{ID: id, Sender: sender, Receiver: receiver, Type: "message",
		Parts: []core.Part{{Kind: core.PartText, Text: id}}, Protocol: "atp",
		TTL: ttl, ReceivedAt: now, ExpiresAt: now.Add(ttl)}
	r := &core.Receipt{MessageID: id, Sender: sender, Receiver: receiver, Status: core.StatusQueued,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: m.ExpiresAt}
	return m, r
}

// listed reads back the ids of an answer printed as fmt.Sprint([]string).
func listed(answer string) []string {
	return strings.Fields(strings.Trim(answer, "[]"))
}

func ids(ms []*core.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// TestPullCursorMatchesFullRead runs random sequences of sends, pulls,
// acknowledgements, lane deliveries, expiries and replays against two
// stores, one using pull cursors and one reading the whole queue on every
// pull, and requires the same answer to every call: the cursor is only a
// shortcut. Most sends are hand-offs to a stream (AcceptPulled): the
// store with cursors hands a message out at accept only when a pull of one
// message right then would hand out that message.
func TestPullCursorMatchesFullRead(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := context.Background()
			fast, full := openTest(t), openTest(t)
			full.cursorReach = -1
			stores := []*Store{fast, full}
			rng := rand.New(rand.NewPCG(seed, 7))
			now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			receivers := []string{"r1", "r2"}
			senders := []string{"a", "b", "c"}
			handed := map[string][]string{} // receiver → ids pulled
			handOffs := 0
			var deadLetters []string
			n := 0
			// both runs f on each store and fails unless the answers match.
			both := func(what string, f func(s *Store) (string, error)) string {
				t.Helper()
				var answers [2]string
				for i, s := range stores {
					got, err := f(s)
					if err != nil {
						got = "error: " + err.Error()
					}
					answers[i] = got
				}
				if answers[0] != answers[1] {
					t.Fatalf("%s: with cursors %q, reading all %q", what, answers[0], answers[1])
				}
				return answers[0]
			}
			for step := range 400 {
				what := fmt.Sprintf("step %d", step)
				switch op := rng.IntN(20); {
				case op < 7: // send
					n++
					id := fmt.Sprintf("m%d", n)
					from, to := senders[rng.IntN(len(senders))], receivers[rng.IntN(len(receivers))]
					ttl := []time.Duration{2 * time.Second, 20 * time.Second, time.Hour}[rng.IntN(3)]
					if rng.IntN(4) == 0 {
						both(what+" accept", func(s *Store) (string, error) {
							m, r := testMessage(id, from, to, now, ttl)
							res, err := s.Accept(ctx, m, r, 0)
							return string(res.Receipt.Status), err
						})
						continue
					}
					// A stream is open: the store with cursors may hand the
					// message out at once. Reading the whole queue, that is
					// right only if a pull of one message at this moment
					// would hand out this one.
					vis := []time.Duration{500 * time.Millisecond, 3 * time.Second, time.Minute}[rng.IntN(3)]
					var pulled bool
					got := both(what+" accept pulled", func(s *Store) (string, error) {
						m, r := testMessage(id, from, to, now, ttl)
						if s == fast {
							res, p, err := s.AcceptPulled(ctx, m, r, 0, now, now.Add(vis))
							pulled = p
							if p {
								if res.Receipt.Attempts != 1 || m.Attempts != 1 || m.Seq == 0 {
									return "", fmt.Errorf("handed out with receipt attempts %d, message attempts %d, seq %d", res.Receipt.Attempts, m.Attempts, m.Seq)
								}
								return string(res.Receipt.Status) + " handed out", err
							}
							return string(res.Receipt.Status), err
						}
						res, err := s.Accept(ctx, m, r, 0)
						if err != nil || !pulled {
							return string(res.Receipt.Status), err
						}
						ms, err := s.Pull(ctx, to, now, now.Add(vis), 1, false)
						if len(ms) != 1 || ms[0].ID != id {
							return fmt.Sprintf("a pull would hand out %v", ids(ms)), err
						}
						return string(res.Receipt.Status) + " handed out", err
					})
					if strings.HasSuffix(got, "handed out") {
						handed[to] = append(handed[to], id)
						handOffs++
					}
				case op < 12: // pull
					to := receivers[rng.IntN(len(receivers))]
					vis := []time.Duration{0, 500 * time.Millisecond, 3 * time.Second, time.Minute}[rng.IntN(4)]
					limit := []int{1, 2, 3, 5, 50}[rng.IntN(5)] // 50: empties what it can reach
					autoAck := rng.IntN(10) == 0
					got := both(what+" pull", func(s *Store) (string, error) {
						ms, err := s.Pull(ctx, to, now, now.Add(vis), limit, autoAck)
						return fmt.Sprint(ids(ms)), err
					})
					handed[to] = append(handed[to], listed(got)...)
				case op < 15: // acknowledge some of what was handed out
					to := receivers[rng.IntN(len(receivers))]
					var some []string
					for _, id := range handed[to] {
						if rng.IntN(2) == 0 {
							some = append(some, id)
						}
					}
					both(what+" ack", func(s *Store) (string, error) {
						k, err := s.Ack(ctx, to, some, now)
						return fmt.Sprint(k), err
					})
				case op < 16: // a lane delivery: the first claimed message is delivered, the next retried
					both(what+" lanes", func(s *Store) (string, error) {
						cs, err := s.Claim(ctx, now, now.Add(time.Minute), "o", 10, 2)
						if err != nil {
							return "", err
						}
						var shape []string
						var results []core.LaneResult
						for _, c := range cs {
							res := core.LaneResult{Lane: c.Lane}
							for i, m := range c.Messages {
								shape = append(shape, m.ID)
								o := core.Outcome{MessageID: m.ID, At: now, Kind: core.OutcomeDelivered}
								if i > 0 {
									o.Kind, o.NextAt = core.OutcomeRetry, now.Add(time.Second)
									res.NextAt = o.NextAt
								}
								res.Outcomes = append(res.Outcomes, o)
							}
							results = append(results, res)
						}
						slices.Sort(shape)
						return fmt.Sprint(shape), s.Complete(ctx, "o", results)
					})
				case op < 18: // time passes; expired messages become dead letters
					now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
					got := both(what+" expire", func(s *Store) (string, error) {
						rs, err := s.ExpireDue(ctx, now, 100)
						var out []string
						for _, r := range rs {
							out = append(out, r.MessageID)
						}
						slices.Sort(out)
						return fmt.Sprint(out), err
					})
					deadLetters = append(deadLetters, listed(got)...)
				default: // replay a dead letter: back in the queue behind any cursor
					if len(deadLetters) == 0 {
						continue
					}
					id := deadLetters[rng.IntN(len(deadLetters))]
					both(what+" replay", func(s *Store) (string, error) {
						r, err := s.Replay(ctx, id, now, now.Add(time.Hour))
						if errors.Is(err, core.ErrConflict) {
							return "not a dead letter", nil
						}
						if err != nil {
							return "", err
						}
						return string(r.Status), nil
					})
				}
			}
			if handOffs < 10 {
				t.Errorf("only %d messages handed out at accept: the run hardly tested it", handOffs)
			}
			// Finally, every message ends the same way in both.
			for i := 1; i <= n; i++ {
				id := fmt.Sprintf("m%d", i)
				both("receipt "+id, func(s *Store) (string, error) {
					r, err := s.GetReceipt(ctx, id)
					if err != nil {
						return "", err
					}
					return fmt.Sprintf("%s attempts=%d", r.Status, r.Attempts), nil
				})
			}
		})
	}
}

// TestPullCursorUnderConcurrentSends pulls while many senders write, so
// pulls and accepts share transactions: every message is handed out once
// (claims outlast the test) and none is skipped.
func TestPullCursorUnderConcurrentSends(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	const senders, each = 16, 60
	var wg sync.WaitGroup
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				m, r := testMessage(fmt.Sprintf("s%d-%d", i, j), fmt.Sprint("s", i), "r", now, time.Hour)
				if _, err := s.Accept(ctx, m, r, 0); err != nil {
					t.Errorf("accept: %v", err)
					return
				}
			}
		}()
	}
	seen := map[string]int{}
	var mu sync.Mutex
	pull := func() int {
		ms, err := s.Pull(ctx, "r", now, now.Add(time.Hour), 7, false)
		if err != nil {
			t.Errorf("pull: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			seen[m.ID]++
		}
		return len(ms)
	}
	var pullers sync.WaitGroup
	done := make(chan struct{})
	for range 3 {
		pullers.Add(1)
		go func() {
			defer pullers.Done()
			for {
				select {
				case <-done:
					return
				default:
					pull()
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	pullers.Wait()
	for pull() > 0 {
	}
	if len(seen) != senders*each {
		t.Fatalf("%d messages handed out, want %d", len(seen), senders*each)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s handed out %d times while claimed", id, k)
		}
	}
}

func TestPullCursorAfterReopen(t *testing.T) {
	// A reopened store knows its newest message, so a receiver with nothing
	// to pull gets a cursor at the end of the table, not at its start
	// (from where every later pull would read the whole table).
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 5 {
		m, r := testMessage(fmt.Sprint("m", i), "a", "other", now, time.Hour)
		if _, err := s.Accept(ctx, m, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.lastSeq != 5 {
		t.Fatalf("lastSeq = %d after reopening, want 5", s.lastSeq)
	}
	if ms, err := s.Pull(ctx, "r", now, now.Add(time.Minute), 10, false); err != nil || len(ms) != 0 {
		t.Fatalf("pull: %v %v", ms, err)
	}
	if c := s.cursors["r"]; c.after != 5 {
		t.Fatalf("cursor after = %d, want 5", c.after)
	}
}

func TestPullCursorsAreBounded(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	s.maxCursors = 2
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, to := range []string{"r1", "r2", "r3", "r1"} {
		m, r := testMessage(fmt.Sprint("m", i), "a", to, now, time.Hour)
		if _, err := s.Accept(ctx, m, r, 0); err != nil {
			t.Fatal(err)
		}
		ms, err := s.Pull(ctx, to, now, now.Add(time.Minute), 10, false)
		if err != nil || len(ms) != 1 || ms[0].ID != m.ID {
			t.Fatalf("pull for %s: %v %v; want [%s]", to, ids(ms), err, m.ID)
		}
		if len(s.cursors) > 2 {
			t.Fatalf("%d cursors kept, want at most 2", len(s.cursors))
		}
	}
}
