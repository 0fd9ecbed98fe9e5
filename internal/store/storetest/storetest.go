// Package storetest is the contract suite every core.Store backend must pass.
// A backend's test calls Run with a function that opens a fresh, empty store;
// its benchmarks call Bench the same way. The suite drives the store with
// explicit times from a fixed base (no sleeps, no wall clock), so every case
// is deterministic.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// base is the suite's fixed clock origin; every time is an offset from it.
var base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

// defaultTTL keeps suite messages alive well past every time the cases use,
// unless a case sets ExpiresAt itself.
const defaultTTL = 24 * time.Hour

// Run runs the contract suite. open must return a new, empty store for each
// call and arrange (with t.Cleanup) for it to be closed and discarded.
func Run(t *testing.T, open func(t *testing.T) core.Store) {
	t.Helper()
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Agents", agentCases},
		{"Accept", acceptCases},
		{"Claim", claimCases},
		{"Complete", completeCases},
		{"Renew", renewCases},
		{"Isolation", isolationCases},
		{"Queue", queueCases},
		{"Pull", pullCases},
		{"DeadLetters", deadLetterCases},
		{"Conversations", conversationCases},
		{"Records", recordCases},
		{"Identity", identityCases},
		{"Text", textCases},
		{"Flow", flowCases},
		{"Concurrent", concurrentCases},
		{"Ping", []testCase{{"answers", func(t *testing.T, s core.Store) {
			if err := s.Ping(context.Background()); err != nil {
				t.Fatalf("Ping: %v", err)
			}
		}}}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.cases {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
			}
		})
	}
}

type testCase struct {
	name string
	fn   func(t *testing.T, s core.Store)
}

// ---- helpers ----

// newMessage builds a queued message from sender to receiver received at
// recv, and the receipt the relay would store with it.
func newMessage(id, sender, receiver string, recv time.Time) (*core.Message, *core.Receipt) {
	m := &core.Message{
		ID:         id,
		Sender:     sender,
		Receiver:   receiver,
		Type:       "message",
		Parts:      []core.Part{{Kind: core.PartText, Text: "body of " + id}},
		Protocol:   "atp",
		TTL:        defaultTTL,
		ReceivedAt: recv,
		ExpiresAt:  recv.Add(defaultTTL),
	}
	return m, receiptFor(m)
}

func receiptFor(m *core.Message) *core.Receipt {
	return &core.Receipt{
		MessageID: m.ID,
		Sender:    m.Sender,
		Receiver:  m.Receiver,
		Status:    core.StatusQueued,
		History:   []core.ReceiptEvent{{At: m.ReceivedAt, Status: core.StatusQueued, Detail: "accepted"}},
		CreatedAt: m.ReceivedAt,
		UpdatedAt: m.ReceivedAt,
		ExpiresAt: m.ExpiresAt,
	}
}

func mustAcceptMsg(t *testing.T, s core.Store, m *core.Message, r *core.Receipt) core.AcceptResult {
	t.Helper()
	res, err := s.Accept(context.Background(), m, r, 0)
	if err != nil {
		t.Fatalf("Accept %s: %v", m.ID, err)
	}
	if res.Duplicate {
		t.Fatalf("Accept %s: unexpected duplicate", m.ID)
	}
	return res
}

// send accepts a fresh queued message and returns it.
func send(t *testing.T, s core.Store, id, sender, receiver string, recv time.Time) *core.Message {
	t.Helper()
	m, r := newMessage(id, sender, receiver, recv)
	mustAcceptMsg(t, s, m, r)
	return m
}

func claim(t *testing.T, s core.Store, now, until time.Time, owner string, maxLanes, perLane int) []core.LaneClaim {
	t.Helper()
	cs, err := s.Claim(context.Background(), now, until, owner, maxLanes, perLane)
	if err != nil {
		t.Fatalf("Claim(%s, owner %s): %v", now.Sub(base), owner, err)
	}
	return cs
}

func complete(t *testing.T, s core.Store, owner string, results ...core.LaneResult) {
	t.Helper()
	if err := s.Complete(context.Background(), owner, results); err != nil {
		t.Fatalf("Complete(owner %s): %v", owner, err)
	}
}

// settle claims every due lane at now and records the given outcome for
// each listed message, releasing the lanes due at once; messages not listed
// stay queued. It fails if a listed message was not claimed.
func settle(t *testing.T, s core.Store, now time.Time, outcomes map[string]core.Outcome) {
	t.Helper()
	cs := claim(t, s, now, now.Add(time.Minute), "settle", 1000, 1000)
	seen := 0
	var results []core.LaneResult
	for _, c := range cs {
		lr := core.LaneResult{Lane: c.Lane}
		for _, m := range c.Messages {
			if o, ok := outcomes[m.ID]; ok {
				o.MessageID = m.ID
				if o.At.IsZero() {
					o.At = now
				}
				lr.Outcomes = append(lr.Outcomes, o)
				seen++
			}
		}
		results = append(results, lr)
	}
	if seen != len(outcomes) {
		t.Fatalf("settle at %s: claimed %d of the %d messages to settle", now.Sub(base), seen, len(outcomes))
	}
	complete(t, s, "settle", results...)
}

// mustPull pulls up to 100 of receiver's messages at base+now, leased until
// base+until.
func mustPull(t *testing.T, s core.Store, receiver string, now, until time.Duration) []*core.Message {
	t.Helper()
	ms, err := s.Pull(context.Background(), receiver, at(now), at(until), 100, false)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	return ms
}

func receipt(t *testing.T, s core.Store, id string) *core.Receipt {
	t.Helper()
	r, err := s.GetReceipt(context.Background(), id)
	if err != nil {
		t.Fatalf("GetReceipt %s: %v", id, err)
	}
	return r
}

func depth(t *testing.T, s core.Store, receiver string) int {
	t.Helper()
	n, err := s.QueueDepth(context.Background(), receiver)
	if err != nil {
		t.Fatalf("QueueDepth %s: %v", receiver, err)
	}
	return n
}

func wantDepth(t *testing.T, s core.Store, receiver string, want int) {
	t.Helper()
	if got := depth(t, s, receiver); got != want {
		t.Fatalf("QueueDepth(%s) = %d, want %d", receiver, got, want)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want errors.Is(err, %v)", what, err, target)
	}
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %s, want %s", what, got.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano))
	}
}

func messageIDs(ms []*core.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func receiptIDs(rs []*core.Receipt) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.MessageID
	}
	return out
}

func wantIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// claimShape renders claims as "receiver/sender:[ids]" in order.
func claimShape(cs []core.LaneClaim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%s/%s:%s", c.Lane.Receiver, c.Lane.Sender, strings.Join(messageIDs(c.Messages), ","))
	}
	return out
}

func wantClaims(t *testing.T, what string, cs []core.LaneClaim, want ...string) {
	t.Helper()
	got := claimShape(cs)
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: claimed %q, want %q", what, got, want)
	}
}

func lastEvent(t *testing.T, r *core.Receipt) core.ReceiptEvent {
	t.Helper()
	if len(r.History) == 0 {
		t.Fatalf("receipt %s has no history", r.MessageID)
	}
	return r.History[len(r.History)-1]
}

// normMessage returns a copy of m with its times in UTC, for DeepEqual.
func normMessage(m *core.Message) core.Message {
	c := *m
	c.SentAt, c.ReceivedAt, c.ExpiresAt = c.SentAt.UTC(), c.ReceivedAt.UTC(), c.ExpiresAt.UTC()
	return c
}

func normReceipt(r *core.Receipt) core.Receipt {
	c := *r
	c.CreatedAt, c.UpdatedAt, c.ExpiresAt, c.NextAttempt = c.CreatedAt.UTC(), c.UpdatedAt.UTC(), c.ExpiresAt.UTC(), c.NextAttempt.UTC()
	c.History = make([]core.ReceiptEvent, len(r.History))
	for i, e := range r.History {
		e.At = e.At.UTC()
		c.History[i] = e
	}
	if len(c.Reply) == 0 {
		c.Reply = nil
	}
	return c
}

func jsonText(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
