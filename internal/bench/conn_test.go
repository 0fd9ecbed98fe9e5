package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// seen is what a test server recorded of one request.
type seen struct {
	method, path, host, auth, ctype, body string
	conn                                  string // the client's address: one per connection
}

type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rc *recorder) record(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reqs = append(rc.reqs, seen{r.Method, r.URL.Path, r.Host, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b), r.RemoteAddr})
}

func (rc *recorder) all() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

func conns(reqs []seen) int {
	m := map[string]bool{}
	for _, r := range reqs {
		m[r.conn] = true
	}
	return len(m)
}

func TestSenderConnPost(t *testing.T) {
	tests := []struct {
		name      string
		tls       bool
		prefix    string
		token     string
		handler   func(n int64, w http.ResponseWriter) // n counts requests from 1
		wantCodes []int
		wantConns int
	}{
		{name: "keep-alive: one connection for every request", token: "tok",
			handler:   func(n int64, w http.ResponseWriter) { w.WriteHeader(http.StatusOK) },
			wantCodes: []int{200, 200, 200}, wantConns: 1},
		{name: "status codes come back as they are, no token, no header", handler: func(n int64, w http.ResponseWriter) {
			w.WriteHeader([]int{http.StatusAccepted, http.StatusTooManyRequests, http.StatusBadRequest}[n-1])
		}, wantCodes: []int{202, 429, 400}, wantConns: 1},
		{name: "a path in the hub URL comes before each request's path", prefix: "/relay",
			handler:   func(n int64, w http.ResponseWriter) { _, _ = io.WriteString(w, `{"status":"queued"}`) },
			wantCodes: []int{200, 200}, wantConns: 1},
		{name: "an answer with Connection: close makes the next request dial again", handler: func(n int64, w http.ResponseWriter) {
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, strings.Repeat("x", 10000)) // a body larger than the read buffer
		}, wantCodes: []int{200, 200, 200}, wantConns: 3},
		{name: "https", tls: true, token: "tok",
			handler:   func(n int64, w http.ResponseWriter) { w.WriteHeader(http.StatusOK) },
			wantCodes: []int{200, 200}, wantConns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			rc := &recorder{}
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc.record(r)
				tt.handler(n.Add(1), w)
			})
			var srv *httptest.Server
			if tt.tls {
				srv = httptest.NewTLSServer(h)
			} else {
				srv = httptest.NewServer(h)
			}
			defer srv.Close()
			c, err := newSenderConn(srv.URL+tt.prefix, tt.token, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if tt.tls {
				c.tls.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			}
			defer c.close()
			for i, want := range tt.wantCodes {
				body := `{"n":` + string(rune('0'+i)) + `}`
				code, err := c.post(context.Background(), "/atp/send", []byte(body))
				if err != nil || code != want {
					t.Fatalf("post %d: %d, %v; want %d", i+1, code, err, want)
				}
			}
			reqs := rc.all()
			if len(reqs) != len(tt.wantCodes) {
				t.Fatalf("server saw %d requests, want %d", len(reqs), len(tt.wantCodes))
			}
			wantAuth := ""
			if tt.token != "" {
				wantAuth = "Bearer " + tt.token
			}
			for i, r := range reqs {
				want := seen{method: "POST", path: tt.prefix + "/atp/send", host: strings.TrimPrefix(strings.TrimPrefix(srv.URL, "http://"), "https://"),
					auth: wantAuth, ctype: "application/json", body: `{"n":` + string(rune('0'+i)) + `}`, conn: r.conn}
				if r != want {
					t.Errorf("request %d: %+v\nwant %+v", i+1, r, want)
				}
			}
			if got := conns(reqs); got != tt.wantConns {
				t.Errorf("%d connections, want %d", got, tt.wantConns)
			}
		})
	}
}

// A connection that breaks mid-exchange fails that post, and the next post
// dials a new connection.
func TestSenderConnRedialsAfterFailure(t *testing.T) {
	var n atomic.Int64
	rc := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.record(r)
		if n.Add(1) == 2 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // no answer at all
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	c, err := newSenderConn(srv.URL, "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx := context.Background()
	if code, err := c.post(ctx, "/atp/send", []byte("{}")); err != nil || code != 200 {
		t.Fatalf("first post: %d, %v", code, err)
	}
	if code, err := c.post(ctx, "/atp/send", []byte("{}")); err == nil {
		t.Fatalf("second post (connection closed unanswered): %d, no error", code)
	}
	if code, err := c.post(ctx, "/atp/send", []byte("{}")); err != nil || code != 200 {
		t.Fatalf("third post: %d, %v", code, err)
	}
	if got := conns(rc.all()); got != 2 {
		t.Errorf("%d connections, want 2 (the broken one, then a new one)", got)
	}
}

// The run's end interrupts a post waiting for an answer that does not come.
func TestSenderConnStopsWithContext(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c, err := newSenderConn(srv.URL, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		_, err := c.post(ctx, "/atp/send", []byte("{}"))
		done <- err
	}()
	if err := waitfor.Recv(t, "post to return once its context ended", done); !errors.Is(err, context.Canceled) {
		t.Fatalf("post interrupted by its context: %v, want context.Canceled", err)
	}
	if _, err := c.post(ctx, "/atp/send", []byte("{}")); !errors.Is(err, context.Canceled) {
		t.Errorf("post on an ended context: %v, want context.Canceled", err)
	}
}

func TestNewSenderConnRefusesOtherSchemes(t *testing.T) {
	for _, u := range []string{"ftp://example.com", "127.0.0.1:8080", "://x"} {
		if _, err := newSenderConn(u, "", time.Second); err == nil {
			t.Errorf("newSenderConn(%q): no error", u)
		}
	}
	c, err := newSenderConn("https://hub.example", "", time.Second)
	if err != nil || c.addr != "hub.example:443" || c.tls == nil || c.tls.ServerName != "hub.example" {
		t.Errorf("https without a port: %+v, %v; want hub.example:443 with TLS", c, err)
	}
	c, err = newSenderConn("http://hub.example/base", "", time.Second)
	if err != nil || c.addr != "hub.example:80" || c.tls != nil || c.prefix != "/base" {
		t.Errorf("http without a port: %+v, %v; want hub.example:80, prefix /base", c, err)
	}
}
