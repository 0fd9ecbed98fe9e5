package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// ReadBytes is the bound on message bodies per claim or pull that
// RunReadBytes opens its stores with.
const ReadBytes = 2500

// RunReadBytes runs the cases about the bytes a store reads and holds:
// claims, renewals and pulls read at most ReadBytes of message bodies (at
// least one message), lanes left out by that bound stay due (not parked),
// and QueueBytes (core.QueueSizer) counts a receiver's queued bytes. open
// must return a new, empty store that reads at most ReadBytes per claim or
// pull.
func RunReadBytes(t *testing.T, open func(t *testing.T) core.Store) {
	t.Helper()
	for _, tc := range readBytesCases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// sendSized accepts a message whose stored body is about size bytes.
func sendSized(t *testing.T, s core.Store, id, sender, receiver string, size int, recv time.Time) {
	t.Helper()
	m, r := newMessage(id, sender, receiver, recv)
	m.Parts = []core.Part{{Kind: core.PartText, Text: strings.Repeat("b", size)}}
	mustAcceptMsg(t, s, m, r)
}

var readBytesCases = []testCase{
	{"a claim reads at most ReadBytes, and lanes past it stay due", func(t *testing.T, s core.Store) {
		for _, snd := range []string{"a", "b", "c"} {
			for i := range 3 {
				sendSized(t, s, fmt.Sprintf("%s%d", snd, i), snd, "bob", 1000, at(time.Duration(i)*time.Millisecond))
			}
		}
		// Bodies of about 1,300 bytes: the first lane's first two reach
		// the bound, and the claim stops there.
		cs := claim(t, s, at(time.Second), at(time.Minute), "o", 10, 10)
		var got []string
		for _, c := range cs {
			got = append(got, claimShape([]core.LaneClaim{c})...)
		}
		if len(cs) != 1 || len(cs[0].Messages) < 1 || len(cs[0].Messages) > 2 {
			t.Fatalf("first claim: %v, want one lane with the messages that fit in %d bytes", got, ReadBytes)
		}
		// The lanes left out were not parked: the next claims take them.
		seen := map[string]bool{cs[0].Lane.Sender: true}
		for range 4 {
			for _, c := range claim(t, s, at(2*time.Second), at(time.Minute), "o", 10, 10) {
				seen[c.Lane.Sender] = true
			}
		}
		if len(seen) != 3 {
			t.Errorf("lanes claimed in later claims: %v, want all three", seen)
		}
	}},
	{"a message larger than ReadBytes is still claimed", func(t *testing.T, s core.Store) {
		sendSized(t, s, "big", "alice", "bob", 3*ReadBytes, at(0))
		sendSized(t, s, "next", "alice", "bob", 10, at(time.Millisecond))
		cs := claim(t, s, at(time.Second), at(time.Minute), "o", 10, 10)
		if len(cs) != 1 || len(cs[0].Messages) != 1 || cs[0].Messages[0].ID != "big" {
			t.Fatalf("claim: %v, want the big message alone", claimShape(cs))
		}
		if len(cs[0].Messages[0].Parts[0].Text) != 3*ReadBytes {
			t.Errorf("big message read back with %d bytes", len(cs[0].Messages[0].Parts[0].Text))
		}
	}},
	{"a renewal reads at most ReadBytes", func(t *testing.T, s core.Store) {
		lr, ok := s.(core.LaneRenewer)
		if !ok {
			t.Skip("not a LaneRenewer")
		}
		for i := range 6 {
			sendSized(t, s, fmt.Sprintf("m%d", i), "alice", "bob", 1000, at(time.Duration(i)*time.Millisecond))
		}
		cs := claim(t, s, at(time.Second), at(time.Minute), "o", 10, 10)
		if len(cs) != 1 {
			t.Fatalf("claim: %v", claimShape(cs))
		}
		var outs []core.Outcome
		for _, m := range cs[0].Messages {
			outs = append(outs, core.Outcome{MessageID: m.ID, Kind: core.OutcomeDelivered, At: at(time.Second)})
		}
		next, err := lr.CompleteRenew(context.Background(), "o", core.LaneResult{Lane: cs[0].Lane, Outcomes: outs}, at(2*time.Second), at(time.Minute), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(next) < 1 || len(next) > 2 {
			t.Errorf("renewal read %d messages, want those that fit in %d bytes", len(next), ReadBytes)
		}
	}},
	{"pulls read at most ReadBytes and miss nothing", func(t *testing.T, s core.Store) {
		for i := range 7 {
			sendSized(t, s, fmt.Sprintf("m%d", i), "alice", "bob", 1000, at(time.Duration(i)*time.Millisecond))
		}
		var all []string
		for i := range 10 {
			ms := mustPull(t, s, "bob", time.Duration(i+1)*time.Second, time.Hour)
			if len(ms) > 2 {
				t.Fatalf("pull %d read %d messages of about 1,300 bytes, over %d bytes", i, len(ms), ReadBytes)
			}
			all = append(all, messageIDs(ms)...)
		}
		wantIDs(t, "pulled in turn", all, []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"})
		// A message accepted now is handed out by the next pull.
		sendSized(t, s, "late", "alice", "bob", 10, at(20*time.Second))
		wantIDs(t, "after", messageIDs(mustPull(t, s, "bob", 21*time.Second, time.Hour)), []string{"late"})
	}},
	{"QueueBytes counts queued bodies", func(t *testing.T, s core.Store) {
		qs, ok := s.(core.QueueSizer)
		if !ok {
			t.Skip("not a QueueSizer")
		}
		ctx := context.Background()
		n, err := qs.QueueBytes(ctx, "bob")
		if err != nil || n != 0 {
			t.Fatalf("empty queue: %d, %v", n, err)
		}
		sendSized(t, s, "m1", "alice", "bob", 5000, at(0))
		sendSized(t, s, "m2", "carol", "bob", 5000, at(0))
		sendSized(t, s, "x", "alice", "dave", 100000, at(0))
		n, _ = qs.QueueBytes(ctx, "bob")
		if n < 10000 || n > 12000 {
			t.Errorf("two 5,000-byte messages queued: %d bytes", n)
		}
		settle(t, s, at(time.Second), map[string]core.Outcome{"m1": {Kind: core.OutcomeDelivered}})
		n2, _ := qs.QueueBytes(ctx, "bob")
		if n2 >= n || n2 < 5000 {
			t.Errorf("after one was delivered: %d bytes (before %d)", n2, n)
		}
	}},
}
