// Package pileup piles large messages up at a running hub for receivers
// that never take them, and reads a process's resident memory: the load
// of scripts/memory-bench and of the integration test that the hub's
// memory budget holds.
package pileup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Load is a pile-up over ATP: Messages messages of Size bytes of text from
// the agent "sender", sent by Senders concurrent senders to the pull
// receivers r0, r1, … r(Receivers-1) in turn.
type Load struct {
	// Base is the hub's base URL (http://host:port).
	Base                               string
	Messages, Size, Receivers, Senders int
	// TTL is each message's time to live.
	TTL time.Duration
	// Retry decides, after send attempt (from 0) of a message was refused
	// with code (0: no answer) and the answer's Retry-After header, whether
	// to send it again and after how long. Nil: never again.
	Retry func(attempt, code int, retryAfter string) (time.Duration, bool)
	// Answered, if set, is called with every answer to a send, from the
	// senders' goroutines.
	Answered func(code int, retryAfter string)
}

// Result counts the outcome of Load.Send.
type Result struct {
	// Accepted messages were answered 200.
	Accepted int64
	// Refused counts every answer other than 200 (0 where none came);
	// RefusedFirst, the messages refused at their first attempt; GaveUp,
	// the messages that Retry gave up on.
	Refused, RefusedFirst, GaveUp int64
	// Took is how long the sends took.
	Took time.Duration
}

// Register registers the load's receivers and its sender.
func (l Load) Register(ctx context.Context) error {
	ids := make([]string, 0, l.Receivers+1)
	for i := range l.Receivers {
		ids = append(ids, fmt.Sprintf("r%d", i))
	}
	for _, id := range append(ids, "sender") {
		body, _ := json.Marshal(map[string]string{"agent_id": id})
		if code, _ := l.post(ctx, "/atp/register", body); code != http.StatusOK {
			return fmt.Errorf("pileup: register %s: HTTP %d", id, code)
		}
	}
	return nil
}

// Send sends the load's messages (see Load) and counts the answers. It
// returns when every message is accepted or given up, or ctx ends.
func (l Load) Send(ctx context.Context) Result {
	text := strings.Repeat("x", l.Size)
	var next, accepted, refused, refusedFirst, gaveUp atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range l.Senders {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < l.Messages && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				body, _ := json.Marshal(map[string]any{"message_id": fmt.Sprintf("m%06d", i), "sender": "sender",
					"receiver": fmt.Sprintf("r%d", i%l.Receivers), "type": "blob", "ttl_ms": l.TTL.Milliseconds(),
					"payload": map[string]string{"text": text}})
				for attempt := 0; ; attempt++ {
					code, retryAfter := l.post(ctx, "/atp/send", body)
					if l.Answered != nil {
						l.Answered(code, retryAfter)
					}
					if code == http.StatusOK {
						accepted.Add(1)
						break
					}
					refused.Add(1)
					if attempt == 0 {
						refusedFirst.Add(1)
					}
					wait, again := time.Duration(0), false
					if l.Retry != nil {
						wait, again = l.Retry(attempt, code, retryAfter)
					}
					if !again || !pause(ctx, wait) {
						gaveUp.Add(1)
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return Result{Accepted: accepted.Load(), Refused: refused.Load(), RefusedFirst: refusedFirst.Load(),
		GaveUp: gaveUp.Load(), Took: time.Since(start)}
}

// pause waits d (the scenario: a refused sender backs off before it tries
// again), false if ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// post posts a JSON body and returns the answer's status (0: no answer)
// and Retry-After header.
func (l Load) post(ctx context.Context, path string, body []byte) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.Base+path, bytes.NewReader(body))
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// RSS returns the resident memory of process pid and its peak (VmRSS and
// VmHWM, in bytes), from /proc: Linux only.
func RSS(pid int) (cur, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("pileup: memory of process %d: %w", pid, err)
	}
	return parseStatus(string(b))
}

// parseStatus reads VmRSS and VmHWM from the text of /proc/PID/status.
func parseStatus(status string) (cur, peak int64, err error) {
	var seen int
	for line := range strings.SplitSeq(status, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != "VmRSS:" && f[0] != "VmHWM:") {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("pileup: %s %q: %w", f[0], f[1], err)
		}
		if f[0] == "VmRSS:" {
			cur = v << 10
		} else {
			peak = v << 10
		}
		seen++
	}
	if seen < 2 {
		return 0, 0, fmt.Errorf("pileup: no VmRSS and VmHWM in the process status")
	}
	return cur, peak, nil
}
