package storetest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
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
//   - StreamCycle: a streaming receiver's whole cycle under the hub's
//     benchmark load: BenchSenders goroutines each accept one message at a
//     time for one receiver, which pulls whatever is queued and
//     acknowledges it in batches, as the ATP stream and its client do; one
//     op is one message accepted, pulled and acknowledged.
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

	b.Run("StreamCycle", func(b *testing.B) { streamCycle(b, open(b)) })

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

// streamCycle runs the StreamCycle benchmark (see Bench).
func streamCycle(b *testing.B, s core.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := at(time.Minute)
	vis := now.Add(time.Hour)
	var (
		next   atomic.Int64
		failed atomic.Value
		wg     sync.WaitGroup
	)
	fail := func(err error) {
		failed.CompareAndSwap(nil, err)
		cancel()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for g := range BenchSenders {
		wg.Go(func() {
			sender := fmt.Sprintf("sender-%d", g)
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				m, r := newMessage(fmt.Sprintf("%s-%d", sender, i), sender, "stream", now)
				m.Parts[0].Text = payload
				if _, err := s.Accept(ctx, m, r, 0); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	pulled := make(chan []string, 1024)
	wg.Go(func() { // the stream: pull what is queued
		defer close(pulled)
		for n := 0; n < b.N && ctx.Err() == nil; {
			ms, err := s.Pull(ctx, "stream", now, vis, 256, false)
			if err != nil {
				fail(err)
				return
			}
			if len(ms) == 0 {
				time.Sleep(50 * time.Microsecond) // the hub waits for a send's wake-up
				continue
			}
			n += len(ms)
			pulled <- messageIDs(ms)
		}
	})
	acked := 0
	for ids := range pulled { // the client: acknowledge what arrived meanwhile
		for more := true; more; {
			select {
			case m, ok := <-pulled:
				if !ok {
					more = false
					break
				}
				ids = append(ids, m...)
			default:
				more = false
			}
		}
		n, err := s.Ack(ctx, "stream", ids, now)
		if err != nil {
			fail(err)
			break
		}
		acked += n
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	if acked != b.N {
		b.Fatalf("acknowledged %d of %d", acked, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// payload is a message text the size of the hub benchmark's default.
var payload = strings.Repeat("x", 64)

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
