package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// concurrentCases drive a store with many accepts at once, as a busy hub
// does; a store that gathers concurrent accepts into one write (group
// commit) must give each the answer it would have got alone.
var concurrentCases = []testCase{
	{"concurrent accepts to shared lanes and conversations", func(t *testing.T, s core.Store) {
		const n = 400
		ctx := context.Background()
		type ans struct {
			res core.AcceptResult
			err error
		}
		got := make([]ans, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				// Four senders to two receivers (eight lanes); every
				// fifth message in one of two conversations; every
				// tenth a retry of the message before it; one in
				// twenty-five expired on arrival.
				id := fmt.Sprintf("c%03d", i)
				if i%10 == 9 {
					id = fmt.Sprintf("c%03d", i-1)
				}
				sender := []string{"s0", "s1", "s2", "s3"}[(i-i%10/9)%4]
				if i%10 == 9 {
					sender = []string{"s0", "s1", "s2", "s3"}[(i-1)%4]
				}
				receiver := []string{"r0", "r1"}[((i-i%10/9)/4)%2]
				m, r := newMessage(id, sender, receiver, at(time.Duration(i)*time.Millisecond))
				if (i-i%10/9)%5 == 0 {
					m.ConversationID = []string{"conv-a", "conv-b"}[((i-i%10/9)/5)%2]
				}
				if i%25 == 7 {
					r.Status = core.StatusExpired
					r.History = []core.ReceiptEvent{{At: m.ReceivedAt, Status: core.StatusExpired, Detail: "past its ttl on arrival"}}
				}
				<-start
				res, err := s.Accept(ctx, m, r, 0)
				got[i] = ans{res, err}
			})
		}
		close(start)
		wg.Wait()
		stored := map[string]bool{}
		queued := map[string]int{}
		dups := 0
		for i, a := range got {
			if a.err != nil {
				t.Fatalf("accept %d: %v", i, a.err)
			}
			id := fmt.Sprintf("c%03d", i)
			if i%10 == 9 {
				id = fmt.Sprintf("c%03d", i-1)
			}
			if a.res.Duplicate {
				dups++
				continue
			}
			if stored[id] {
				t.Fatalf("%s stored twice", id)
			}
			stored[id] = true
			if a.res.Receipt.Status == core.StatusQueued {
				rc := receipt(t, s, id)
				queued[rc.Receiver]++
			}
		}
		if len(stored) != n-n/10 || dups != n/10 {
			t.Fatalf("%d stored, %d duplicates; want %d and %d", len(stored), dups, n-n/10, n/10)
		}
		for _, r := range []string{"r0", "r1"} {
			wantDepth(t, s, r, queued[r])
		}
		// Every queued message is claimable, each lane once, in order.
		cs := claim(t, s, at(time.Hour), at(2*time.Hour), "o", 100, 1000)
		total := 0
		for _, c := range cs {
			for j := 1; j < len(c.Messages); j++ {
				if c.Messages[j].Seq <= c.Messages[j-1].Seq {
					t.Errorf("lane %v out of order", c.Lane)
				}
			}
			total += len(c.Messages)
		}
		if len(cs) != 8 || total != queued["r0"]+queued["r1"] {
			t.Errorf("claimed %d lanes with %d messages; want 8 lanes, %d messages", len(cs), total, queued["r0"]+queued["r1"])
		}
		// The conversations counted every message stored in them.
		for _, conv := range []string{"conv-a", "conv-b"} {
			c, err := s.GetConversation(ctx, conv)
			if err != nil {
				t.Fatal(err)
			}
			ms, err := s.ConversationMessages(ctx, conv, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if c.Messages != len(ms) || len(ms) == 0 {
				t.Errorf("%s counts %d messages, holds %d", conv, c.Messages, len(ms))
			}
			if len(c.Participants) == 0 {
				t.Errorf("%s has no participants", conv)
			}
		}
	}},
}
