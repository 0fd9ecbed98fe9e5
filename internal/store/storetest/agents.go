package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

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
