// Package bench is a load generator for ATP-compatible relays: concurrent
// senders post messages to /atp/send while a receiver counts what the relay
// delivers — by push to a local callback (the tutorial's routes, so any ATP
// relay) or from Switchboard's live stream with batched acknowledgements —
// and the run reports throughput and latency percentiles.
package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Receive modes: how the benchmark's receiver gets its messages.
const (
	// ReceivePush registers a callback URL; the relay POSTs each message.
	ReceivePush = "push"
	// ReceiveStream holds GET /atp/stream/{id} open and acknowledges what
	// it gets with POST /atp/ack in batches; a message counts as delivered
	// when the relay has taken its acknowledgement.
	ReceiveStream = "stream"
)

// Message id styles (Config.IDs).
const (
	IDsOrdered = "ordered"
	IDsRandom  = "random"
	IDsSender  = "sender"
)

// Config is one benchmark run.
type Config struct {
	Hub string // relay base URL
	// Hubs, when set, are several instances of one relay (sharing a
	// store): sender i posts to Hubs[i%len(Hubs)] and the receiver
	// registers on Hubs[0]. Hub is then ignored.
	Hubs     []string
	Token    string        // bearer token (admin token on an auth-on hub)
	Senders  int           // concurrent senders [64]
	Duration time.Duration // how long senders send [10s]
	Messages int           // stop after this many sends in total (0: no limit)
	Payload  int           // payload text size in bytes [64]
	TTL      time.Duration // message TTL [60s]
	Drain    time.Duration // how long to wait for deliveries after sending [30s]
	Receive  string        // ReceivePush (default) or ReceiveStream
	// Receivers is how many receivers are registered [1]; each sender
	// sends its messages to them in turn. With ReceiveStream each holds
	// its own stream.
	Receivers int
	// SenderAgents is how many sender agents the senders speak as [Senders]:
	// sender i speaks as agent i % SenderAgents, so SenderAgents ×
	// Receivers (sender, receiver) lanes carry the load — 1 and 1 put
	// every message in one lane, the case where the hub's per-lane costs
	// (ordering, the lane's row) show most.
	SenderAgents int
	// Rate, when above zero, makes the run open-loop: the senders together
	// send Rate messages a second on a fixed schedule (each sender every
	// Senders/Rate seconds, staggered), whatever the relay's speed, and a
	// send's latency counts from its scheduled time, so a relay that falls
	// behind shows it in the percentiles instead of slowing the senders
	// down. Zero (the default) is closed-loop: each sender sends its next
	// message as soon as the last is answered.
	Rate float64
	// IDs is how senders make message ids: IDsOrdered (the default: UUIDv7s,
	// growing with time, as the Go client and `switchboard send` make them),
	// IDsRandom (128 random bits, as a UUIDv4 client sends) or IDsSender
	// (the sender's number and a count). The hub indexes every id, and ids
	// that grow with time cost it the fewest index writes.
	IDs string
	// Progress, when set, receives a line every half second.
	Progress func(line string)
}

// Result is what a run measured.
type Result struct {
	Senders   int `json:"senders"`
	Receivers int `json:"receivers"`
	// Lanes is the (sender agent, receiver) pairs the load went through.
	Lanes    int           `json:"lanes"`
	Rate     float64       `json:"rate,omitempty"` // the open-loop target rate, messages/s
	Receive  string        `json:"receive"`
	IDs      string        `json:"ids"` // how message ids were made (Config.IDs)
	Hubs     []string      `json:"hubs"`
	Duration time.Duration `json:"duration_ns"`
	Sent     int64         `json:"sent"`
	Accepted int64         `json:"accepted"`
	Errors   int64         `json:"errors"`
	// RateLimited counts sends the hub refused with 429; the sender then
	// waits for the answer's Retry-After (100 ms without one).
	RateLimited    int64   `json:"rate_limited,omitempty"`
	Delivered      int64   `json:"delivered"`
	Duplicates     int64   `json:"duplicate_deliveries"`
	AcceptedPerSec float64 `json:"accepted_per_sec"`
	// DeliveredPerSec is deliveries over the time from the first send to
	// the last delivery.
	DeliveredPerSec float64       `json:"delivered_per_sec"`
	SendP50         time.Duration `json:"send_p50_ns"`
	SendP90         time.Duration `json:"send_p90_ns"`
	SendP99         time.Duration `json:"send_p99_ns"`
	SendMax         time.Duration `json:"send_max_ns"`
	E2EP50          time.Duration `json:"e2e_p50_ns"`
	E2EP99          time.Duration `json:"e2e_p99_ns"`
	// HubCPU is the CPU time the hubs used per delivered message, read from
	// their /metrics (process_cpu_seconds_total, summed over the hub URLs)
	// before the first send and after the last delivery; zero when a hub
	// does not show it to this token. LoadCPU is the same for the load
	// generator's own process. On a shared machine their ratio varies much
	// less than throughput does.
	HubCPU  time.Duration `json:"hub_cpu_per_message_ns,omitempty"`
	LoadCPU time.Duration `json:"load_cpu_per_message_ns,omitempty"`
	// SenderCredentials is how many senders sent with a credential of
	// their own (the rest used Config.Token).
	SenderCredentials int `json:"sender_credentials"`
	// Deregistered is how many of the agents the run registered (senders
	// and receivers) it removed again at its end; a run leaves none behind
	// unless the hub refused the deregistration.
	Deregistered int `json:"deregistered"`
	// Registered is how many agents the run registered.
	Registered int `json:"registered"`
}

// String formats a result for people.
func (r Result) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }
	load := ""
	if r.Rate > 0 {
		load = fmt.Sprintf(" at %.0f/s open-loop", r.Rate)
	}
	var parts []string
	if r.HubCPU > 0 {
		parts = append(parts, fmt.Sprintf("hub %dµs", r.HubCPU.Microseconds()))
	}
	if r.LoadCPU > 0 {
		parts = append(parts, fmt.Sprintf("load generator %dµs", r.LoadCPU.Microseconds()))
	}
	cpu := ""
	if len(parts) > 0 {
		cpu = "\nCPU per message: " + strings.Join(parts, ", ")
	}
	if r.Registered > 0 {
		cpu += fmt.Sprintf("\nagents registered %d, deregistered %d", r.Registered, r.Deregistered)
	}
	if r.SenderCredentials == r.Senders {
		load += " (own credentials)"
	}
	if r.IDs != "" {
		load += ", " + r.IDs + " ids"
	}
	errText := fmt.Sprint(r.Errors)
	if r.RateLimited > 0 {
		errText += fmt.Sprintf(", rate-limited %d (waited as told)", r.RateLimited)
	}
	return fmt.Sprintf("senders %d%s on %d hub(s), %d receiver(s) by %s, %d lane(s), %v: sent %d, accepted %d (%.0f/s), delivered %d (%.0f/s), errors %s, duplicate deliveries %d\n"+
		"send latency p50 %s p90 %s p99 %s max %s; end-to-end p50 %s p99 %s%s",
		r.Senders, load, len(r.Hubs), max(r.Receivers, 1), r.Receive, r.Lanes, r.Duration.Round(time.Millisecond), r.Sent, r.Accepted, r.AcceptedPerSec, r.Delivered, r.DeliveredPerSec,
		errText, r.Duplicates, ms(r.SendP50), ms(r.SendP90), ms(r.SendP99), ms(r.SendMax), ms(r.E2EP50), ms(r.E2EP99), cpu)
}

type receiver struct {
	mu       sync.Mutex
	sentAt   map[string]time.Time
	got      map[string]bool
	e2e      []time.Duration
	last     time.Time
	dups     atomic.Int64
	received atomic.Int64
}

// ServeHTTP is the push receiver's callback.
func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var env struct {
		MessageID string `json:"message_id"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = json.Unmarshal(body, &env)
	rv.seen(env.MessageID, now, true)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"accepted"}`)
}

// seen records the arrival of message id at now; delivered says whether it
// also counts as delivered (push) or waits for its acknowledgement
// (stream). It reports whether the id is new.
func (rv *receiver) seen(id string, now time.Time, delivered bool) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.got[id] {
		rv.dups.Add(1)
		return false
	}
	rv.got[id] = true
	if t, ok := rv.sentAt[id]; ok {
		rv.e2e = append(rv.e2e, now.Sub(t))
	}
	if delivered {
		rv.received.Add(1)
		rv.last = now
	}
	return true
}

// acked counts n acknowledged stream deliveries.
func (rv *receiver) acked(n int, now time.Time) {
	rv.mu.Lock()
	rv.received.Add(int64(n))
	rv.last = now
	rv.mu.Unlock()
}

// Run runs one benchmark.
func Run(ctx context.Context, c Config) (out Result, runErr error) {
	if c.Senders <= 0 {
		c.Senders = 64
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Payload <= 0 {
		c.Payload = 64
	}
	if c.TTL <= 0 {
		c.TTL = time.Minute
	}
	if c.Drain <= 0 {
		c.Drain = 30 * time.Second
	}
	if c.Receivers <= 0 {
		c.Receivers = 1
	}
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		return Result{}, fmt.Errorf("rate %v: want a finite number of messages a second, or 0 for closed-loop", c.Rate)
	}
	switch c.Receive {
	case "":
		c.Receive = ReceivePush
	case ReceivePush, ReceiveStream:
	default:
		return Result{}, fmt.Errorf("receive mode %q: want %s or %s", c.Receive, ReceivePush, ReceiveStream)
	}
	var newID func(run string, sender, i int) string
	switch c.IDs {
	case "", IDsOrdered:
		c.IDs, newID = IDsOrdered, func(string, int, int) string { return core.NewID() }
	case IDsRandom:
		newID = func(string, int, int) string {
			var b [16]byte
			_, _ = crand.Read(b[:])
			return hex.EncodeToString(b[:])
		}
	case IDsSender:
		newID = func(run string, sender, i int) string { return fmt.Sprintf("%s-%d-%d", run, sender, i) }
	default:
		return Result{}, fmt.Errorf("ids %q: want %s, %s or %s", c.IDs, IDsOrdered, IDsRandom, IDsSender)
	}
	hubs := append([]string(nil), c.Hubs...)
	if len(hubs) == 0 {
		hubs = []string{c.Hub}
	}
	for i, h := range hubs {
		h = strings.TrimRight(strings.TrimSpace(h), "/")
		if h == "" {
			return Result{}, fmt.Errorf("hub %d: empty URL", i+1)
		}
		hubs[i] = h
	}
	// The senders' connections (see conn.go), dialled at their first send;
	// made here so that a bad hub URL fails before anything is registered.
	conns := make([]*senderConn, c.Senders)
	for s := range conns {
		var err error
		if conns[s], err = newSenderConn(hubs[s%len(hubs)], c.Token, 30*time.Second); err != nil {
			return Result{}, err
		}
	}
	rv := &receiver{sentAt: map[string]time.Time{}, got: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	srv := &http.Server{Handler: rv}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	perHost := 2 * (c.Senders + c.Receivers) // senders, streams, acknowledgements
	tr := &http.Transport{MaxIdleConns: perHost * len(hubs), MaxIdleConnsPerHost: perHost, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	// Streams stay open for the whole run: no overall timeout.
	streams := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	recvIDs := make([]string, c.Receivers)
	for k := range recvIDs {
		recvIDs[k] = fmt.Sprintf("bench-recv-%s-%d", run, k)
	}
	post := func(ctx context.Context, hub, path string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hub+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		authorize(req, c.Token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out, nil
	}
	// Every agent the run registers is deregistered when it ends, however
	// it ends (with its own credential, else the run's token), so that
	// runs leave nothing behind on the hub.
	type agentRef struct{ hub, id, token string }
	var made []agentRef
	var removed int
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, a := range made {
			req, _ := http.NewRequestWithContext(cctx, http.MethodDelete, a.hub+"/atp/agents/"+url.PathEscape(a.id), nil)
			authorize(req, cmp.Or(a.token, c.Token))
			if resp, err := hc.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotFound {
					removed++
				}
			}
		}
		out.Registered, out.Deregistered = len(made), removed
	}()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, recvID := range recvIDs {
		reg := map[string]any{"agent_id": recvID, "capabilities": []string{"bench"}, "lease_seconds": 3600}
		if c.Receive == ReceivePush {
			reg["callback_url"] = "http://" + ln.Addr().String() + "/atp/inbox"
		}
		code, body, err := post(ctx, hubs[0], "/atp/register", reg)
		if err != nil || code != http.StatusOK {
			return Result{}, fmt.Errorf("register receiver %s: %d %s %v", recvID, code, body, err)
		}
		var rr struct {
			Token string `json:"token"`
		}
		_ = json.Unmarshal(body, &rr)
		made = append(made, agentRef{hubs[0], recvID, rr.Token})
		if c.Receive == ReceiveStream {
			ready := make(chan error, 1)
			go func() {
				acks := &acker{post: post, hub: hubs[0], agent: recvID, rv: rv}
				err := stream(sctx, streams, c.Token, hubs[0], recvID, rv, acks, ready)
				if err != nil && sctx.Err() == nil && c.Progress != nil {
					c.Progress("stream ended: " + err.Error())
				}
			}()
			if err := <-ready; err != nil {
				return Result{}, fmt.Errorf("open stream of %s: %w", recvID, err)
			}
		}
	}

	// The senders register as agents and send with the credential the hub
	// issues each, as agents do (with auth on, a hub refuses a sender
	// speaking as another agent, and checking an agent's token is part of
	// every send's cost). A hub that issues none (--dev) or refuses the
	// registration of an agent without a callback (another relay) gets
	// --token for every sender.
	agents := c.SenderAgents
	if agents <= 0 || agents > c.Senders {
		agents = c.Senders
	}
	senderIDs := make([]string, c.Senders)
	tokens := make([]string, agents)
	own := 0
	for s := range senderIDs {
		senderIDs[s] = fmt.Sprintf("bench-send-%s-%d", run, s%agents)
		if s >= agents {
			if tokens[s%agents] != "" {
				conns[s].setToken(tokens[s%agents])
				own++
			}
			continue // the agent is registered
		}
		if s > 0 && own == 0 {
			continue // the first sender got no credential: none will
		}
		code, body, err := post(ctx, hubs[s%len(hubs)], "/atp/register", map[string]any{"agent_id": senderIDs[s], "capabilities": []string{"bench"}, "lease_seconds": 3600})
		if s == 0 && err == nil && code/100 == 4 {
			continue // a relay that does not register agents without a callback
		}
		if err != nil || code != http.StatusOK {
			return Result{}, fmt.Errorf("register sender %s: %d %s %v", senderIDs[s], code, body, err)
		}
		var reg struct {
			Token string `json:"token"`
		}
		if json.Unmarshal(body, &reg) == nil && reg.Token != "" {
			conns[s].setToken(reg.Token)
			tokens[s] = reg.Token
			own++
		}
		made = append(made, agentRef{hubs[s%len(hubs)], senderIDs[s], reg.Token})
	}

	text := strings.Repeat("x", c.Payload)
	hub0, hubOK := hubCPU(ctx, hc, c.Token, hubs)
	load0, loadOK := selfCPU()
	var sent, accepted, errs, limited atomic.Int64
	lat := make([][]time.Duration, c.Senders)
	start := time.Now()
	deadline := start.Add(c.Duration)
	var wg sync.WaitGroup
	done := make(chan struct{})
	if c.Progress != nil {
		go progress(c, start, &sent, &accepted, &rv.received, done)
	}
	for s := 0; s < c.Senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			sender := senderIDs[s]
			conn := conns[s]
			defer conn.close()
			// Open-loop schedule: this sender's i-th message is due at
			// start + (s + i*Senders) / Rate.
			var every time.Duration
			var pause *time.Timer // one per sender, reused: a timer per message would cost the load generator
			if c.Rate > 0 {
				every = time.Duration(float64(c.Senders) / c.Rate * float64(time.Second))
				pause = time.NewTimer(time.Hour)
				defer pause.Stop()
			}
			for i := 0; ; i++ {
				var due time.Time
				if every > 0 {
					due = start.Add(time.Duration(s)*every/time.Duration(c.Senders) + time.Duration(i)*every)
					if !due.Before(deadline) {
						return
					}
					if wait := time.Until(due); wait > 0 {
						pause.Reset(wait)
						select {
						case <-pause.C:
						case <-ctx.Done():
							return
						}
					}
				}
				if (every == 0 && time.Now().After(deadline)) || ctx.Err() != nil {
					return
				}
				if c.Messages > 0 && sent.Add(1) > int64(c.Messages) {
					return
				} else if c.Messages == 0 {
					sent.Add(1)
				}
				id := newID(run, s, i)
				t0 := time.Now()
				rv.mu.Lock()
				rv.sentAt[id] = t0
				rv.mu.Unlock()
				body, _ := json.Marshal(envelope{ATPVersion: "1.0", MessageID: id, Sender: sender,
					Receiver: recvIDs[(s+i)%len(recvIDs)], Type: "bench", Timestamp: float64(t0.UnixMicro()) / 1e6, TTLMillis: c.TTL.Milliseconds(),
					Payload: textPayload{Text: text}})
				code, err := conn.post(ctx, "/atp/send", body)
				d := time.Since(t0)
				if every > 0 {
					d = time.Since(due) // includes any wait behind a late answer
				}
				if err == nil && code == http.StatusTooManyRequests {
					limited.Add(1)
					wait := conn.retryAfter
					if wait <= 0 {
						wait = 100 * time.Millisecond
					}
					if wait = min(wait, time.Until(deadline)); wait > 0 {
						t := time.NewTimer(wait)
						select {
						case <-t.C:
						case <-ctx.Done():
							t.Stop()
							return
						}
					}
					continue
				}
				if err != nil || code != http.StatusOK {
					errs.Add(1)
					continue
				}
				accepted.Add(1)
				lat[s] = append(lat[s], d)
			}
		}(s)
	}
	wg.Wait()
	sendEnd := time.Now()
	if c.Messages > 0 && sent.Load() > int64(c.Messages) {
		sent.Store(int64(c.Messages))
	}
	drainUntil := time.Now().Add(c.Drain)
	for rv.received.Load() < accepted.Load() && time.Now().Before(drainUntil) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	close(done)
	hub1, hubOK1 := hubCPU(ctx, hc, c.Token, hubs)
	load1, _ := selfCPU()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	rv.mu.Lock()
	e2e := append([]time.Duration(nil), rv.e2e...)
	last := rv.last
	rv.mu.Unlock()
	sort.Slice(e2e, func(i, j int) bool { return e2e[i] < e2e[j] })
	res := Result{Senders: c.Senders, SenderCredentials: own, Receivers: c.Receivers, Lanes: agents * c.Receivers, Rate: c.Rate, Receive: c.Receive, IDs: c.IDs, Hubs: hubs, Duration: sendEnd.Sub(start), Sent: sent.Load(), Accepted: accepted.Load(), Errors: errs.Load(), RateLimited: limited.Load(),
		Delivered: rv.received.Load(), Duplicates: rv.dups.Load(),
		SendP50: pct(all, 50), SendP90: pct(all, 90), SendP99: pct(all, 99), SendMax: pct(all, 100),
		E2EP50: pct(e2e, 50), E2EP99: pct(e2e, 99)}
	res.AcceptedPerSec = float64(res.Accepted) / res.Duration.Seconds()
	if n := time.Duration(res.Delivered); n > 0 {
		if hubOK && hubOK1 && hub1 > hub0 {
			res.HubCPU = (hub1 - hub0) / n
		}
		if loadOK && load1 > load0 {
			res.LoadCPU = (load1 - load0) / n
		}
	}
	if res.Delivered > 0 && last.After(start) {
		res.DeliveredPerSec = float64(res.Delivered) / last.Sub(start).Seconds()
	}
	return res, nil
}

func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

func progress(c Config, start time.Time, sent, accepted, delivered *atomic.Int64, done <-chan struct{}) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			el := time.Since(start)
			frac := float64(el) / float64(c.Duration)
			if frac > 1 {
				frac = 1
			}
			n := int(frac * 30)
			bar := strings.Repeat("#", n) + strings.Repeat(".", 30-n)
			c.Progress(fmt.Sprintf("[%s] %3.0f%% sent %d accepted %d delivered %d (%.0f/s)", bar, frac*100,
				sent.Load(), accepted.Load(), delivered.Load(), float64(delivered.Load())/el.Seconds()))
		}
	}
}

// envelope is the ATP message the senders post.
type envelope struct {
	ATPVersion string      `json:"atp_version"`
	MessageID  string      `json:"message_id"`
	Sender     string      `json:"sender"`
	Receiver   string      `json:"receiver"`
	Type       string      `json:"type"`
	Timestamp  float64     `json:"timestamp"`
	TTLMillis  int64       `json:"ttl_ms"`
	Payload    textPayload `json:"payload"`
}

type textPayload struct {
	Text string `json:"text"`
}

// stream reads the receiver's live stream until ctx ends, recording each
// message and handing its id to acks. ready gets nil once the stream is
// open, or the error that kept it from opening.
func stream(ctx context.Context, hc *http.Client, token, hub, agent string, rv *receiver, acks *acker, ready chan<- error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hub+"/atp/stream/"+agent, nil)
	if err != nil {
		ready <- err
		return err
	}
	authorize(req, token)
	resp, err := hc.Do(req)
	if err != nil {
		ready <- err
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("stream answered %d: %s", resp.StatusCode, b)
		ready <- err
		return err
	}
	ready <- nil
	go acks.run(ctx)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		// Each event carries the message id on its "id:" line.
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if rv.seen(id, time.Now(), false) {
				acks.add(id)
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// acker acknowledges stream deliveries in batches: whatever arrived while
// the previous acknowledgement was in flight goes in the next one.
type acker struct {
	post  func(ctx context.Context, hub, path string, body any) (int, []byte, error)
	hub   string
	agent string
	rv    *receiver

	mu   sync.Mutex
	ids  []string
	wake chan struct{}
	once sync.Once
}

func (a *acker) init() { a.once.Do(func() { a.wake = make(chan struct{}, 1) }) }

func (a *acker) add(id string) {
	a.init()
	a.mu.Lock()
	a.ids = append(a.ids, id)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *acker) run(ctx context.Context) {
	a.init()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
		for {
			a.mu.Lock()
			ids := a.ids
			a.ids = nil
			a.mu.Unlock()
			if len(ids) == 0 {
				break
			}
			for len(ids) > 0 {
				n := min(len(ids), 1000)
				code, _, err := a.post(ctx, a.hub, "/atp/ack", map[string]any{"agent_id": a.agent, "message_ids": ids[:n]})
				if err != nil || code != http.StatusOK {
					if ctx.Err() != nil {
						return
					}
					time.Sleep(50 * time.Millisecond) // unacknowledged: try again
					continue
				}
				a.rv.acked(n, time.Now())
				ids = ids[n:]
			}
		}
	}
}

// hubCPU reads the CPU time the hubs have used, summed, from the
// process_cpu_seconds_total line of their /metrics; ok is false when any
// hub does not answer it (another relay, or a token that may not read it).
func hubCPU(ctx context.Context, hc *http.Client, token string, hubs []string) (total time.Duration, ok bool) {
	for _, h := range hubs {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		secs, ok := readCPU(ctx, hc, token, h+"/metrics")
		cancel()
		if !ok {
			return 0, false
		}
		total += time.Duration(secs * float64(time.Second))
	}
	return total, true
}

func readCPU(ctx context.Context, hc *http.Client, token, url string) (float64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	authorize(req, token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); found {
			secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return secs, err == nil && secs >= 0
		}
	}
	return 0, false
}

// authorize sets the bearer token on a request to the hub, if there is one.
func authorize(req *http.Request, token string) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}
