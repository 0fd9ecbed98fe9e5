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
	"reflect"
	"slices"
	"strings"
	"sync"
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

// ---- agents ----

func testAgent(id string) *core.Agent {
	return &core.Agent{
		ID: id,
		Card: core.Card{
			Name:         "Agent " + id,
			Description:  "does things",
			Version:      "1.2.3",
			Owner:        &core.Owner{UserID: "u1", UserName: "Ada", Organization: "Org"},
			Device:       &core.Device{DeviceID: "d1", Platform: "linux"},
			ContentTypes: []string{"text", "data"},
			Tools:        []string{"grep"},
			Access:       &core.Access{Public: false, AllowedAgents: []string{"agent://hub/*"}, RequireAuth: true},
			Extra:        json.RawMessage(`{"a2a":{"skills":["x"]}}`),
		},
		Capabilities: []string{"search", "summarize"},
		Endpoint:     core.Endpoint{Kind: core.EndpointATP, URL: "http://127.0.0.1:9/hook"},
		Protocol:     "atp",
		LeaseSeconds: 60,
		ExpiresAt:    at(time.Minute),
		RegisteredAt: base,
		LastSeen:     base,
	}
}

func normAgent(a *core.Agent) core.Agent {
	c := *a
	c.ExpiresAt, c.RegisteredAt, c.LastSeen = c.ExpiresAt.UTC(), c.RegisteredAt.UTC(), c.LastSeen.UTC()
	return c
}

var agentCases = []testCase{
	{"upsert creates then updates keeping RegisteredAt", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		a := testAgent("a1")
		want := normAgent(a)
		created, err := s.UpsertAgent(ctx, a)
		if err != nil || !created {
			t.Fatalf("UpsertAgent new = %v, %v; want true, nil", created, err)
		}
		got, err := s.GetAgent(ctx, "a1")
		if err != nil {
			t.Fatalf("GetAgent: %v", err)
		}
		if g := normAgent(got); !reflect.DeepEqual(g, want) {
			t.Fatalf("GetAgent round trip:\n got %s\nwant %s", jsonText(g), jsonText(want))
		}

		b := testAgent("a1")
		b.RegisteredAt = at(time.Hour) // must be ignored for an existing agent
		b.Card.Name = "renamed"
		b.Capabilities = []string{"translate"}
		b.ExpiresAt, b.LastSeen = at(2*time.Hour), at(time.Hour)
		created, err = s.UpsertAgent(ctx, b)
		if err != nil || created {
			t.Fatalf("UpsertAgent existing = %v, %v; want false, nil", created, err)
		}
		got, err = s.GetAgent(ctx, "a1")
		if err != nil {
			t.Fatalf("GetAgent: %v", err)
		}
		wantTime(t, "RegisteredAt after update", got.RegisteredAt, base)
		wantTime(t, "ExpiresAt after update", got.ExpiresAt, at(2*time.Hour))
		wantTime(t, "LastSeen after update", got.LastSeen, at(time.Hour))
		if got.Card.Name != "renamed" || !slices.Equal(got.Capabilities, []string{"translate"}) {
			t.Fatalf("updated agent = %s", jsonText(got))
		}
	}},
	{"count agents", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		want := func(n int) {
			t.Helper()
			if got, err := s.CountAgents(ctx); err != nil || got != n {
				t.Fatalf("CountAgents = %d, %v; want %d", got, err, n)
			}
		}
		want(0)
		for _, id := range []string{"a1", "a2", "a1"} { // an update is not a new agent
			if _, err := s.UpsertAgent(ctx, testAgent(id)); err != nil {
				t.Fatal(err)
			}
		}
		lapsed := testAgent("a3")
		lapsed.ExpiresAt = at(-time.Minute) // counted: its queue and id are kept
		if _, err := s.UpsertAgent(ctx, lapsed); err != nil {
			t.Fatal(err)
		}
		want(3)
		if err := s.DeleteAgent(ctx, "a2"); err != nil {
			t.Fatal(err)
		}
		want(2)
	}},
	{"get unknown is ErrNotFound", func(t *testing.T, s core.Store) {
		_, err := s.GetAgent(context.Background(), "nobody")
		wantErr(t, "GetAgent unknown", err, core.ErrNotFound)
	}},
	{"list filters", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		mk := func(id string, caps, tools []string, expires time.Duration) {
			a := testAgent(id)
			a.Capabilities, a.Card.Tools, a.ExpiresAt = caps, tools, at(expires)
			if _, err := s.UpsertAgent(ctx, a); err != nil {
				t.Fatalf("UpsertAgent %s: %v", id, err)
			}
		}
		mk("alpha", []string{"search"}, nil, time.Minute)
		mk("bravo", []string{"summarize"}, []string{"search"}, 2*time.Minute)
		mk("charlie", []string{"other"}, []string{"grep"}, 3*time.Minute)
		mk("delta", nil, nil, -time.Minute)
		// A capability removed by an update must no longer match.
		mk("echo", []string{"search"}, nil, time.Hour)
		mk("echo", []string{"none"}, nil, time.Hour)

		tests := []struct {
			name   string
			filter core.AgentFilter
			want   []string
			count  int // when > 0, only the count is checked (Limit)
		}{
			{"all", core.AgentFilter{}, []string{"alpha", "bravo", "charlie", "delta", "echo"}, 0},
			{"capability or tool", core.AgentFilter{Capability: "search"}, []string{"alpha", "bravo"}, 0},
			{"tool only", core.AgentFilter{Capability: "grep"}, []string{"charlie"}, 0},
			{"unknown capability", core.AgentFilter{Capability: "fly"}, []string{}, 0},
			{"alive", core.AgentFilter{AliveAt: at(90 * time.Second)}, []string{"bravo", "charlie", "echo"}, 0},
			{"alive and capable", core.AgentFilter{Capability: "search", AliveAt: at(90 * time.Second)}, []string{"bravo"}, 0},
			{"lease ending exactly then is not alive", core.AgentFilter{AliveAt: at(3 * time.Minute)}, []string{"echo"}, 0},
			{"limit", core.AgentFilter{Limit: 2}, nil, 2},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				as, err := s.ListAgents(ctx, tt.filter)
				if err != nil {
					t.Fatalf("ListAgents: %v", err)
				}
				got := make([]string, 0, len(as))
				for _, a := range as {
					got = append(got, a.ID)
				}
				if tt.count > 0 {
					if len(got) != tt.count {
						t.Fatalf("ListAgents(%+v) returned %d agents, want %d", tt.filter, len(got), tt.count)
					}
					return
				}
				slices.Sort(got)
				wantIDs(t, fmt.Sprintf("ListAgents(%+v)", tt.filter), got, tt.want)
			})
		}
	}},
	{"renew lease", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		if _, err := s.UpsertAgent(ctx, testAgent("a1")); err != nil {
			t.Fatal(err)
		}
		if err := s.RenewLease(ctx, "a1", at(time.Hour), at(30*time.Minute)); err != nil {
			t.Fatalf("RenewLease: %v", err)
		}
		a, err := s.GetAgent(ctx, "a1")
		if err != nil {
			t.Fatal(err)
		}
		wantTime(t, "ExpiresAt", a.ExpiresAt, at(time.Hour))
		wantTime(t, "LastSeen", a.LastSeen, at(30*time.Minute))
		wantTime(t, "RegisteredAt", a.RegisteredAt, base)
		as, err := s.ListAgents(ctx, core.AgentFilter{AliveAt: at(59 * time.Minute)})
		if err != nil || len(as) != 1 {
			t.Fatalf("ListAgents alive after renew = %d agents, %v; want 1", len(as), err)
		}
		wantErr(t, "RenewLease unknown", s.RenewLease(ctx, "nobody", at(time.Hour), base), core.ErrNotFound)
	}},
	{"delete", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		for _, id := range []string{"a1", "a2"} {
			if _, err := s.UpsertAgent(ctx, testAgent(id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteAgent(ctx, "a1"); err != nil {
			t.Fatalf("DeleteAgent: %v", err)
		}
		_, err := s.GetAgent(ctx, "a1")
		wantErr(t, "GetAgent deleted", err, core.ErrNotFound)
		as, err := s.ListAgents(ctx, core.AgentFilter{Capability: "search"})
		if err != nil || len(as) != 1 || as[0].ID != "a2" {
			t.Fatalf("ListAgents after delete = %v, %v; want only a2", as, err)
		}
		wantErr(t, "DeleteAgent again", s.DeleteAgent(ctx, "a1"), core.ErrNotFound)
		// A deleted id can register again as new.
		created, err := s.UpsertAgent(ctx, testAgent("a1"))
		if err != nil || !created {
			t.Fatalf("UpsertAgent after delete = %v, %v; want created", created, err)
		}
	}},
}

// ---- accept, messages, receipts ----

// richMessage sets every field a message can carry.
func richMessage(id string) (*core.Message, *core.Receipt) {
	m := &core.Message{
		ID:            id,
		Sender:        "alice",
		Receiver:      "bob",
		Type:          "task",
		CorrelationID: "corr-0",
		Parts: []core.Part{
			{Kind: core.PartText, Text: "héllo ✓ \"quoted\" \x00 nul"},
			{Kind: core.PartCode, Text: "fmt.Println(1)", Language: "go"},
			{Kind: core.PartImage, MediaType: "image/png", Name: "dot.png", Bytes: []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff, 0xfe}},
			{Kind: core.PartFile, MediaType: "application/pdf", Name: "a.pdf", URL: "https://example.com/a.pdf"},
			{Kind: core.PartData, Data: json.RawMessage(`{"z":1.5,"a":[true,null,"x"],"n":{"deep":[1,2,3]}}`), Meta: map[string]any{"schema": "v1", "n": float64(2)}},
		},
		Metadata: map[string]any{
			"trace_id": "t-1",
			"priority": float64(3),
			"flags":    map[string]any{"urgent": true, "tags": []any{"a", "b"}},
		},
		Protocol:    "mamp",
		TTL:         90 * time.Minute,
		SentAt:      base.Add(-1500 * time.Millisecond),
		ReceivedAt:  base,
		ExpiresAt:   base.Add(90 * time.Minute),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	r := receiptFor(m)
	r.History = append(r.History, core.ReceiptEvent{At: base, Status: core.StatusQueued, Detail: "receiver offline"})
	return m, r
}

var acceptCases = []testCase{
	{"round trips every field", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		m, r := richMessage("m1")
		wantMsg, wantRcpt := normMessage(m), normReceipt(r)
		res := mustAcceptMsg(t, s, m, r)
		if res.Receipt.MessageID != "m1" || res.Receipt.Status != core.StatusQueued {
			t.Fatalf("AcceptResult.Receipt = %+v", res.Receipt)
		}
		got, err := s.GetMessage(ctx, "m1")
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		if got.Seq <= 0 {
			t.Fatalf("stored Seq = %d, want > 0", got.Seq)
		}
		wantMsg.Seq = got.Seq
		if g := normMessage(got); !reflect.DeepEqual(g, wantMsg) {
			t.Fatalf("GetMessage round trip:\n got %s\nwant %s", jsonText(g), jsonText(wantMsg))
		}
		rc := receipt(t, s, "m1")
		if g := normReceipt(rc); !reflect.DeepEqual(g, wantRcpt) {
			t.Fatalf("GetReceipt round trip:\n got %s\nwant %s", jsonText(g), jsonText(wantRcpt))
		}
		m2 := send(t, s, "m2", "alice", "bob", at(time.Second))
		g2, err := s.GetMessage(ctx, m2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if g2.Seq <= got.Seq {
			t.Fatalf("second message Seq = %d, want > %d", g2.Seq, got.Seq)
		}
	}},
	{"unknown ids are ErrNotFound", func(t *testing.T, s core.Store) {
		_, err := s.GetMessage(context.Background(), "nope")
		wantErr(t, "GetMessage", err, core.ErrNotFound)
		_, err = s.GetReceipt(context.Background(), "nope")
		wantErr(t, "GetReceipt", err, core.ErrNotFound)
	}},
	{"duplicate from same sender returns first receipt", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		first := send(t, s, "m1", "alice", "bob", base)
		firstRcpt := normReceipt(receipt(t, s, "m1"))

		// The same sender and receiver: a retry, whatever else changed.
		again, r := newMessage("m1", "alice", "bob", at(time.Minute))
		again.Parts = []core.Part{{Kind: core.PartText, Text: "changed"}}
		again.ConversationID = "conv-dup"
		r.Status = core.StatusQueued
		res, err := s.Accept(ctx, again, r, 0)
		if err != nil {
			t.Fatalf("Accept duplicate: %v", err)
		}
		if !res.Duplicate {
			t.Fatal("Accept duplicate: Duplicate = false")
		}
		if g := normReceipt(&res.Receipt); !reflect.DeepEqual(g, firstRcpt) {
			t.Fatalf("duplicate receipt:\n got %s\nwant %s", jsonText(g), jsonText(firstRcpt))
		}
		got, err := s.GetMessage(ctx, "m1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Receiver != "bob" || got.Parts[0].Text != first.Parts[0].Text || got.ConversationID != "" {
			t.Fatalf("duplicate overwrote the message: %s", jsonText(got))
		}
		wantDepth(t, s, "bob", 1)
		wantDepth(t, s, "carol", 0)
		_, err = s.GetConversation(ctx, "conv-dup")
		wantErr(t, "conversation of a duplicate", err, core.ErrNotFound)

		// Once delivered, a duplicate reports the first outcome.
		settle(t, s, at(time.Minute), map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered, Code: 200}})
		dup, r2 := newMessage("m1", "alice", "bob", at(2*time.Minute))
		res, err = s.Accept(ctx, dup, r2, 0)
		if err != nil || !res.Duplicate || res.Receipt.Status != core.StatusDelivered {
			t.Fatalf("Accept duplicate after delivery = %+v, %v; want duplicate with status delivered", res, err)
		}
		wantDepth(t, s, "bob", 0)
		if cs := claim(t, s, at(time.Hour), at(2*time.Hour), "o", 10, 10); len(cs) != 0 {
			t.Fatalf("duplicate after delivery was scheduled: %q", claimShape(cs))
		}
	}},
	{"same id from another sender is ErrIDConflict", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		m, r := newMessage("m1", "mallory", "bob", at(time.Second))
		_, err := s.Accept(ctx, m, r, 0)
		wantErr(t, "Accept foreign id", err, core.ErrIDConflict)
		got, err := s.GetMessage(ctx, "m1")
		if err != nil || got.Sender != "alice" {
			t.Fatalf("GetMessage after conflict = %v, %v; want alice's message", got, err)
		}
		wantDepth(t, s, "bob", 1)
	}},
	{"same id to another receiver is ErrIDConflict", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		m, r := newMessage("m1", "alice", "carol", at(time.Second))
		_, err := s.Accept(ctx, m, r, 0)
		wantErr(t, "Accept id for another receiver", err, core.ErrIDConflict)
		got, err := s.GetMessage(ctx, "m1")
		if err != nil || got.Receiver != "bob" {
			t.Fatalf("GetMessage after conflict = %v, %v; want the message to bob", got, err)
		}
		wantDepth(t, s, "bob", 1)
		wantDepth(t, s, "carol", 0)
	}},
	{"concurrent accepts of one id store it once", func(t *testing.T, s core.Store) {
		const n = 50
		var wg sync.WaitGroup
		var mu sync.Mutex
		fresh, dups := 0, 0
		var errs []error
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				m, r := newMessage("same", "alice", "bob", at(time.Duration(i)*time.Millisecond))
				<-start
				res, err := s.Accept(context.Background(), m, r, 0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case res.Duplicate:
					dups++
				default:
					fresh++
				}
			})
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 || fresh != 1 || dups != n-1 {
			t.Fatalf("concurrent accepts: %d new, %d duplicates, errors %v; want 1, %d, none", fresh, dups, errs, n-1)
		}
		wantDepth(t, s, "bob", 1)
		cs := claim(t, s, at(time.Hour), at(2*time.Hour), "o", 10, 100)
		wantClaims(t, "claim after concurrent accepts", cs, "bob/alice:same")
	}},
	{"max queue", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		acc := func(id, sender, receiver string, max int) (core.AcceptResult, error) {
			m, r := newMessage(id, sender, receiver, at(time.Second))
			return s.Accept(ctx, m, r, max)
		}
		for _, id := range []string{"q1", "q2"} {
			if _, err := acc(id, "alice", "bob", 2); err != nil {
				t.Fatalf("Accept %s under max: %v", id, err)
			}
		}
		_, err := acc("q3", "alice", "bob", 2)
		wantErr(t, "Accept over max", err, core.ErrQueueFull)
		_, err = acc("q4", "carl", "bob", 2)
		wantErr(t, "Accept over max from another sender", err, core.ErrQueueFull)
		for _, id := range []string{"q3", "q4"} {
			_, err = s.GetMessage(ctx, id)
			wantErr(t, "GetMessage refused "+id, err, core.ErrNotFound)
			_, err = s.GetReceipt(ctx, id)
			wantErr(t, "GetReceipt refused "+id, err, core.ErrNotFound)
		}
		wantDepth(t, s, "bob", 2)
		// A duplicate of a stored message is answered, not refused.
		if res, err := acc("q1", "alice", "bob", 2); err != nil || !res.Duplicate {
			t.Fatalf("duplicate at max = %+v, %v; want duplicate", res, err)
		}
		// Other receivers are not affected; no limit means no limit.
		if _, err := acc("x1", "alice", "carol", 2); err != nil {
			t.Fatalf("Accept for another receiver: %v", err)
		}
		if _, err := acc("q5", "alice", "bob", 0); err != nil {
			t.Fatalf("Accept with maxQueue 0: %v", err)
		}
		wantDepth(t, s, "bob", 3)
		// Delivered messages leave the queue and make room.
		settle(t, s, at(time.Minute), map[string]core.Outcome{
			"q1": {Kind: core.OutcomeDelivered}, "q2": {Kind: core.OutcomeDelivered},
		})
		if _, err := acc("q3", "alice", "bob", 2); err != nil {
			t.Fatalf("Accept after the queue drained: %v", err)
		}
		wantDepth(t, s, "bob", 2)
	}},
	{"expired on arrival is stored but never scheduled", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		m, r := newMessage("old", "alice", "bob", base)
		m.ExpiresAt = base.Add(-time.Second)
		r.ExpiresAt = m.ExpiresAt
		r.Status = core.StatusExpired
		r.History = []core.ReceiptEvent{{At: base, Status: core.StatusExpired, Detail: "ttl passed before arrival"}}
		res, err := s.Accept(ctx, m, r, 1)
		if err != nil || res.Duplicate {
			t.Fatalf("Accept expired = %+v, %v", res, err)
		}
		if rc := receipt(t, s, "old"); rc.Status != core.StatusExpired {
			t.Fatalf("stored status = %s, want expired", rc.Status)
		}
		wantDepth(t, s, "bob", 0)
		send(t, s, "fresh", "alice", "bob", at(time.Second))
		wantClaims(t, "claim", claim(t, s, at(time.Hour), at(2*time.Hour), "o", 10, 10), "bob/alice:fresh")
		ms, err := s.Pull(ctx, "bob", at(3*time.Hour), at(4*time.Hour), 10, false)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "pulled", messageIDs(ms), []string{"fresh"})
		rs, err := s.ExpireDue(ctx, at(48*time.Hour), 10)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "ExpireDue", receiptIDs(rs), []string{"fresh"})
		dl, err := s.DeadLetters(ctx, core.DeadLetterFilter{})
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "DeadLetters (expired is not a dead letter)", receiptIDs(dl), []string{"fresh"})
	}},
	{"results by correlation id", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		for i, spec := range []struct{ id, sender, corr string }{
			{"r1", "bob", "ask"}, {"x", "bob", "other"}, {"r2", "carol", "ask"}, {"plain", "bob", ""}, {"r3", "bob", "ask"},
		} {
			m, r := newMessage(spec.id, spec.sender, "alice", at(time.Duration(i)*time.Second))
			m.CorrelationID = spec.corr
			mustAcceptMsg(t, s, m, r)
		}
		ms, err := s.Results(ctx, "ask", 0)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "Results", messageIDs(ms), []string{"r1", "r2", "r3"})
		if ms[0].CorrelationID != "ask" || ms[0].Parts[0].Text != "body of r1" {
			t.Fatalf("result message = %s", jsonText(ms[0]))
		}
		ms, err = s.Results(ctx, "ask", 2)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "Results limit 2", messageIDs(ms), []string{"r1", "r2"})
		ms, err = s.Results(ctx, "none", 0)
		if err != nil || len(ms) != 0 {
			t.Fatalf("Results unknown = %v, %v; want none", ms, err)
		}
	}},
}

// ---- claim ----

var claimCases = []testCase{
	{"lanes in due order, messages in send order", func(t *testing.T, s core.Store) {
		send(t, s, "a1", "s1", "r", at(2*time.Second))
		send(t, s, "b1", "s2", "r", at(1*time.Second))
		send(t, s, "c1", "s3", "r2", at(3*time.Second))
		send(t, s, "a2", "s1", "r", at(4*time.Second))
		send(t, s, "a3", "s1", "r", at(5*time.Second))
		send(t, s, "f1", "s4", "r", at(20*time.Second)) // not due yet at 10s

		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "o1", 2, 2)
		wantClaims(t, "first claim", cs, "r/s2:b1", "r/s1:a1,a2")
		m := cs[1].Messages[0]
		if m.Sender != "s1" || m.Receiver != "r" || m.Parts[0].Text != "body of a1" || m.Seq <= 0 || m.Attempts != 0 {
			t.Fatalf("claimed message = %s", jsonText(m))
		}
		wantTime(t, "claimed message ExpiresAt", m.ExpiresAt, at(2*time.Second+defaultTTL))
		if cs[1].Messages[0].Seq >= cs[1].Messages[1].Seq {
			t.Fatalf("messages out of order: seq %d then %d", cs[1].Messages[0].Seq, cs[1].Messages[1].Seq)
		}

		cs = claim(t, s, at(10*time.Second), at(40*time.Second), "o2", 10, 10)
		wantClaims(t, "second owner", cs, "r2/s3:c1")
		cs = claim(t, s, at(30*time.Second), at(40*time.Second), "o3", 10, 10)
		wantClaims(t, "third owner, claims held", cs, "r/s4:f1")
	}},
	{"one owner per lane, taken over after claimUntil", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		wantClaims(t, "o1", claim(t, s, at(10*time.Second), at(30*time.Second), "o1", 10, 10), "bob/alice:m1,m2")
		// A new message on a claimed lane does not free it.
		send(t, s, "m3", "alice", "bob", at(12*time.Second))
		wantClaims(t, "o2 before claimUntil", claim(t, s, at(20*time.Second), at(50*time.Second), "o2", 10, 10))
		wantClaims(t, "o2 just before claimUntil", claim(t, s, at(30*time.Second-time.Microsecond), at(50*time.Second), "o2", 10, 10))
		// o1 crashed: its claim lapses and o2 takes the lane over, in order.
		wantClaims(t, "o2 after claimUntil", claim(t, s, at(31*time.Second), at(60*time.Second), "o2", 10, 10), "bob/alice:m1,m2,m3")
		wantClaims(t, "o1 back, lane held by o2", claim(t, s, at(40*time.Second), at(70*time.Second), "o1", 10, 10))
	}},
	{"not claimed when nothing is due", func(t *testing.T, s core.Store) {
		wantClaims(t, "empty store", claim(t, s, base, at(time.Minute), "o", 10, 10))
		send(t, s, "m1", "alice", "bob", at(time.Minute))
		wantClaims(t, "before received", claim(t, s, base, at(time.Minute), "o", 10, 10))
		wantClaims(t, "at received", claim(t, s, at(time.Minute), at(2*time.Minute), "o", 10, 10), "bob/alice:m1")
	}},
}

// ---- complete ----

var completeCases = []testCase{
	{"outcomes update receipts", func(t *testing.T, s core.Store) {
		reply := json.RawMessage(`{"ok":true,"n":1}`)
		tests := []struct {
			name     string
			outcome  core.Outcome
			status   core.Status
			attempts int
			depth    int
			dead     bool
		}{
			{"delivered", core.Outcome{Kind: core.OutcomeDelivered, Code: 200, Reply: reply, Detail: "pushed"}, core.StatusDelivered, 1, 0, false},
			{"rejected", core.Outcome{Kind: core.OutcomeRejected, Code: 403, Error: "forbidden", Reply: json.RawMessage(`{"error":"no"}`), Detail: "refused"}, core.StatusRejected, 1, 0, true},
			{"timeout", core.Outcome{Kind: core.OutcomeTimeout, Error: "ttl", Detail: "ttl passed"}, core.StatusTimeout, 0, 0, true},
			{"retry", core.Outcome{Kind: core.OutcomeRetry, Code: 503, Error: "unavailable", NextAt: at(time.Minute)}, core.StatusQueued, 1, 1, false},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := context.Background()
				recv := fmt.Sprintf("rcv-%d", i)
				send(t, s, tt.name, "alice", recv, base)
				cs := claim(t, s, at(10*time.Second), at(40*time.Second), "o1", 10, 10)
				wantClaims(t, "claim", cs, recv+"/alice:"+tt.name)
				o := tt.outcome
				o.MessageID, o.At = tt.name, at(11*time.Second)
				complete(t, s, "o1", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{o}, NextAt: o.NextAt})

				r := receipt(t, s, tt.name)
				if r.Status != tt.status || r.Attempts != tt.attempts || r.Code != o.Code || r.LastError != o.Error {
					t.Fatalf("receipt = status %s attempts %d code %d error %q; want %s %d %d %q",
						r.Status, r.Attempts, r.Code, r.LastError, tt.status, tt.attempts, o.Code, o.Error)
				}
				if tt.status.Terminal() && string(r.Reply) != string(o.Reply) {
					t.Fatalf("receipt reply = %s, want %s", r.Reply, o.Reply)
				}
				wantTime(t, "UpdatedAt", r.UpdatedAt, o.At)
				wantTime(t, "CreatedAt", r.CreatedAt, base)
				if len(r.History) != 2 || r.History[0].Detail != "accepted" {
					t.Fatalf("history = %s, want accepted then the outcome", jsonText(r.History))
				}
				ev := lastEvent(t, r)
				if ev.Status != tt.status || !ev.At.Equal(o.At) {
					t.Fatalf("last event = %+v, want status %s at %s", ev, tt.status, o.At)
				}
				if tt.status.Terminal() && ev.Detail != o.Detail {
					t.Fatalf("last event detail = %q, want %q", ev.Detail, o.Detail)
				}
				if tt.outcome.Kind == core.OutcomeRetry {
					wantTime(t, "NextAttempt", r.NextAttempt, at(time.Minute))
					m, err := s.GetMessage(ctx, tt.name)
					if err != nil || m.Attempts != 1 {
						t.Fatalf("GetMessage after retry: attempts %v, %v; want 1", m, err)
					}
				}
				wantDepth(t, s, recv, tt.depth)
				dl, err := s.DeadLetters(ctx, core.DeadLetterFilter{Receiver: recv})
				if err != nil {
					t.Fatal(err)
				}
				if got := len(dl) == 1; got != tt.dead {
					t.Fatalf("in dead letters = %v, want %v", got, tt.dead)
				}
				// A terminal lane has nothing left to claim.
				if tt.depth == 0 {
					wantClaims(t, "claim after terminal outcome", claim(t, s, at(time.Hour), at(2*time.Hour), "o2", 10, 10))
				}
			})
		}
	}},
	{"a timeout after failed attempts keeps the last error", func(t *testing.T, s core.Store) {
		// The scheduler ends a message whose TTL passed at its next
		// attempt with a timeout outcome that carries no error of its own:
		// the dead letter must keep what the last attempt saw.
		tests := []struct {
			name  string
			retry core.Outcome
			end   core.Outcome
			code  int
			err   string
		}{
			{"receiver answered 500", core.Outcome{Kind: core.OutcomeRetry, Code: 500, Error: "receiver answered 500"},
				core.Outcome{Kind: core.OutcomeTimeout, Detail: "ttl passed before delivery"}, 500, "receiver answered 500"},
			{"connection refused", core.Outcome{Kind: core.OutcomeRetry, Error: "dial tcp 127.0.0.1:9: connect: connection refused"},
				core.Outcome{Kind: core.OutcomeTimeout, Detail: "ttl passed before delivery"}, 0, "dial tcp 127.0.0.1:9: connect: connection refused"},
			{"a timeout with its own error", core.Outcome{Kind: core.OutcomeRetry, Code: 503, Error: "busy"},
				core.Outcome{Kind: core.OutcomeTimeout, Code: 504, Error: "gave up"}, 504, "gave up"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id, recv := fmt.Sprintf("kept-%d", i), fmt.Sprintf("kept-rcv-%d", i)
				send(t, s, id, "alice", recv, base)
				cs := claim(t, s, at(10*time.Second), at(40*time.Second), "o1", 10, 10)
				wantClaims(t, "claim", cs, recv+"/alice:"+id)
				o := tt.retry
				o.MessageID, o.At, o.NextAt = id, at(11*time.Second), at(20*time.Second)
				complete(t, s, "o1", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{o}, NextAt: o.NextAt})
				cs = claim(t, s, at(20*time.Second), at(50*time.Second), "o1", 10, 10)
				wantClaims(t, "claim again", cs, recv+"/alice:"+id)
				o = tt.end
				o.MessageID, o.At = id, at(21*time.Second)
				complete(t, s, "o1", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{o}})
				r := receipt(t, s, id)
				if r.Status != core.StatusTimeout || r.Attempts != 1 || r.Code != tt.code || r.LastError != tt.err {
					t.Fatalf("receipt = status %s attempts %d code %d error %q; want timeout 1 %d %q",
						r.Status, r.Attempts, r.Code, r.LastError, tt.code, tt.err)
				}
				dl, err := s.DeadLetters(context.Background(), core.DeadLetterFilter{Receiver: recv})
				if err != nil || len(dl) != 1 || dl[0].LastError != tt.err || dl[0].Code != tt.code {
					t.Fatalf("dead letters = %s, %v; want one with code %d and error %q", jsonText(dl), err, tt.code, tt.err)
				}
			})
		}
	}},
	{"a dead letter without an error can be given one, once", func(t *testing.T, s core.Store) {
		noter, ok := s.(core.DeadLetterNoter)
		if !ok {
			t.Skip("the store does not implement core.DeadLetterNoter")
		}
		ctx := context.Background()
		send(t, s, "held", "alice", "held-rcv", base)
		// Still queued: nothing changes.
		if err := noter.NoteDeadLetter(ctx, "held", 500, "too early"); err != nil {
			t.Fatal(err)
		}
		if r := receipt(t, s, "held"); r.LastError != "" || r.Status != core.StatusQueued {
			t.Fatalf("a queued message was noted: %+v", r)
		}
		if _, err := s.ExpireDue(ctx, at(defaultTTL+time.Hour), 10); err != nil {
			t.Fatal(err)
		}
		for _, note := range []string{"held behind m0", "a second note"} {
			if err := noter.NoteDeadLetter(ctx, "held", 503, note); err != nil {
				t.Fatal(err)
			}
		}
		r := receipt(t, s, "held")
		if r.Status != core.StatusTimeout || r.Code != 503 || r.LastError != "held behind m0" {
			t.Fatalf("receipt = %s %d %q; want timeout 503 \"held behind m0\" (the first note only)", r.Status, r.Code, r.LastError)
		}
	}},
	{"retry holds the lane back until NextAt", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		send(t, s, "o1", "carol", "bob", at(2*time.Second))
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "w", 1, 10)
		wantClaims(t, "claim", cs, "bob/alice:m1,m2")
		complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, NextAt: at(time.Minute), Outcomes: []core.Outcome{
			{MessageID: "m1", Kind: core.OutcomeRetry, At: at(11 * time.Second), NextAt: at(time.Minute), Error: "busy"},
		}})
		// Only carol's lane is due; alice's waits behind its head's retry.
		wantClaims(t, "before NextAt", claim(t, s, at(30*time.Second), at(2*time.Minute), "w", 10, 10), "bob/carol:o1")
		cs = claim(t, s, at(time.Minute), at(2*time.Minute), "w", 10, 10)
		wantClaims(t, "at NextAt", cs, "bob/alice:m1,m2")
		if cs[0].Messages[0].Attempts != 1 || cs[0].Messages[1].Attempts != 0 {
			t.Fatalf("attempts = %d, %d; want 1, 0", cs[0].Messages[0].Attempts, cs[0].Messages[1].Attempts)
		}
		wantDepth(t, s, "bob", 3)
	}},
	{"release with zero NextAt is due at once", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", base.Add(time.Millisecond))
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "w", 10, 1)
		wantClaims(t, "claim one", cs, "bob/alice:m1")
		complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{{MessageID: "m1", Kind: core.OutcomeDelivered, At: at(11 * time.Second)}}})
		wantClaims(t, "claim next", claim(t, s, at(11*time.Second), at(40*time.Second), "w", 10, 10), "bob/alice:m2")
	}},
	{"park holds the lane until Wake", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		send(t, s, "x1", "alice", "carol", at(2*time.Second))
		cs := claim(t, s, at(10*time.Second), at(40*time.Second), "w", 10, 10)
		wantClaims(t, "claim", cs, "bob/alice:m1,m2", "carol/alice:x1")
		complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, Park: true}, core.LaneResult{Lane: cs[1].Lane, Park: true})
		wantClaims(t, "parked", claim(t, s, at(time.Hour), at(2*time.Hour), "w", 10, 10))
		n, err := s.Wake(ctx, "bob", at(2*time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("Wake(bob) = %d, %v; want 2", n, err)
		}
		wantClaims(t, "after wake", claim(t, s, at(2*time.Hour), at(3*time.Hour), "w", 10, 10), "bob/alice:m1,m2")
		wantDepth(t, s, "carol", 1)
	}},
	{"stale owner records outcomes but keeps the new claim", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		send(t, s, "m2", "alice", "bob", at(time.Second))
		cs := claim(t, s, at(10*time.Second), at(30*time.Second), "old", 10, 10)
		wantClaims(t, "old owner", cs, "bob/alice:m1,m2")
		lane := cs[0].Lane
		wantClaims(t, "takeover", claim(t, s, at(40*time.Second), at(70*time.Second), "new", 10, 10), "bob/alice:m1,m2")
		// The old owner finishes late: its outcome counts, its release does not.
		complete(t, s, "old", core.LaneResult{Lane: lane, Outcomes: []core.Outcome{{MessageID: "m1", Kind: core.OutcomeDelivered, At: at(45 * time.Second), Code: 200}}})
		if r := receipt(t, s, "m1"); r.Status != core.StatusDelivered || r.Attempts != 1 {
			t.Fatalf("m1 after stale complete: %s attempts %d", r.Status, r.Attempts)
		}
		wantDepth(t, s, "bob", 1)
		wantClaims(t, "lane still held by new owner", claim(t, s, at(50*time.Second), at(80*time.Second), "third", 10, 10))
		// The new owner's outcome for m1 is ignored (no longer queued).
		complete(t, s, "new", core.LaneResult{Lane: lane, Outcomes: []core.Outcome{
			{MessageID: "m1", Kind: core.OutcomeRejected, At: at(50 * time.Second), Code: 500},
			{MessageID: "m2", Kind: core.OutcomeDelivered, At: at(50 * time.Second)},
		}})
		r := receipt(t, s, "m1")
		if r.Status != core.StatusDelivered || r.Attempts != 1 || r.Code != 200 || len(r.History) != 2 {
			t.Fatalf("m1 changed by an outcome for a finished message: %s", jsonText(r))
		}
		wantTime(t, "m1 UpdatedAt", r.UpdatedAt, at(45*time.Second))
		if r := receipt(t, s, "m2"); r.Status != core.StatusDelivered {
			t.Fatalf("m2 status = %s", r.Status)
		}
		wantDepth(t, s, "bob", 0)
		// The lane counts stay right: a new message makes depth 1 and is claimable.
		send(t, s, "m3", "alice", "bob", at(time.Minute))
		wantDepth(t, s, "bob", 1)
		wantClaims(t, "new message after all", claim(t, s, at(2*time.Minute), at(3*time.Minute), "third", 10, 10), "bob/alice:m3")
	}},
	{"repeated outcome is ignored", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		settle(t, s, at(time.Second), map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered}})
		complete(t, s, "settle", core.LaneResult{Lane: core.Lane{Receiver: "bob", Sender: "alice"},
			Outcomes: []core.Outcome{{MessageID: "m1", Kind: core.OutcomeDelivered, At: at(time.Minute)}}})
		r := receipt(t, s, "m1")
		if r.Attempts != 1 || len(r.History) != 2 {
			t.Fatalf("receipt after repeated outcome: attempts %d, %d events", r.Attempts, len(r.History))
		}
		wantDepth(t, s, "bob", 0)
		send(t, s, "m2", "alice", "bob", at(2*time.Minute))
		wantDepth(t, s, "bob", 1)
	}},
	{"history is capped and keeps the first and latest events", func(t *testing.T, s core.Store) {
		send(t, s, "m1", "alice", "bob", base)
		now := base
		for i := range 70 {
			now = at(time.Duration(i+1) * time.Minute)
			cs := claim(t, s, now, now.Add(time.Second), "w", 1, 1)
			if len(cs) != 1 {
				t.Fatalf("round %d: claimed %d lanes", i, len(cs))
			}
			complete(t, s, "w", core.LaneResult{Lane: cs[0].Lane, Outcomes: []core.Outcome{
				{MessageID: "m1", Kind: core.OutcomeRetry, At: now, Error: fmt.Sprintf("try %d", i)},
			}})
		}
		now = now.Add(time.Minute)
		settle(t, s, now, map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered, Detail: "finally"}})
		r := receipt(t, s, "m1")
		if len(r.History) != 64 {
			t.Fatalf("history has %d events, want 64", len(r.History))
		}
		if r.History[0].Detail != "accepted" {
			t.Fatalf("first event = %+v, want the accepted event", r.History[0])
		}
		if ev := lastEvent(t, r); ev.Status != core.StatusDelivered || ev.Detail != "finally" || !ev.At.Equal(now) {
			t.Fatalf("last event = %+v, want delivered/finally", ev)
		}
		if r.Attempts != 71 {
			t.Fatalf("attempts = %d, want 71", r.Attempts)
		}
	}},
	{"receipt without history still records events", func(t *testing.T, s core.Store) {
		m, r := newMessage("m1", "alice", "bob", base)
		r.History = nil
		mustAcceptMsg(t, s, m, r)
		settle(t, s, at(time.Second), map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered, Detail: "done"}})
		rc := receipt(t, s, "m1")
		if len(rc.History) != 1 || rc.History[0].Status != core.StatusDelivered {
			t.Fatalf("history = %s, want one delivered event", jsonText(rc.History))
		}
	}},
}

// ---- expiry, wake, depth ----

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

// ---- pull ----

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

// ---- dead letters, replay, purge ----

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

// ---- conversations ----

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

// ---- records ----

var recordCases = []testCase{
	{"versioned writes", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		r1, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Index: "ctx-a", Data: []byte(`{"state":"submitted"}`), UpdatedAt: base})
		if err != nil || r1.Version != 1 {
			t.Fatalf("create = %+v, %v; want version 1", r1, err)
		}
		_, err = s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Data: []byte(`{}`), UpdatedAt: base})
		wantErr(t, "create existing", err, core.ErrConflict)
		r2, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Index: "ctx-b", Data: []byte(`{"state":"working"}`), Version: 1, UpdatedAt: at(time.Second)})
		if err != nil || r2.Version != 2 {
			t.Fatalf("update = %+v, %v; want version 2", r2, err)
		}
		_, err = s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Data: []byte(`{}`), Version: 1, UpdatedAt: at(2 * time.Second)})
		wantErr(t, "stale update", err, core.ErrConflict)
		_, err = s.PutRecord(ctx, core.Record{Kind: "task", ID: "ghost", Data: []byte(`{}`), Version: 3, UpdatedAt: base})
		wantErr(t, "update missing", err, core.ErrConflict)
		got, err := s.GetRecord(ctx, "task", "t1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != "task" || got.ID != "t1" || got.Index != "ctx-b" || string(got.Data) != `{"state":"working"}` || got.Version != 2 {
			t.Fatalf("GetRecord = %+v", got)
		}
		wantTime(t, "record UpdatedAt", got.UpdatedAt, at(time.Second))
		_, err = s.GetRecord(ctx, "push", "t1")
		wantErr(t, "GetRecord other kind", err, core.ErrNotFound)
		_, err = s.GetRecord(ctx, "task", "ghost")
		wantErr(t, "GetRecord missing", err, core.ErrNotFound)
	}},
	{"binary data round trips", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		data := []byte{0, 1, 2, 0xff, '{', 0x80}
		if _, err := s.PutRecord(ctx, core.Record{Kind: "cred", ID: "k", Data: data, UpdatedAt: base}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRecord(ctx, "cred", "k")
		if err != nil || string(got.Data) != string(data) {
			t.Fatalf("GetRecord = %v, %v; want %v", got.Data, err, data)
		}
	}},
	{"list by kind and index", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		for i, spec := range []struct{ kind, id, index string }{
			{"task", "t1", "ctx-a"}, {"task", "t2", "ctx-b"}, {"task", "t3", "ctx-a"}, {"push", "p1", "ctx-a"}, {"task", "t4", ""},
		} {
			if _, err := s.PutRecord(ctx, core.Record{Kind: spec.kind, ID: spec.id, Index: spec.index, Data: []byte(`{}`), UpdatedAt: at(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		// Touch t1 so it becomes the most recent.
		if _, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Index: "ctx-a", Data: []byte(`{"v":2}`), Version: 1, UpdatedAt: at(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			kind, index string
			limit       int
			want        []string
		}{
			{"task", "", 0, []string{"t1", "t4", "t3", "t2"}},
			{"task", "ctx-a", 0, []string{"t1", "t3"}},
			{"task", "ctx-b", 0, []string{"t2"}},
			{"push", "", 0, []string{"p1"}},
			{"task", "", 2, []string{"t1", "t4"}},
			{"none", "", 0, []string{}},
		}
		for _, tt := range tests {
			rs, err := s.ListRecords(ctx, tt.kind, tt.index, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(rs))
			for i, r := range rs {
				got[i] = r.ID
			}
			wantIDs(t, fmt.Sprintf("ListRecords(%q, %q, %d)", tt.kind, tt.index, tt.limit), got, tt.want)
		}
	}},
	{"list after an id, in id order", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		// Put in another order than the ids', and with ids whose bytewise
		// order differs from a locale's ("B" < "a" < "b" bytewise).
		for i, spec := range []struct{ kind, id, index string }{
			{"cb", "b2", "open"}, {"cb", "a1", "open"}, {"cb", "B0", "open"}, {"cb", "c3", "closed"}, {"cb", "d4", "open"}, {"other", "a0", "open"},
		} {
			if _, err := s.PutRecord(ctx, core.Record{Kind: spec.kind, ID: spec.id, Index: spec.index, Data: []byte(`{}`), UpdatedAt: at(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			kind, index, after string
			limit              int
			want               []string
		}{
			{"cb", "", "", 0, []string{"B0", "a1", "b2", "c3", "d4"}},
			{"cb", "", "", 2, []string{"B0", "a1"}},
			{"cb", "", "a1", 2, []string{"b2", "c3"}},
			{"cb", "", "c3", 2, []string{"d4"}},
			{"cb", "", "d4", 2, []string{}},
			{"cb", "open", "", 0, []string{"B0", "a1", "b2", "d4"}},
			{"cb", "open", "b2", 0, []string{"d4"}},
			{"cb", "open", "a", 0, []string{"a1", "b2", "d4"}}, // after an id that is not there
			{"none", "", "", 0, []string{}},
		}
		for _, tt := range tests {
			rs, err := s.ListRecordsAfter(ctx, tt.kind, tt.index, tt.after, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(rs))
			for i, r := range rs {
				got[i] = r.ID
			}
			wantIDs(t, fmt.Sprintf("ListRecordsAfter(%q, %q, %q, %d)", tt.kind, tt.index, tt.after, tt.limit), got, tt.want)
		}
	}},
	{"delete", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		if _, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Data: []byte(`{}`), UpdatedAt: base}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRecord(ctx, "task", "t1"); err != nil {
			t.Fatalf("DeleteRecord: %v", err)
		}
		_, err := s.GetRecord(ctx, "task", "t1")
		wantErr(t, "GetRecord deleted", err, core.ErrNotFound)
		wantErr(t, "DeleteRecord again", s.DeleteRecord(ctx, "task", "t1"), core.ErrNotFound)
		// Deleted records can be created again from version 0.
		r, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Data: []byte(`{}`), UpdatedAt: base})
		if err != nil || r.Version != 1 {
			t.Fatalf("recreate = %+v, %v", r, err)
		}
	}},
}
