package hub_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestBodyDeadline: a request body that is still arriving at the hub's
// body timeout is answered 408 and its connection closed, while a body
// that arrived in time lifts the deadline for the rest of the request and
// for the next request on the connection.
func TestBodyDeadline(t *testing.T) {
	const timeout = 200 * time.Millisecond
	h, base := hubtest.Start(t, hub.Options{Dev: true, BodyTimeout: timeout})
	addr := strings.TrimPrefix(base, "http://")
	// A handler that outlives the deadline after reading its body, and
	// reports whether its request's context was cancelled meanwhile.
	h.Mux.HandleFunc("POST /test/after-body", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "context cancelled after the body was read", http.StatusGone)
		case <-time.After(3 * timeout):
			_, _ = io.WriteString(w, "alive")
		}
	})
	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // the test's own bound
		return c, bufio.NewReader(c)
	}

	t.Run("trickled body", func(t *testing.T) {
		c, br := dial(t)
		body := `{"agent_id":"trickle"}`
		if _, err := io.WriteString(c, "POST /atp/register HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"+body[:5]); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a body that stopped arriving: %v", err)
		}
		var e struct {
			Error      string `json:"error"`
			StatusCode int    `json:"status_code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || e.Error != "request_timeout" || e.StatusCode != 408 {
			t.Fatalf("answer %d %+v, want 408 request_timeout", resp.StatusCode, e)
		}
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the connection stayed open after a body timed out")
		}
		// Nothing was registered.
		r, err := http.Get(base + "/atp/agents/trickle")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusNotFound {
			t.Fatalf("agent of the timed-out registration: %d", r.StatusCode)
		}
	})

	t.Run("trickled JSON-RPC body", func(t *testing.T) {
		r, err := http.Post(base+"/atp/register", "application/json", strings.NewReader(`{"agent_id":"rpc-target"}`))
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("register: %v %v", err, r)
		}
		r.Body.Close()
		c, br := dial(t)
		if _, err := io.WriteString(c, "POST /a2a/rpc-target HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\""); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a body that stopped arriving: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive in time") || !strings.Contains(string(b), `"code":-32600`) {
			t.Fatalf("answer %d %s, want 408 with a JSON-RPC invalid request", resp.StatusCode, b)
		}
	})

	t.Run("body in time, handler past the deadline", func(t *testing.T) {
		c, br := dial(t)
		post := func(path, body string) (int, string) {
			t.Helper()
			if _, err := io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nContent-Length: "+
				itoa(len(body))+"\r\n\r\n"+body); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		if code, b := post("/test/after-body", "{}"); code != 200 || b != "alive" {
			t.Fatalf("handler after its body: %d %s", code, b)
		}
		// The same connection, idle well past the deadline, serves the
		// next request. (The idle time is the scenario, on the real clock
		// of net/http's read deadlines; nothing is waited for.)
		time.Sleep(3 * timeout)
		if code, b := post("/atp/register", `{"agent_id":"next"}`); code != 200 {
			t.Fatalf("next request on the connection: %d %s", code, b)
		}
	})
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestMaxConns: a connection over the hub's bound is closed unanswered and
// counted, the ones it holds are served, and a place freed by a closed
// connection is taken by the next one.
//
// Past the bound, the oldest waiting (idle) connection is closed to make
// room; only when none waits is the new one refused.
func TestMaxConns(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Dev: true, MaxConns: 2})
	addr := strings.TrimPrefix(base, "http://")
	// get makes a keep-alive request on c and returns its status, or the
	// error of reading the answer.
	get := func(c net.Conn) (int, error) {
		_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // the test's own bound
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n"); err != nil {
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
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// metric reads a metric through the handler, taking no connection.
	metric := func(name string) string {
		rec := httptest.NewRecorder()
		h.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "switchboard_"+name+" "); ok {
				return v
			}
		}
		t.Fatalf("no metric %s", name)
		return ""
	}

	// One at a time: the server marks a connection idle after the client
	// has read its answer, so wait for it, that held[0] be the older idle
	// one (a connection not yet sending waits too).
	var held []net.Conn
	for i := range 2 {
		c := dial()
		if code, err := get(c); err != nil || code != http.StatusOK {
			t.Fatalf("connection %d within the bound: %d, %v", i+1, code, err)
		}
		waitfor.OK(t, fmt.Sprintf("connection %d to be idle", i+1), func() error {
			if v, want := metric("connections_waiting"), itoa(i+1); v != want {
				return fmt.Errorf("connections_waiting %s, want %s", v, want)
			}
			return nil
		})
		held = append(held, c)
	}
	// Both are idle: a new connection takes the place of the oldest.
	third := dial()
	if code, err := get(third); err != nil || code != http.StatusOK {
		t.Fatalf("a connection over the bound, with idle ones to close: %d, %v", code, err)
	}
	if v := metric("connections_evicted_total"); v != "1" {
		t.Fatalf("connections_evicted_total %s, want 1", v)
	}
	if _, err := get(held[0]); err == nil {
		t.Fatal("the oldest idle connection was not closed to make room")
	}
	if code, err := get(held[1]); err != nil || code != http.StatusOK {
		t.Fatalf("the other held connection: %d, %v", code, err)
	}
	// Two connections in the middle of a request (its body arriving):
	// none waits, so a new connection is closed unanswered.
	const body = `{"agent_id":"slow"}`
	for _, c := range []net.Conn{held[1], third} {
		if _, err := io.WriteString(c, "POST /atp/register HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body[:5]); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.OK(t, "connections_waiting to fall to 0 with two requests begun", func() error {
		if v := metric("connections_waiting"); v != "0" {
			return fmt.Errorf("connections_waiting %s", v)
		}
		return nil
	})
	over := dial() // the kernel completes the handshake; the hub closes it
	if code, err := get(over); err == nil {
		t.Fatalf("a connection over the bound, none waiting, was answered %d", code)
	}
	if v := metric("connections_refused_total"); v != "1" {
		t.Fatalf("connections_refused_total %s, want 1", v)
	}
	if v := metric("connections_open"); v != "2" {
		t.Fatalf("connections_open %s, want 2", v)
	}
	if v := metric("connections_max"); v != "2" {
		t.Fatalf("connections_max %s, want 2", v)
	}
	// The requests begun finish on their connections.
	for _, c := range []net.Conn{held[1], third} {
		if _, err := io.WriteString(c, body[5:]); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a request begun before the refusal: %v, %v", resp, err)
		}
		resp.Body.Close()
	}
	held[1].Close()
	waitfor.OK(t, "connections_open to fall to 1 after a client closed", func() error {
		if v := metric("connections_open"); v != "1" {
			return fmt.Errorf("connections_open %s", v)
		}
		return nil
	})
	if code, err := get(dial()); err != nil || code != http.StatusOK {
		t.Fatalf("a connection in the freed place: %d, %v", code, err)
	}
}
