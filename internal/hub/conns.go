package hub

import (
	"log/slog"
	"net"
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

// connCounter bounds how many client connections the hub holds at once.
// Every open connection costs a descriptor, and each long-lived one (an
// event stream, or a keep-alive connection idling for up to the server's
// IdleTimeout) holds it; without a bound, a flood of connections would
// use up the process's descriptors, and the hub could then neither open
// the connections it delivers on nor accept its own operators. A
// connection over the bound is closed at once, unanswered (it may be a TLS
// connection, so no plain-text answer fits), counted and logged.
type connCounter struct {
	max     int // below 1: no bound
	open    atomic.Int64
	refused atomic.Uint64
	log     *slog.Logger

	mu     sync.Mutex
	logged time.Time // last warning, so a flood logs once a minute
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
			Help: "Client connections closed unanswered because the hub held as many as it may."},
			func() float64 { return float64(c.refused.Load()) }),
	)
}

// listener wraps ln so that it counts its connections and closes those
// over the bound.
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
		n := l.c.open.Add(1)
		if l.c.max < 1 || n <= int64(l.c.max) {
			return &countedConn{Conn: conn, c: l.c}, nil
		}
		l.c.open.Add(-1)
		l.c.refuse() // counted before the client can see the close
		_ = conn.Close()
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
		c.log.Warn("connection refused: the hub holds as many connections as it may (--max-conns)",
			"max_conns", c.max, "refused_total", total)
	}
}

// countedConn gives its place back when closed (once, however often Close
// is called: net/http and crypto/tls may both close it).
type countedConn struct {
	net.Conn
	c      *connCounter
	closed atomic.Bool
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
		c.c.open.Add(-1)
	}
	return c.Conn.Close()
}
