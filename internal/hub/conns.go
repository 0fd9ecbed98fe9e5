package hub

import (
	"container/list"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-hub/switchboard/internal/metrics"
)

// DefaultMaxConns is Options.MaxConns's default, lowered to fit the
// process's open-file limit when that is smaller (see connLimit).
const DefaultMaxConns = 10000

// fdHeadroom is how many descriptors the connection bound leaves to the
// hub's own use: its store, outbound deliveries, and their DNS lookups.
const fdHeadroom = 512

// connLimit resolves Options.MaxConns: 0 means DefaultMaxConns, within the
// open-file limit nofile (0 when unknown) less fdHeadroom; negative means
// no bound.
func connLimit(opt int, nofile uint64) int {
	if opt != 0 {
		return opt
	}
	n := DefaultMaxConns
	if nofile > 0 && nofile < uint64(n)+fdHeadroom {
		n = max(int(nofile)-fdHeadroom, 64)
	}
	return n
}

// Per-client bounds (Options.MaxConnsPerClient, MaxIdlePerClient) and their
// defaults. A client is the address a connection comes from; behind a
// proxy or load balancer every connection comes from its address, so raise
// or lift these there.
const (
	DefaultMaxConnsPerClient = 1024
	DefaultMaxIdlePerClient  = 128
)

// connCounter bounds the client connections the hub holds: in all (max),
// per client address (maxPerClient) and, of those waiting for a request,
// per client (maxIdlePerClient). Every open connection costs a
// descriptor, and each long-lived one (an event stream, a keep-alive
// connection idling for up to the server's IdleTimeout, a connection that
// has not sent its request yet) holds it; without bounds, one client's
// flood of connections would use up the process's descriptors and lock
// everyone else out.
//
// A connection that is waiting — idle between keep-alive requests, or new
// and not yet sending — can be given up at little cost: its client opens
// another when it has something to send. So when a new connection would
// pass a bound, the hub closes the oldest waiting connection (of the same
// client for the per-client bound, of anyone for the total) to make room;
// only when none is waiting is the new one closed unanswered (it may be a
// TLS connection, so no plain-text answer fits), counted and logged. A
// client that goes past its idle bound loses its oldest idle connection.
// Connections serving a request or a stream are never closed for room.
type connCounter struct {
	max              int // below 1: no bound
	maxPerClient     int // below 1: no bound
	maxIdlePerClient int // below 1: no bound
	open             atomic.Int64
	refused          atomic.Uint64
	evicted          atomic.Uint64
	log              *slog.Logger

	mu       sync.Mutex
	clients  map[string]*connClient
	waiting  list.List // of *countedConn: every waiting connection, oldest first
	logged   time.Time // last warning, so a flood logs once a minute
	stopping bool      // the server shuts down: admit nothing, keep no one waiting
}

// connClient is one client address's connections.
type connClient struct {
	n       int
	waiting list.List // of *countedConn, oldest first
}

// register exports the counts as metrics.
func (c *connCounter) register(reg prometheus.Registerer) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "connections_open",
			Help: "Client connections the hub holds."},
			func() float64 { return float64(c.open.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "connections_max",
			Help: "Client connections the hub may hold at once (--max-conns; 0: no bound)."},
			func() float64 { return float64(max(c.max, 0)) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "connections_refused_total",
			Help: "Client connections closed unanswered because the hub, or their client, held as many as it may and none was waiting."},
			func() float64 { return float64(c.refused.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "connections_waiting",
			Help: "Client connections waiting for a request (idle keep-alive, or new and not yet sending)."},
			func() float64 { c.mu.Lock(); defer c.mu.Unlock(); return float64(c.waiting.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "connections_evicted_total",
			Help: "Waiting connections (idle keep-alive, or not yet sending) closed to make room under a connection bound."},
			func() float64 { return float64(c.evicted.Load()) }),
	)
}

// attach makes srv report its connections' states to c and, when it shuts
// down, close the connections that wait (see closeWaiting).
func (c *connCounter) attach(srv *http.Server) {
	srv.ConnState = c.state
	// Shutdown runs this once it has closed its listeners.
	srv.RegisterOnShutdown(c.closeWaiting)
}

// listener wraps ln so that it counts its connections and keeps the bounds.
func (c *connCounter) listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, c: c}
}

type limitedListener struct {
	net.Listener
	c *connCounter
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if cc := l.c.admit(conn); cc != nil {
			return cc, nil
		}
		_ = conn.Close()
	}
}

// clientKey is the client address of a connection.
func clientKey(conn net.Conn) string {
	if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(conn.RemoteAddr().String())
	if err != nil {
		return conn.RemoteAddr().String()
	}
	return host
}

// admit counts conn in, making room by closing waiting connections if a
// bound needs it, or returns nil when there is no room (conn is refused).
func (c *connCounter) admit(conn net.Conn) *countedConn {
	key := clientKey(conn)
	var victims []*countedConn
	c.mu.Lock()
	if c.clients == nil {
		c.clients = map[string]*connClient{}
	}
	cl := c.clients[key]
	if cl == nil {
		cl = &connClient{}
	}
	ok := !c.stopping
	if ok && c.maxPerClient > 0 && cl.n >= c.maxPerClient {
		if v := oldest(&cl.waiting); v != nil {
			victims = append(victims, v)
			c.detachLocked(v)
		} else {
			ok = false
		}
	}
	if ok && c.max > 0 && c.open.Load() >= int64(c.max) {
		if v := oldest(&c.waiting); v != nil {
			victims = append(victims, v)
			c.detachLocked(v)
		} else {
			ok = false
		}
	}
	var cc *countedConn
	if ok {
		cc = &countedConn{Conn: conn, c: c, key: key, cl: cl}
		cl.n++
		c.clients[key] = cl
		c.open.Add(1)
		// A new connection waits for its request until the server reads
		// it (StateActive).
		if v := c.waitLocked(cc); v != nil {
			victims = append(victims, v)
		}
	}
	c.mu.Unlock()
	for _, v := range victims {
		c.evicted.Add(1)
		_ = v.Conn.Close()
	}
	if !ok && !c.stopping {
		c.refuse() // counted before the client can see the close
	}
	return cc
}

// closeWaiting closes every waiting connection and, from then on, every
// connection that starts to wait or is accepted: the server is shutting
// down. http.Server.Shutdown closes idle connections itself but waits up
// to 5 s for a new one that has not sent its request (Go issue 22682),
// and a client that opened a connection it never used would hold the
// whole shutdown that long. Nothing is lost: a connection that is
// waiting has no request read, so nothing of it was accepted.
func (c *connCounter) closeWaiting() {
	c.mu.Lock()
	c.stopping = true
	var victims []*countedConn
	for e := c.waiting.Front(); e != nil; e = e.Next() {
		victims = append(victims, e.Value.(*countedConn))
	}
	for _, v := range victims {
		c.detachLocked(v)
	}
	c.mu.Unlock()
	for _, v := range victims {
		_ = v.Conn.Close()
	}
}

func oldest(l *list.List) *countedConn {
	if e := l.Front(); e != nil {
		return e.Value.(*countedConn)
	}
	return nil
}

// waitLocked lists cc as waiting; past its client's idle bound, the
// client's oldest waiting connection is detached and returned to close.
func (c *connCounter) waitLocked(cc *countedConn) (victim *countedConn) {
	if cc.detached || cc.inWaiting != nil {
		return nil
	}
	cc.inWaiting = c.waiting.PushBack(cc)
	cc.inClientWaiting = cc.cl.waiting.PushBack(cc)
	if c.maxIdlePerClient > 0 && cc.cl.waiting.Len() > c.maxIdlePerClient {
		victim = oldest(&cc.cl.waiting)
		c.detachLocked(victim)
	}
	return victim
}

func (c *connCounter) unwaitLocked(cc *countedConn) {
	if cc.inWaiting != nil {
		c.waiting.Remove(cc.inWaiting)
		cc.cl.waiting.Remove(cc.inClientWaiting)
		cc.inWaiting, cc.inClientWaiting = nil, nil
	}
}

// detachLocked takes cc out of every count (it is about to be closed).
func (c *connCounter) detachLocked(cc *countedConn) {
	if cc.detached {
		return
	}
	cc.detached = true
	c.unwaitLocked(cc)
	cc.cl.n--
	if cc.cl.n == 0 {
		delete(c.clients, cc.key)
	}
	c.open.Add(-1)
}

// state is the server's ConnState hook: a connection waiting for its next
// request (idle) may be closed to make room; one serving a request or
// taken over (a stream, an upgrade) may not.
func (c *connCounter) state(nc net.Conn, st http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	cc, ok := nc.(*countedConn)
	if !ok {
		return
	}
	var victim *countedConn
	c.mu.Lock()
	switch st {
	case http.StateIdle:
		if c.stopping {
			c.detachLocked(cc)
			victim = cc
		} else {
			victim = c.waitLocked(cc)
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		c.unwaitLocked(cc)
	}
	c.mu.Unlock()
	if victim != nil {
		if victim != cc {
			c.evicted.Add(1)
		}
		_ = victim.Conn.Close()
	}
}

func (c *connCounter) refuse() {
	total := c.refused.Add(1)
	c.mu.Lock()
	now := time.Now()
	warn := now.Sub(c.logged) >= time.Minute
	if warn {
		c.logged = now
	}
	c.mu.Unlock()
	if warn && c.log != nil {
		c.log.Warn("connection refused: the hub, or this client, holds as many connections as it may and none is waiting (--max-conns, --max-conns-per-client)",
			"max_conns", c.max, "max_conns_per_client", c.maxPerClient, "refused_total", total)
	}
}

// countedConn gives its place back when closed (once, however often Close
// is called: net/http and crypto/tls may both close it).
type countedConn struct {
	net.Conn
	c   *connCounter
	key string
	// Guarded by c.mu.
	cl                         *connClient
	detached                   bool
	inWaiting, inClientWaiting *list.Element
	closed                     atomic.Bool
}

// CloseWrite passes on to the connection when it can half-close (TCP):
// net/http half-closes before it closes a connection it answered with an
// error, so that the client reads the answer rather than a reset.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return net.ErrClosed
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.c.mu.Lock()
		c.c.detachLocked(c)
		c.c.mu.Unlock()
	}
	return c.Conn.Close()
}
