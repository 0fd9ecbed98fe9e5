package hub

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestConnLimit(t *testing.T) {
	tests := []struct {
		name   string
		opt    int
		nofile uint64
		want   int
	}{
		{"set", 5, 20000, 5},
		{"set above the file limit", 50000, 1024, 50000},
		{"no bound", -1, 1024, -1},
		{"default, limit unknown", 0, 0, DefaultMaxConns},
		{"default, limit high", 0, 1 << 20, DefaultMaxConns},
		{"default, limit just enough", 0, DefaultMaxConns + fdHeadroom, DefaultMaxConns},
		{"default, limit one short", 0, DefaultMaxConns + fdHeadroom - 1, DefaultMaxConns - 1},
		{"default, usual soft limit", 0, 1024, 1024 - fdHeadroom},
		{"default, tiny limit", 0, 100, 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := connLimit(tt.opt, tt.nofile); got != tt.want {
				t.Fatalf("connLimit(%d, %d) = %d, want %d", tt.opt, tt.nofile, got, tt.want)
			}
		})
	}
}

// TestCountedConnHalfCloses: a counted TCP connection still half-closes,
// which net/http relies on to deliver an error answer before closing, and
// gives its place back once however often it is closed.
func TestCountedConnHalfCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := &connCounter{max: 1}
	lln := c.listener(ln)
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	srv, err := lln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if n := c.open.Load(); n != 1 {
		t.Fatalf("open %d after one accept, want 1", n)
	}
	cw, ok := srv.(interface{ CloseWrite() error })
	if !ok {
		t.Fatal("a counted connection cannot half-close")
	}
	if _, err := io.WriteString(srv, "answer"); err != nil {
		t.Fatal(err)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client) // ends at the half-close
	if err != nil || string(got) != "answer" {
		t.Fatalf("client read %q, %v; want the answer, then EOF", got, err)
	}
	// The read side is still open.
	if _, err := io.WriteString(client, "late"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != "late" {
		t.Fatalf("server read %q, %v after its half-close", buf, err)
	}
	srv.Close()
	srv.Close()
	if n := c.open.Load(); n != 0 {
		t.Fatalf("open %d after closing twice, want 0", n)
	}
}

// TestPerClientBounds drives the counter with real loopback connections
// from two client addresses: a client past its bound loses its oldest
// waiting connection, or has the new one refused when all of its
// connections are busy, and another client is not affected; a client past
// its idle bound loses its oldest idle connection.
func TestPerClientBounds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := &connCounter{maxPerClient: 2, maxIdlePerClient: 1}
	lln := c.listener(ln)
	got := make(chan net.Conn, 16)
	go func() {
		for {
			conn, err := lln.Accept()
			if err != nil {
				return
			}
			got <- conn
		}
	}()
	// dial connects from src and returns the server's side, or nil once
	// the counter refused it.
	dial := func(src string) net.Conn {
		t.Helper()
		refused := c.refused.Load()
		client, err := dialFrom(src, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		deadline := time.After(10 * time.Second)
		for {
			select {
			case conn := <-got:
				return conn
			case <-deadline:
				t.Fatalf("a connection from %s was neither accepted nor refused", src)
			case <-time.After(time.Millisecond):
				if c.refused.Load() > refused {
					return nil
				}
			}
		}
	}
	closed := func(conn net.Conn) bool {
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := conn.Read(make([]byte, 1))
		return err != nil && !isTimeout(err)
	}
	a1 := dial("127.0.0.2")
	c.state(a1, http.StateActive)
	a2 := dial("127.0.0.2")
	c.state(a2, http.StateActive)
	if c.open.Load() != 2 {
		t.Fatalf("open %d", c.open.Load())
	}
	// Both busy: a third from the same client is refused...
	if a3 := dial("127.0.0.2"); a3 != nil || c.refused.Load() != 1 {
		t.Fatalf("a third busy-client connection was admitted (refused %d)", c.refused.Load())
	}
	// ...while another client is admitted.
	b1 := dial("127.0.0.3")
	if b1 == nil {
		t.Fatal("another client's connection was refused")
	}
	// One of the first client's goes idle: the next takes its place.
	c.state(a1, http.StateIdle)
	a4 := dial("127.0.0.2")
	if a4 == nil || c.evicted.Load() != 1 {
		t.Fatalf("no room made from an idle connection (evicted %d)", c.evicted.Load())
	}
	if !closed(a1) {
		t.Error("the idle connection that made room is still open")
	}
	// The idle bound: a4 is new (waiting); a2 going idle is one too many.
	c.state(a2, http.StateIdle)
	if c.evicted.Load() != 2 || !closed(a4) {
		t.Errorf("past the idle bound the oldest waiting connection was not closed (evicted %d)", c.evicted.Load())
	}
	if c.open.Load() != 2 { // a2, b1
		t.Errorf("open %d, want 2", c.open.Load())
	}
}

func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
