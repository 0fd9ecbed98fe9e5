package storetest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// BenchSenders is how many goroutines send at once in the parallel
// benchmarks, matching the hub's throughput target (64 concurrent senders).
const BenchSenders = 64

// Bench runs the store benchmarks against stores made by open, which must
// return a new, empty, durable store (as production would run it) and close
// it with b.Cleanup:
//
//   - AcceptParallel: BenchSenders goroutines accept messages at once, each
//     on its own lane, 8 receivers; one op is one durable Accept.
//   - ClaimComplete: a scheduler loop claims lanes (32 lanes, up to 16
//     messages each) and completes every message delivered; one op is one
//     message moved from queued to delivered.
//   - PullBehindClaims: a stream's steady state: the receiver holds 1,000
//     pulled, unacknowledged messages from 64 senders at the head of its
//     queue; one op is one durable pull of the 16 messages that arrived
//     since the last (the sends, and the acknowledgement of the 16 pulled
//     1,000 before, are outside the timer).
func Bench(b *testing.B, open func(b *testing.B) core.Store) {
	b.Run("AcceptParallel", func(b *testing.B) {
		s := open(b)
		ctx := context.Background()
		var next atomic.Int64
		b.SetParallelism(max(1, BenchSenders/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			g := next.Add(1) // a lane per goroutine
			sender := fmt.Sprintf("sender-%d", g)
			receiver := fmt.Sprintf("receiver-%d", g%8)
			for i := 0; pb.Next(); i++ {
				m, r := newMessage(fmt.Sprintf("%s-%d", sender, i), sender, receiver, base)
				if _, err := s.Accept(ctx, m, r, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})

	b.Run("ClaimComplete", func(b *testing.B) {
		s := open(b)
		ctx := context.Background()
		const lanes = 64
		fill(b, s, b.N, lanes)
		b.ReportAllocs()
		b.ResetTimer()
		done := 0
		now := at(time.Minute)
		for done < b.N {
			cs, err := s.Claim(ctx, now, now.Add(time.Minute), "bench", 32, 16)
			if err != nil {
				b.Fatal(err)
			}
			if len(cs) == 0 {
				b.Fatalf("nothing to claim with %d of %d done", done, b.N)
			}
			results := make([]core.LaneResult, len(cs))
			for i, c := range cs {
				results[i].Lane = c.Lane
				for _, m := range c.Messages {
					results[i].Outcomes = append(results[i].Outcomes, core.Outcome{MessageID: m.ID, Kind: core.OutcomeDelivered, At: now, Code: 200})
				}
				done += len(c.Messages)
			}
			if err := s.Complete(ctx, "bench", results); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})

	b.Run("PullBehindClaims", func(b *testing.B) {
		s := open(b)
		ctx := context.Background()
		const head, batch = 1000, 16
		now := at(time.Minute)
		vis := now.Add(time.Hour)
		n := 0
		send := func(k int) {
			for range k {
				m, r := newMessage(fmt.Sprintf("m-%d", n), fmt.Sprintf("sender-%d", n%BenchSenders), "stream", now)
				if _, err := s.Accept(ctx, m, r, 0); err != nil {
					b.Fatal(err)
				}
				n++
			}
		}
		var inFlight []string // pulled, not yet acknowledged, oldest first
		pull := func(want int) {
			ms, err := s.Pull(ctx, "stream", now, vis, batch, false)
			if err != nil || len(ms) != want {
				b.Fatalf("pull: %d messages, %v; want %d", len(ms), err, want)
			}
			inFlight = append(inFlight, messageIDs(ms)...)
		}
		send(head)
		for range head / batch {
			pull(batch)
		}
		pull(head % batch)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			send(batch)
			b.StartTimer()
			pull(batch)
			b.StopTimer()
			if _, err := s.Ack(ctx, "stream", inFlight[:batch], now); err != nil {
				b.Fatal(err)
			}
			inFlight = inFlight[batch:]
			b.StartTimer()
		}
	})
}

// fill accepts n messages spread over lanes, with BenchSenders goroutines.
func fill(b *testing.B, s core.Store, n, lanes int) {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range BenchSenders {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				lane := i % int64(lanes)
				m, r := newMessage(fmt.Sprintf("fill-%d", i), fmt.Sprintf("sender-%d", lane), fmt.Sprintf("receiver-%d", lane%8), base)
				if _, err := s.Accept(ctx, m, r, 0); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatalf("fill: %v", err)
	}
}
