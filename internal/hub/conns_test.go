package hub

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
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

// pipeListener hands out the server ends of in-memory connections, so a
// server can run inside a synctest bubble.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial opens a connection to the listener and returns the client's end.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestShutdownClosesUnusedConnections: a client that opened a connection
// and never sent a request does not hold the server's shutdown, which
// net/http alone makes wait 5 s for such a connection (Go issue 22682);
// a connection that is serving a request when the shutdown begins still
// gets its answer.
func TestShutdownClosesUnusedConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &connCounter{}
		release := make(chan struct{})
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				<-release
			}
			io.WriteString(w, "done")
		})}
		c.attach(srv)
		pl := newPipeListener()
		served := make(chan error, 1)
		go func() { served <- srv.Serve(c.listener(pl)) }()

		unused := pl.dial() // never sends a request
		defer unused.Close()
		busy := pl.dial()
		defer busy.Close()
		answered := make(chan string, 1)
		go func() {
			io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: hub\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
			if err != nil {
				answered <- "error: " + err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			answered <- string(b)
		}()
		synctest.Wait() // the slow request is being served

		start := time.Now()
		shut := make(chan error, 1)
		go func() { shut <- srv.Shutdown(context.Background()) }()
		synctest.Wait()
		// The unused connection is closed at once, not after 5 s.
		if n, err := unused.Read(make([]byte, 1)); err == nil {
			t.Fatalf("the unused connection read %d bytes after the shutdown began", n)
		}
		if since := time.Since(start); since != 0 {
			t.Errorf("the unused connection was closed %v into the shutdown, want at once", since)
		}
		close(release)
		if got := <-answered; got != "done" {
			t.Errorf("the request in flight got %q, want its answer", got)
		}
		if err := <-shut; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if took := time.Since(start); took >= 5*time.Second {
			t.Errorf("Shutdown took %v: it waited for the unused connection", took)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if n := c.open.Load(); n != 0 {
			t.Errorf("%d connections counted open after the shutdown", n)
		}
	})
}
