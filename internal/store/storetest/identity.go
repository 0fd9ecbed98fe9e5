package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// identityCases check EndIdentity: the end of an agent's identity at its
// deregistration.
var identityCases = []testCase{
	{"ends the agent, its memberships and its queue", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		for _, id := range []string{"gone", "peer"} {
			if _, err := s.UpsertAgent(ctx, testAgent(id)); err != nil {
				t.Fatal(err)
			}
		}
		sendIn(t, s, "c1", "m1", "peer", "gone", at(time.Second))
		send(t, s, "m2", "peer", "gone", at(2*time.Second))
		send(t, s, "m3", "gone", "peer", at(3*time.Second)) // sent by it: not its queue
		send(t, s, "m4", "peer", "peer", at(4*time.Second))
		now := at(10 * time.Second)
		ended, err := s.EndIdentity(ctx, "gone", now, "receiver deregistered")
		if err != nil {
			t.Fatalf("EndIdentity: %v", err)
		}
		wantIDs(t, "ended", receiptIDs(ended), []string{"m1", "m2"})
		for _, id := range []string{"m1", "m2"} {
			rc := receipt(t, s, id)
			if rc.Status != core.StatusRejected || rc.Code != 410 || rc.LastError != "receiver deregistered" {
				t.Errorf("%s: status %s code %d last_error %q, want rejected 410 receiver deregistered", id, rc.Status, rc.Code, rc.LastError)
			}
			if ev := lastEvent(t, rc); ev.Status != core.StatusRejected || ev.Detail != "receiver deregistered" {
				t.Errorf("%s: last event %+v", id, ev)
			}
		}
		for _, id := range []string{"m3", "m4"} {
			if rc := receipt(t, s, id); rc.Status != core.StatusQueued {
				t.Errorf("%s: status %s, want queued", id, rc.Status)
			}
		}
		wantDepth(t, s, "gone", 0)
		wantDepth(t, s, "peer", 2)
		if ms := mustPull(t, s, "gone", 11*time.Second, time.Minute); len(ms) != 0 {
			t.Errorf("pull after the end handed out %v", messageIDs(ms))
		}
		dl, err := s.DeadLetters(ctx, core.DeadLetterFilter{Receiver: "gone"})
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "dead letters", receiptIDs(dl), []string{"m2", "m1"})
		_, err = s.GetAgent(ctx, "gone")
		wantErr(t, "GetAgent after the end", err, core.ErrNotFound)
		c, err := s.GetConversation(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := participants(c)["gone"]; ok {
			t.Errorf("the ended agent is still a participant of c1: %+v", c.Participants)
		}
		cs, err := s.ListConversations(ctx, "gone", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 0 {
			t.Errorf("conversations of the ended agent: %v", conversationIDs(cs))
		}
		// A new identity of the same id starts with nothing.
		if _, err := s.UpsertAgent(ctx, testAgent("gone")); err != nil {
			t.Fatal(err)
		}
		wantDepth(t, s, "gone", 0)
		if ms := mustPull(t, s, "gone", 12*time.Second, time.Minute); len(ms) != 0 {
			t.Errorf("the new identity pulled %v", messageIDs(ms))
		}
	}},
	{"unknown agent", func(t *testing.T, s core.Store) {
		_, err := s.EndIdentity(context.Background(), "nobody", at(0), "x")
		wantErr(t, "EndIdentity of an unknown agent", err, core.ErrNotFound)
	}},
}
