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
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	bin := flag.String("bin", "", "switchboard binary (default: go build ./cmd/switchboard)")
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
	if *bin == "" {
		*bin = filepath.Join(dir, "switchboard")
		if out, err := exec.Command("go", "build", "-o", *bin, "./cmd/switchboard").CombinedOutput(); err != nil {
			log.Fatalf("build: %v\n%s", err, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--dev", "--addr", addr, "--data", filepath.Join(dir, "data"), "--log-level", "warn", "--rate-limit", "-1", "--metrics-public"}, extra...)
	hub := exec.Command(*bin, args...)
	hub.Stderr = os.Stderr
	if err := hub.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = hub.Process.Kill(); _, _ = hub.Process.Wait() }()
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			log.Fatal("the hub did not become ready")
		}
	}
	post := func(path string, body []byte) (int, time.Duration) {
		resp, err := http.Post(base+path, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, time.Second
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return resp.StatusCode, time.Duration(ra) * time.Second
	}
	for i := range *receivers {
		if code, _ := post("/atp/register", []byte(fmt.Sprintf(`{"agent_id":"r%d"}`, i))); code != 200 {
			log.Fatalf("register: %d", code)
		}
	}
	if code, _ := post("/atp/register", []byte(`{"agent_id":"sender"}`)); code != 200 {
		log.Fatalf("register: %d", code)
	}
	rss := func() (cur, peak int64) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", hub.Process.Pid))
		if err != nil {
			log.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				cur = v << 10
			case "VmHWM:":
				peak = v << 10
			}
		}
		return
	}
	before, _ := rss()
	text := strings.Repeat("x", *size)
	var next, accepted, refusedOnce, gaveUp atomic.Int64
	codes := sync.Map{}
	var wg sync.WaitGroup
	start := time.Now()
	for range *senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *n {
					return
				}
				body, _ := json.Marshal(map[string]any{"message_id": fmt.Sprintf("m%06d", i), "sender": "sender",
					"receiver": fmt.Sprintf("r%d", i%*receivers), "type": "blob", "ttl_ms": 3600000, "payload": map[string]string{"text": text}})
				for attempt := 0; ; attempt++ {
					code, wait := post("/atp/send", body)
					c, _ := codes.LoadOrStore(code, new(atomic.Int64))
					c.(*atomic.Int64).Add(1)
					if code == 200 {
						accepted.Add(1)
						break
					}
					if attempt == 0 {
						refusedOnce.Add(1)
					}
					// Only a refusal for want of room is worth retrying;
					// anything else (413: -size above the hub's --max-body)
					// will be refused again.
					retryable := code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == http.StatusInsufficientStorage
					if !retryable || attempt >= *retries {
						gaveUp.Add(1)
						break
					}
					time.Sleep(max(wait, 100*time.Millisecond))
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	time.Sleep(*settle)
	after, peak := rss()
	var answers []string
	codes.Range(func(k, v any) bool {
		answers = append(answers, fmt.Sprintf("%v×%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	fmt.Printf("flags %v: %d × %d B to %d receivers by %d senders in %v: accepted %d (%s of payload), answers %s, refused at the first try %d, gave up %d\n",
		extra, *n, *size, *receivers, *senders, took.Round(time.Millisecond), accepted.Load(), mib(accepted.Load()*int64(*size)), strings.Join(answers, " "), refusedOnce.Load(), gaveUp.Load())
	fmt.Printf("hub RSS before %s, after %s (growth %s), peak %s (peak growth %s)\n", mib(before), mib(after), mib(after-before), mib(peak), mib(peak-before))
	if resp, err := http.Get(base + "/metrics"); err == nil {
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
