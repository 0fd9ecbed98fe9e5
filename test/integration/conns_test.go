package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/proctest"
)

// raiseNofile lifts the test process's open-file limit to its hard limit
// and fails when that is below need.
func raiseNofile(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if lim.Cur < need {
		t.Fatalf("this test holds %d connections; the open-file limit is %d", need, lim.Cur)
	}
}

// dialFrom connects to addr from the loopback address src (any 127/8
// address is this machine), so the hub sees another client.
func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	return d.Dial("tcp", addr)
}

// keepAliveGet makes one request on c and reads the answer, leaving c open
// and idle.
func keepAliveGet(c net.Conn, path string) (int, error) {
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: hub\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// flood opens n connections to addr from src; with request set, each makes
// one request and stays open, idle. It returns the connections it holds.
func flood(t *testing.T, src, addr string, n int, request bool) []net.Conn {
	t.Helper()
	var mu sync.Mutex
	var held []net.Conn
	var failed atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := dialFrom(src, addr)
			if err != nil {
				failed.Add(1)
				return
			}
			if request {
				if _, err := keepAliveGet(c, "/healthz"); err != nil {
					failed.Add(1) // closed by the hub: its client's bound
				}
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	t.Logf("flood from %s: %d connections opened (%d with a request), %d failed or cut", src, len(held), map[bool]int{true: n}[request], failed.Load())
	return held
}

// TestConnectionFlood: one client (127.0.0.2) holds thousands of
// connections — 3,000 idle keep-alive connections and 1,000 that never
// send a request — against a hub bounded to 2,000 connections in all,
// and a legitimate client (127.0.0.1) is served throughout, on new
// connections and on a kept-alive one; a legitimate client sharing the
// flooder's address is served too (the flooder's waiting connections make
// room). Before per-client bounds, about 10,000 idle connections from one
// client locked every other client out.
func TestConnectionFlood(t *testing.T) {
	raiseNofile(t, 6000)
	addr := proctest.FreeAddr(t)
	hub := proctest.StartHub(t, addr, "--dev", "--data", t.TempDir(), "--max-conns", "2000", "--rate-limit", "-1")
	flood(t, "127.0.0.2", addr, 3000, true)
	flood(t, "127.0.0.2", addr, 1000, false)

	served := func(src string, n int) {
		t.Helper()
		kept, err := dialFrom(src, addr)
		if err != nil {
			t.Fatalf("legitimate client from %s cannot connect: %v", src, err)
		}
		defer kept.Close()
		for i := range n {
			if code, err := keepAliveGet(kept, "/healthz"); err != nil || code != 200 {
				t.Fatalf("legitimate client from %s, request %d on its kept-alive connection: %d, %v", src, i, code, err)
			}
			c, err := dialFrom(src, addr)
			if err != nil {
				t.Fatalf("legitimate client from %s, connection %d: %v", src, i, err)
			}
			code, err := keepAliveGet(c, "/healthz")
			c.Close()
			if err != nil || code != 200 {
				t.Fatalf("legitimate client from %s, request %d on a new connection: %d, %v", src, i, code, err)
			}
		}
	}
	served("127.0.0.1", 50)
	served("127.0.0.2", 20) // shares the flooder's address
	// Requests through Go's client, as an agent would make them.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/atp/register", strings.NewReader(`{"agent_id":"legit"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("registration during the flood: %v %v", resp, err)
	}
	resp.Body.Close()

	code, body := get(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	var open string
	for _, line := range strings.Split(body, "\n") {
		for _, m := range []string{"switchboard_connections_open ", "switchboard_connections_evicted_total ", "switchboard_connections_refused_total ", "switchboard_connections_waiting "} {
			if strings.HasPrefix(line, m) {
				open += line + "; "
			}
		}
	}
	t.Logf("hub: %s", open)
	if hub.Exited() {
		t.Fatalf("the hub exited:\n%s", hub.Out.String())
	}
	_ = fmt.Sprint
}
