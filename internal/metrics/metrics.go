// Package metrics exposes the hub's Prometheus metrics.
//
// Two kinds of series are served at /metrics:
//
//   - counters and a latency histogram fed from the relay's event bus
//     (messages accepted, delivered, rejected, timed out and retried, per
//     ingress protocol; delivery latency from acceptance to the receiver's
//     acknowledgement), updated by Run;
//   - gauges computed from the store at scrape time (registered and alive
//     agents, queue depth of the deepest receivers plus the total, whether
//     the store answers), with the store calls the scrape makes timed in a
//     histogram so that store latency is measured on real operations.
//
// A third kind is fed by the hub's HTTP middleware through the HTTP type:
// requests by route pattern, method and status code, their durations, and
// the requests refused for their rate or for want of a credential.
//
// Names follow Prometheus's conventions: counters, and only counters, end
// in _total; units are in the name (_seconds, _messages, _bytes);
// switchboard_build_info carries the version as labels with the value 1.
// docs/metrics.md lists every series.
//
// Cardinality is bounded: the protocol label takes only the known protocol
// names (anything else is "other"), the route label is a mux pattern (or
// "unmatched"), the method label a known method (or "other"), and
// per-receiver queue depth is reported only for the TopN deepest queues.
package metrics

import (
	"context"
	"net/http"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Namespace prefixes every metric name.
const Namespace = "switchboard"

// Defaults of the scrape-time gauges.
const (
	// DefaultTopN is how many receivers get their own queue depth series.
	DefaultTopN = 10
	// DefaultMaxScan bounds how many agents one scrape looks at.
	DefaultMaxScan = 5000
	// eventBuffer is the event subscription's buffer.
	eventBuffer = 8192
)

// knownProtocols are the values the protocol label may take; everything
// else is reported as "other" so a client cannot create series at will.
var knownProtocols = map[string]bool{"atp": true, "mamp": true, "a2a": true, "mcp": true}

// protocolLabel maps a message's ingress protocol to a bounded label value.
func protocolLabel(p string) string {
	switch {
	case p == "":
		return "unknown"
	case knownProtocols[p]:
		return p
	}
	return "other"
}

// Option tunes a Metrics.
type Option func(*Metrics)

// WithTopN sets how many receivers get their own queue depth series.
func WithTopN(n int) Option {
	return func(m *Metrics) {
		if n >= 0 {
			m.topN = n
		}
	}
}

// WithMaxScan bounds how many agents one scrape looks at.
func WithMaxScan(n int) Option {
	return func(m *Metrics) {
		if n > 0 {
			m.maxScan = n
		}
	}
}

// WithVersion sets the version label of switchboard_build_info.
func WithVersion(v string) Option { return func(m *Metrics) { m.version = v } }

// WithPublic serves the metrics without authentication (the default
// requires the admin token, as every operator route does).
func WithPublic(public bool) Option { return func(m *Metrics) { m.public = public } }

// Metrics collects and serves the hub's metrics.
type Metrics struct {
	relay   *core.Relay
	reg     *prometheus.Registry
	events  <-chan core.Event
	cancel  func()
	topN    int
	maxScan int
	public  bool
	version string
	http    *HTTP

	accepted  *prometheus.CounterVec
	delivered *prometheus.CounterVec
	rejected  *prometheus.CounterVec
	timedOut  *prometheus.CounterVec
	expired   *prometheus.CounterVec
	retries   *prometheus.CounterVec
	replayed  prometheus.Counter
	regs      prometheus.Counter
	deregs    prometheus.Counter
	latency   *prometheus.HistogramVec
	attempts  prometheus.Histogram
	storeOps  *prometheus.HistogramVec
}

// New builds the metrics of relay and subscribes to its events at once, so
// that nothing published after New returns is missed; call Run to consume
// them.
func New(relay *core.Relay, opts ...Option) *Metrics {
	m := &Metrics{relay: relay, reg: prometheus.NewRegistry(), topN: DefaultTopN, maxScan: DefaultMaxScan}
	for _, o := range opts {
		o(m)
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, []string{"protocol"})
	}
	m.accepted = counter("messages_accepted_total", "Messages accepted (durable), by ingress protocol.")
	m.delivered = counter("messages_delivered_total", "Messages delivered (acknowledged by the receiver), by ingress protocol.")
	m.rejected = counter("messages_rejected_total", "Messages refused by their receiver, by ingress protocol.")
	m.timedOut = counter("messages_timeout_total", "Messages whose TTL passed before delivery (dead letters), by ingress protocol.")
	m.expired = counter("messages_expired_total", "Messages already past their TTL on arrival (stored, never delivered), by ingress protocol.")
	m.retries = counter("delivery_retries_total", "Failed delivery attempts that will be retried, by ingress protocol.")
	m.replayed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "messages_replayed_total",
		Help: "Dead letters re-queued by an operator."})
	m.regs = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "agent_registrations_total",
		Help: "Agent registrations (new and renewed by re-registering)."})
	m.deregs = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "agent_deregistrations_total",
		Help: "Agents deregistered."})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "delivery_latency_seconds",
		Help:    "Time from a message's acceptance to its delivery, by ingress protocol.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"protocol"})
	m.attempts = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "delivery_attempts",
		Help: "Attempts a delivered message took.", Buckets: []float64{1, 2, 3, 5, 8, 13, 21}})
	m.storeOps = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "store_operation_seconds",
		Help:    "Duration of the store operations a scrape makes (ping, list_agents, queue_depth).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}, []string{"op"})
	m.http = newHTTP()
	bus := relay.Events()
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "events_dropped_total",
		Help: "Relay events lost by slow subscribers of the event bus (all subscribers, metrics included)."},
		func() float64 { return float64(bus.Dropped()) })
	m.reg.MustRegister(m.accepted, m.delivered, m.rejected, m.timedOut, m.expired, m.retries, m.replayed, m.regs, m.deregs,
		m.latency, m.attempts, dropped, &storeCollector{m: m}, buildInfo(m.version),
		m.http.requests, m.http.duration, m.http.rateLimited, m.http.refused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.events, m.cancel = bus.Subscribe(eventBuffer)
	return m
}

// buildInfo is the constant switchboard_build_info series.
func buildInfo(version string) prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" || version == "dev" {
			if v := bi.Main.Version; v != "" && v != "(devel)" {
				version = v
			}
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	if version == "" {
		version = "dev"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; the labels name the hub's version, Go version and VCS revision.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "revision": revision}})
	g.Set(1)
	return g
}

// HTTP returns the request metrics, which the hub's middleware feeds.
func (m *Metrics) HTTP() *HTTP { return m.http }

// HTTP holds the request metrics.
type HTTP struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	refused     *prometheus.CounterVec
}

func newHTTP() *HTTP {
	return &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code."}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "http_request_duration_seconds",
			Help:    "Time to answer an HTTP request (to the end of the handler: a stream counts its whole life), by route pattern, method and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"route", "method", "code"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "http_requests_rate_limited_total",
			Help: "Requests refused with 429 for their caller's request rate, by the kind of caller (agent or anonymous)."}, []string{"caller"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "http_requests_refused_total",
			Help: "Requests refused for want of a valid credential (401) or for a credential not allowed to do it (403), by route pattern and code."}, []string{"route", "code"}),
	}
}

var knownMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// Observe counts one answered request. route is the mux pattern that
// served it ("" when none matched).
func (h *HTTP) Observe(route, method string, code int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	if !knownMethods[method] {
		method = "other"
	}
	c := strconv.Itoa(code)
	h.requests.WithLabelValues(route, method, c).Inc()
	h.duration.WithLabelValues(route, method, c).Observe(d.Seconds())
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		h.refused.WithLabelValues(route, c).Inc()
	}
}

// RateLimited counts a request refused for its rate; agent says whether
// the caller was an agent's credential (else an anonymous address).
func (h *HTTP) RateLimited(agent bool) {
	caller := "anonymous"
	if agent {
		caller = "agent"
	}
	h.rateLimited.WithLabelValues(caller).Inc()
}

// Registry returns the registry the metrics are in, to add more.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Run consumes relay events until ctx ends, then unsubscribes.
func (m *Metrics) Run(ctx context.Context) {
	defer m.cancel()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-m.events:
			if e.Type == core.EventTimeout && e.Protocol == "" && e.MessageID != "" {
				// The expiry sweep does not know the message's protocol.
				e.Protocol = m.protocolOf(ctx, e.MessageID)
			}
			m.Observe(e)
		}
	}
}

func (m *Metrics) protocolOf(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	msg, err := m.relay.MessageFor(ctx, hub, id)
	if err != nil {
		return ""
	}
	return msg.Protocol
}

// Observe counts one relay event. Run calls it for every event.
func (m *Metrics) Observe(e core.Event) {
	p := protocolLabel(e.Protocol)
	switch e.Type {
	case core.EventAccepted:
		if e.Status == core.StatusExpired {
			m.expired.WithLabelValues(p).Inc()
		}
		m.accepted.WithLabelValues(p).Inc()
	case core.EventDelivered:
		m.delivered.WithLabelValues(p).Inc()
		if e.Latency > 0 {
			m.latency.WithLabelValues(p).Observe(e.Latency.Seconds())
		}
		if e.Attempts > 0 {
			m.attempts.Observe(float64(e.Attempts))
		}
	case core.EventRejected:
		m.rejected.WithLabelValues(p).Inc()
	case core.EventTimeout:
		m.timedOut.WithLabelValues(p).Inc()
	case core.EventRetry:
		m.retries.WithLabelValues(p).Inc()
	case core.EventReplayed:
		m.replayed.Inc()
	case core.EventRegistered:
		m.regs.Inc()
	case core.EventDeregistered:
		m.deregs.Inc()
	}
}

// Handler serves the metrics in the Prometheus exposition format. Unless
// built WithPublic(true), it answers only the operator (admin token; any
// caller in dev mode).
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	if m.public {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.Admin(r.Context()); err != nil {
			httperr.From(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hub is the principal the metrics read the relay as: the hub's own
// actor, which the authorization table lets read queues and messages. The
// scrape itself is the operator's (Handler).
var hub = core.InternalPrincipal("metrics")

// visible leaves the hidden agents (the hub's internal helpers) out of
// list, as the agent gauges have always counted only the agents callers
// registered.
func visible(list []*core.Agent) []*core.Agent {
	out := list[:0]
	for _, a := range list {
		if !core.Hidden(a.ID) {
			out = append(out, a)
		}
	}
	return out
}

// storeCollector computes the store gauges at scrape time.
type storeCollector struct{ m *Metrics }

var (
	descAgents = prometheus.NewDesc(Namespace+"_agents", "Registered agents by lease state (alive: lease current).",
		[]string{"state"}, nil)
	descQueue = prometheus.NewDesc(Namespace+"_receiver_queued_messages", "Queued messages of the receivers with the deepest queues (top N).",
		[]string{"receiver"}, nil)
	descQueueTotal = prometheus.NewDesc(Namespace+"_queued_messages", "Queued messages of all scanned registered receivers.",
		nil, nil)
	descStoreUp = prometheus.NewDesc(Namespace+"_store_up", "1 when the store answered the scrape's ping, else 0.",
		nil, nil)
	descScanTruncated = prometheus.NewDesc(Namespace+"_scrape_agents_truncated", "1 when the scrape looked at only the first MaxScan agents.",
		nil, nil)
)

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAgents
	ch <- descQueue
	ch <- descQueueTotal
	ch <- descStoreUp
	ch <- descScanTruncated
	c.m.storeOps.Describe(ch)
}

// Collect implements prometheus.Collector. The store operation histogram
// is collected here, after the operations, so a scrape includes its own.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.m.storeOps.Collect(ch)
	c.collect(ch)
}

func (c *storeCollector) collect(ch chan<- prometheus.Metric) {
	m := c.m
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rl := m.relay
	timed := func(op string, f func() error) error {
		t0 := time.Now()
		err := f()
		m.storeOps.WithLabelValues(op).Observe(time.Since(t0).Seconds())
		return err
	}
	up := 1.0
	if err := timed("ping", func() error { return rl.Ping(ctx) }); err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, up)
	if up == 0 {
		return
	}
	var agents []*core.Agent
	if err := timed("list_agents", func() (err error) {
		agents, err = rl.ListAgents(ctx, hub, core.AgentFilter{Limit: m.maxScan + 1})
		return err
	}); err != nil {
		return
	}
	truncated := 0.0
	if len(agents) > m.maxScan {
		agents, truncated = agents[:m.maxScan], 1
	}
	agents = visible(agents)
	ch <- prometheus.MustNewConstMetric(descScanTruncated, prometheus.GaugeValue, truncated)
	now := m.relay.Clock().Now()
	alive := 0
	type depth struct {
		id string
		n  int
	}
	depths := make([]depth, 0, len(agents))
	total := 0
	for _, a := range agents {
		if a.Alive(now) {
			alive++
		}
		var n int
		if err := timed("queue_depth", func() (err error) {
			n, err = rl.QueueDepth(ctx, hub, a.ID)
			return err
		}); err != nil {
			continue
		}
		total += n
		if n > 0 {
			depths = append(depths, depth{a.ID, n})
		}
	}
	ch <- prometheus.MustNewConstMetric(descAgents, prometheus.GaugeValue, float64(alive), "alive")
	ch <- prometheus.MustNewConstMetric(descAgents, prometheus.GaugeValue, float64(len(agents)-alive), "expired")
	ch <- prometheus.MustNewConstMetric(descQueueTotal, prometheus.GaugeValue, float64(total))
	sort.Slice(depths, func(i, j int) bool {
		if depths[i].n != depths[j].n {
			return depths[i].n > depths[j].n
		}
		return depths[i].id < depths[j].id
	})
	for i, d := range depths {
		if i >= m.topN {
			break
		}
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(d.n), d.id)
	}
}
