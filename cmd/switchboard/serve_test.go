package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestServeBodyTimeoutFlag: serve's --body-timeout reaches the hub: a
// trickled body is cut off with 408 after it, and 0 lifts the bound (which
// the hub's option writes as a negative duration: its 0 is the default).
func TestServeBodyTimeoutFlag(t *testing.T) {
	for flag, want := range map[time.Duration]time.Duration{0: -1, -time.Second: -1, time.Second: time.Second, hub.DefaultBodyTimeout: hub.DefaultBodyTimeout} {
		if got := hubBodyTimeout(flag); got != want {
			t.Errorf("--body-timeout %v gives the hub %v, want %v", flag, got, want)
		}
	}
	const wait = 3 * time.Second // ten times the bound of the first case
	cases := []struct {
		flag string
		cut  bool
	}{
		{"300ms", true},
		{"0", false},
	}
	for _, c := range cases {
		t.Run(c.flag, func(t *testing.T) {
			addr := proctest.StartHub(t, "", "--dev", "--data", t.TempDir(), "--body-timeout", c.flag).Addr
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "POST /atp/register HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"agent_id\""); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(wait))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			switch {
			case c.cut && err != nil:
				t.Fatalf("no answer to a trickled body: %v", err)
			case c.cut && resp.StatusCode != http.StatusRequestTimeout:
				t.Fatalf("answer %d, want 408", resp.StatusCode)
			case !c.cut && err == nil:
				t.Fatalf("answer %d to a body still arriving, with no body timeout", resp.StatusCode)
			case !c.cut && !errors.Is(err, os.ErrDeadlineExceeded):
				t.Fatalf("with no body timeout the hub still waits for the body; instead: %v", err)
			}
		})
	}
}

// TestServeMaxConnsFlag: the real binary with --max-conns 2 serves two
// held connections; a third takes the place of the oldest, which is idle
// and closed to make room.
func TestServeMaxConnsFlag(t *testing.T) {
	addr := proctest.StartHub(t, "", "--dev", "--data", t.TempDir(), "--max-conns", "2").Addr
	http.DefaultClient.CloseIdleConnections() // the readiness probe's connection
	get := func() (net.Conn, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n"); err != nil {
			c.Close()
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			c.Close()
			return nil, fmt.Errorf("answer %d", resp.StatusCode)
		}
		return c, nil
	}
	// Until the hub has seen the probe's connection close, it may still
	// count it; so each held connection gets a few tries.
	var held []net.Conn
	for i := range 2 {
		var c net.Conn
		waitfor.OK(t, fmt.Sprintf("connection %d within --max-conns 2 to be served", i+1), func() (err error) {
			c, err = get()
			return err
		})
		defer c.Close()
		held = append(held, c)
	}
	c, err := get()
	if err != nil {
		t.Fatalf("a third connection, with idle ones to close: %v", err)
	}
	c.Close()
	_ = held[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := held[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("the oldest idle connection was not closed to make room")
	}
}
