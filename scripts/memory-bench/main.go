// Command memory-bench measures how much memory a real hub takes on when
// large messages pile up for receivers that never take them: it starts
// `switchboard serve` (auth off, embedded store in a fresh directory, the
// given extra flags), registers -receivers pull receivers that never pull,
// sends -n messages of -size bytes from -senders concurrent senders (each
// send retried on 429/503/507 after its Retry-After, up to -retries times;
// any other refusal, such as 413 for a -size above the hub's --max-body,
// is given up at once),
// and reports the hub's resident memory (VmRSS, and its peak VmHWM) before
// and after, from /proc. Linux only.
//
//	go run ./scripts/memory-bench -n 656 -size 972800 -- --memory-budget 256MiB
//	go run ./scripts/memory-bench -n 1024 -size 1048576 -- --max-body 2097152 --memory-budget 256MiB
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pileup"
	"github.com/switchboard-hub/switchboard/scripts/internal/hubbin"
)

func main() {
	bin := hubbin.BinFlag()
	n := flag.Int("n", 656, "messages to send")
	size := flag.Int("size", 950<<10, "payload bytes per message")
	receivers := flag.Int("receivers", 1, "receivers (pull, never pulling); messages go to them in turn")
	senders := flag.Int("senders", 8, "concurrent senders")
	retries := flag.Int("retries", 20, "retries of a refused send (429, 503, 507), after its Retry-After")
	settle := flag.Duration("settle", 3*time.Second, "wait after the last send before reading memory")
	flag.Parse()
	extra := flag.Args()

	dir, err := os.MkdirTemp("", "memory-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if *bin, err = hubbin.Build(*bin, dir); err != nil {
		log.Fatal(err)
	}
	addr, err := hubbin.FreeAddr()
	if err != nil {
		log.Fatal(err)
	}
	hub, err := hubbin.Start(*bin, addr, append([]string{"--data", filepath.Join(dir, "data"), "--log-level", "warn", "--rate-limit", "-1", "--metrics-public"}, extra...)...)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Stop()
	if err := hub.WaitReady(50*time.Millisecond, 30*time.Second); err != nil {
		log.Fatal(err)
	}
	var codes sync.Map
	load := pileup.Load{Base: hub.Base, Messages: *n, Size: *size, Receivers: *receivers, Senders: *senders, TTL: time.Hour,
		Retry: func(attempt, code int, retryAfter string) (time.Duration, bool) {
			// Only a refusal for want of room is worth retrying;
			// anything else (413: -size above the hub's --max-body)
			// will be refused again.
			retryable := code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == http.StatusInsufficientStorage
			ra, _ := strconv.Atoi(retryAfter)
			return max(time.Duration(ra)*time.Second, 100*time.Millisecond), retryable && attempt < *retries
		},
		Answered: func(code int, _ string) {
			c, _ := codes.LoadOrStore(code, new(atomic.Int64))
			c.(*atomic.Int64).Add(1)
		}}
	ctx := context.Background()
	if err := load.Register(ctx); err != nil {
		log.Fatal(err)
	}
	rss := func() (cur, peak int64) {
		cur, peak, err := pileup.RSS(hub.Cmd.Process.Pid)
		if err != nil {
			log.Fatal(err)
		}
		return cur, peak
	}
	before, _ := rss()
	res := load.Send(ctx)
	time.Sleep(*settle)
	after, peak := rss()
	var answers []string
	codes.Range(func(k, v any) bool {
		answers = append(answers, fmt.Sprintf("%v×%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	fmt.Printf("flags %v: %d × %d B to %d receivers by %d senders in %v: accepted %d (%s of payload), answers %s, refused at the first try %d, gave up %d\n",
		extra, *n, *size, *receivers, *senders, res.Took.Round(time.Millisecond), res.Accepted, mib(res.Accepted*int64(*size)), strings.Join(answers, " "), res.RefusedFirst, res.GaveUp)
	fmt.Printf("hub RSS before %s, after %s (growth %s), peak %s (peak growth %s)\n", mib(before), mib(after), mib(after-before), mib(peak), mib(peak-before))
	if resp, err := http.Get(hub.Base + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var parts []string
		for _, line := range strings.Split(string(b), "\n") {
			for _, name := range []string{"go_memstats_sys_bytes ", "go_memstats_heap_inuse_bytes ", "switchboard_memory_held_bytes ", "switchboard_memory_budget_bytes "} {
				if strings.HasPrefix(line, name) {
					v, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
					parts = append(parts, strings.TrimSpace(name)+" "+mib(int64(v)))
				}
			}
		}
		if len(parts) > 0 {
			fmt.Println("hub metrics after:", strings.Join(parts, ", "))
		}
	}
}
