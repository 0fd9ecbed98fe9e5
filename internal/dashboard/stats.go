package dashboard

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Limits of the throughput history kept in memory.
const (
	maxStatPoints     = 360 // 30 minutes at the default 5 s
	defaultStatPeriod = 5 * time.Second
	maxDepthAgents    = 1000 // agents whose queues one sample sums
)

// StatPoint is one sample of the hub's flow, for the dashboard's charts:
// what happened during the Period that ends At, and the queue depth at At.
type StatPoint struct {
	At        time.Time `json:"at"`
	PeriodSec float64   `json:"period_s"`
	Accepted  int       `json:"accepted"`
	Delivered int       `json:"delivered"`
	// DeadLetters counts messages that ended rejected or timeout.
	DeadLetters int `json:"dead_letters"`
	Retries     int `json:"retries"`
	// Queued is the messages queued for the (first 1,000) agents.
	Queued int `json:"queued"`
}

// statsRecorder counts the relay's events between samples.
type statsRecorder struct {
	mu                                 sync.Mutex
	accepted, delivered, dead, retries int
	points                             []StatPoint
	last                               time.Time
}

func newStatsRecorder() *statsRecorder { return &statsRecorder{} }

func (s *statsRecorder) observe(e core.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Type {
	case core.EventAccepted:
		s.accepted++
	case core.EventDelivered:
		s.delivered++
	case core.EventRejected, core.EventTimeout:
		s.dead++
	case core.EventRetry:
		s.retries++
	}
}

// sample closes the current period at now with the queue depth queued.
func (s *statsRecorder) sample(now time.Time, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := StatPoint{At: now, Accepted: s.accepted, Delivered: s.delivered, DeadLetters: s.dead, Retries: s.retries, Queued: queued}
	if !s.last.IsZero() {
		p.PeriodSec = now.Sub(s.last).Seconds()
	}
	s.accepted, s.delivered, s.dead, s.retries = 0, 0, 0, 0
	s.last = now
	s.points = append(s.points, p)
	if len(s.points) > maxStatPoints {
		s.points = s.points[len(s.points)-maxStatPoints:]
	}
}

func (s *statsRecorder) snapshot() []StatPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StatPoint{}, s.points...)
}

// sampler is the principal the stats sampler reads the relay as: the
// hub's own actor (it runs outside any request).
var sampler = core.InternalPrincipal("dashboard")

// queued sums the queues of the first maxDepthAgents agents.
func (d *Dashboard) queued(ctx context.Context) int {
	agents, err := d.relay.ListAgents(ctx, sampler, core.AgentFilter{Limit: maxDepthAgents})
	if err != nil {
		return 0
	}
	total := 0
	for _, a := range agents {
		if n, err := d.relay.QueueDepth(ctx, sampler, a.ID); err == nil {
			total += n
		}
	}
	return total
}

// runStats counts events and samples every period until ctx ends.
func (d *Dashboard) runStats(ctx context.Context) {
	events, cancel := d.relay.Events().Subscribe(4096)
	defer cancel()
	period := d.opt.StatsPeriod
	if period <= 0 {
		period = defaultStatPeriod
	}
	t := time.NewTicker(period)
	defer t.Stop()
	d.stats.sample(d.relay.Clock().Now(), d.queued(ctx))
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-events:
			d.stats.observe(e)
		case <-t.C:
			d.stats.sample(d.relay.Clock().Now(), d.queued(ctx))
		}
	}
}

// statsAPI serves GET /dashboard/api/stats: the samples, oldest first.
func (d *Dashboard) statsAPI(w http.ResponseWriter, r *http.Request) {
	httperr.JSON(w, http.StatusOK, map[string]any{"points": d.stats.snapshot(),
		"note": "sampled by this hub process while it runs, every " + strconv.FormatFloat(d.statPeriod().Seconds(), 'f', -1, 64) + " s; not persisted"})
}

func (d *Dashboard) statPeriod() time.Duration {
	if d.opt.StatsPeriod > 0 {
		return d.opt.StatsPeriod
	}
	return defaultStatPeriod
}
