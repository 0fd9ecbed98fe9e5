package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// senderConn is one sender's own keep-alive HTTP/1.1 connection to a hub.
//
// The senders stand in for agents on other machines, but here they share
// the hub's cores, so what they spend per request is taken from the hub.
// net/http's Transport hands every request and response between the
// caller's goroutine and the connection's reader and writer goroutines;
// a sender that writes its request and reads the answer on its own
// connection, in its own goroutine, makes the same requests (one write and
// one read per message) for about half the load generator's CPU.
type senderConn struct {
	addr    string // host:port to dial
	tls     *tls.Config
	host    string // the Host header
	prefix  string // the hub URL's path, before each request's path
	auth    string // "Bearer T" or ""
	timeout time.Duration

	conn     net.Conn
	stop     func() bool // ends the watch on the run's context
	br       *bufio.Reader
	buf      []byte    // the request being written, reused
	deadline time.Time // the connection's current deadline
	// retryAfter is the last answer's Retry-After (0 if it had none).
	retryAfter time.Duration
}

// newSenderConn prepares (without dialling) a connection to the hub at
// base, an http or https URL.
func newSenderConn(base, token string, timeout time.Duration) (*senderConn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("hub URL %q: %w", base, err)
	}
	c := &senderConn{host: u.Host, prefix: u.Path, timeout: timeout}
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
		c.tls = &tls.Config{ServerName: u.Hostname()}
	default:
		return nil, fmt.Errorf("hub URL %q: want http:// or https://", base)
	}
	c.addr = net.JoinHostPort(u.Hostname(), port)
	c.setToken(token)
	return c, nil
}

// setToken sets the bearer token of the requests to come ("" for none).
func (c *senderConn) setToken(token string) {
	c.auth = ""
	if token != "" {
		c.auth = "Bearer " + token
	}
}

// post sends body (JSON) to path and returns the status code; the answer's
// body is read and dropped (its Retry-After is kept in retryAfter). A
// failed exchange closes the connection; the next post dials a new one.
func (c *senderConn) post(ctx context.Context, path string, body []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if c.conn == nil {
		if err := c.dial(ctx); err != nil {
			return 0, err
		}
	}
	code, keep, err := c.exchange(path, body)
	if err != nil || !keep {
		c.close()
	}
	if err != nil && ctx.Err() != nil {
		return 0, ctx.Err() // interrupted by the run's end
	}
	return code, err
}

func (c *senderConn) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: c.timeout, KeepAlive: 30 * time.Second}
	var conn net.Conn
	var err error
	if c.tls != nil {
		td := tls.Dialer{NetDialer: &d, Config: c.tls}
		conn, err = td.DialContext(ctx, "tcp", c.addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", c.addr)
	}
	if err != nil {
		return err
	}
	c.conn = conn
	c.deadline = time.Time{}
	// The run's end interrupts an exchange in flight.
	c.stop = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	if c.br == nil {
		c.br = bufio.NewReaderSize(conn, 4096)
	} else {
		c.br.Reset(conn)
	}
	return nil
}

func (c *senderConn) exchange(path string, body []byte) (code int, keep bool, err error) {
	// A deadline bounds a stalled exchange; it is moved forward only when
	// half of it is used up, not on every request.
	if now := time.Now(); c.deadline.Sub(now) < c.timeout/2 {
		c.deadline = now.Add(c.timeout)
		if err := c.conn.SetDeadline(c.deadline); err != nil {
			return 0, false, err
		}
	}
	b := append(c.buf[:0], "POST "...)
	b = append(b, c.prefix...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, c.host...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	if c.auth != "" {
		b = append(b, "\r\nAuthorization: "...)
		b = append(b, c.auth...)
	}
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	c.buf = b
	if _, err := c.conn.Write(b); err != nil {
		return 0, false, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, false, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, false, err
	}
	c.retryAfter = 0
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		c.retryAfter = time.Duration(secs) * time.Second
	}
	return resp.StatusCode, !resp.Close, nil
}

func (c *senderConn) close() {
	if c.conn != nil {
		c.stop()
		c.conn.Close()
		c.conn = nil
	}
}
