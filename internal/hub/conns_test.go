package hub

import (
	"io"
	"net"
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
