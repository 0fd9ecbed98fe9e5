package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/cache"
)

// Relay errors, matched with errors.Is. Adapters map them to their wire
// protocol's error answers.
var (
	ErrUnknownReceiver = errors.New("unknown receiver")
	ErrInvalid         = errors.New("invalid")
	ErrContentType     = errors.New("content type not accepted by receiver")
	ErrTooLarge        = errors.New("message too large for receiver")
	ErrForbidden       = errors.New("sender not allowed by receiver")
	// ErrAgentLimit refuses the registration of a new agent id when the
	// hub holds Config.MaxAgents agents.
	ErrAgentLimit = errors.New("agent limit reached")
)

// Clock tells the time; tests inject a fake one.
type Clock interface{ Now() time.Time }

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns the current UTC time.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// Delivery is what one delivery attempt returned.
type Delivery struct {
	// Kind is OutcomeDelivered, OutcomeRejected or OutcomeRetry.
	Kind OutcomeKind
	// Code is the receiver's status code (HTTP status for webhooks), 0 if
	// none came back.
	Code int
	// Reply is the receiver's answer body, kept as the receipt's reply
	// when the message is delivered.
	Reply []byte
	// Err is why an attempt failed (OutcomeRetry) or was refused; it
	// becomes the receipt's last_error.
	Err error
	// Detail is a short note for the receipt's history.
	Detail string
}

// Deliverer hands a message to an agent through one kind of endpoint.
// Deliver must return within ctx's deadline.
type Deliverer interface {
	// Deliver makes one attempt to hand m to a and reports its outcome.
	Deliver(ctx context.Context, a *Agent, m *Message) Delivery
}

// Config tunes the relay. Zero fields take the defaults in brackets.
type Config struct {
	Host          string        // the hub's host in agent:// URIs [localhost]
	DefaultTTL    time.Duration // when a sender gives none [1m]
	MaxTTL        time.Duration // longest TTL accepted [7 days]
	DefaultLease  time.Duration // registration lease [300s]
	MaxLease      time.Duration // [24h]
	ClaimLease    time.Duration // how long a claimed lane is ours [30s]
	MaxInFlight   int           // lanes delivered at once [128]
	PerLane       int           // messages claimed per lane [32]
	BackoffBase   time.Duration // first retry delay [200ms]
	BackoffMax    time.Duration // longest retry delay [30s]
	DeliverTimout time.Duration // one attempt's timeout [10s]
	Poll          time.Duration // scheduler poll when idle [250ms]
	Retention     time.Duration // how long terminal receipts are kept [24h]
	MaxQueue      int           // queued messages per receiver, below 0 no limit [100000]
	MaxQueueBytes int64         // bytes of queued messages per receiver (stores that are QueueSizers), 0 no limit [0]
	Memory        *Budget       // what the hub may hold in memory (budget.go) [nil: no limit]
	MaxAgents     int           // registered agents (alive or not) before a new id is refused [0: no limit]
	Skew          time.Duration // sender clock tolerance for "expired" [2s]
	MaxParts      int           // content parts per message [64]
	MaxStreams    int           // streams one receiver may hold open on one instance (one more ends the oldest), below 0 no limit [16]
	Owner         string        // this instance's claim owner name [random]
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Host == "" {
		c.Host = "localhost"
	}
	def(&c.DefaultTTL, time.Minute)
	def(&c.MaxTTL, 7*24*time.Hour)
	def(&c.DefaultLease, 300*time.Second)
	def(&c.MaxLease, 24*time.Hour)
	def(&c.ClaimLease, 30*time.Second)
	def(&c.BackoffBase, 200*time.Millisecond)
	def(&c.BackoffMax, 30*time.Second)
	def(&c.DeliverTimout, 10*time.Second)
	def(&c.Poll, 250*time.Millisecond)
	def(&c.Retention, 24*time.Hour)
	def(&c.Skew, 2*time.Second)
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 128
	}
	if c.MaxParts <= 0 {
		c.MaxParts = 64
	}
	if c.PerLane <= 0 {
		c.PerLane = 32
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = 100000
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = 16
	}
	if c.Owner == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.Owner = "hub-" + hex.EncodeToString(b[:])
	}
}

// Relay accepts, routes and delivers messages.
type Relay struct {
	cfg        Config
	store      Store
	clock      Clock
	log        *slog.Logger
	deliverers map[EndpointKind]Deliverer
	events     *Bus

	wakeCh chan struct{}
	// starved is set while the scheduler waits for a delivery slot: the
	// delivery that frees one wakes it.
	starved atomic.Bool
	dueMu   sync.Mutex
	// due holds, per receiver, the channel its streams wait on in Due:
	// closed (and dropped) when the receiver gets work, and all of them at
	// every Wake.
	due map[string]chan struct{}

	mu      sync.Mutex
	waiters map[string][]chan struct{}
	hooks   map[string][]*messageHook // message id → OnMessageEvent callbacks

	agents *cache.TTL[string, *Agent]

	feedMu sync.Mutex
	feeds  map[string][]*Feed // receiver → its streams' feeds on this instance

	depthMu sync.Mutex
	depths  map[string]cachedCount

	countMu sync.Mutex
	count   cachedCount // agents registered, as last counted (plus this instance's new ones since)

	qbytes queueBytes // receivers' queued bytes (budget.go)
}

// cachedCount is a count read from the store at a time (a receiver's
// queue depth, the number of agents), kept to spare reading it each time.
type cachedCount struct {
	n  int
	at time.Time
}

// queueLimit is the maxQueue to enforce exactly in the store for a send to
// receiver. Counting a receiver's queue costs a read per send, so while a
// recently counted depth (within the last 100ms, plus this instance's sends
// since) is far below the limit (more than 1024 under 90% of it) the exact
// check is skipped; near the limit every send checks.
func (r *Relay) queueLimit(ctx context.Context, receiver string) int {
	max := r.cfg.MaxQueue
	if max <= 0 {
		return 0
	}
	now := time.Now()
	r.depthMu.Lock()
	c, ok := r.depths[receiver]
	r.depthMu.Unlock()
	if !ok || now.Sub(c.at) > 100*time.Millisecond {
		n, err := r.store.QueueDepth(ctx, receiver)
		if err != nil {
			return max
		}
		c = cachedCount{n: n, at: now}
		r.depthMu.Lock()
		if len(r.depths) > 100000 {
			clear(r.depths)
		}
		r.depths[receiver] = c
		r.depthMu.Unlock()
	}
	if (c.n+1024)*10 < max*9 { // far from the limit, even with many concurrent sends
		return 0
	}
	return max
}

// queued counts a send into the cached depth of its receiver, so that the
// estimate rises between counts.
func (r *Relay) queued(receiver string) {
	r.depthMu.Lock()
	if c, ok := r.depths[receiver]; ok {
		c.n++
		r.depths[receiver] = c
	}
	r.depthMu.Unlock()
}

// agentCacheTTL bounds how stale a cached agent may be. Registration
// changes made on this instance invalidate at once; other instances' are
// seen within this time.
const agentCacheTTL = time.Second

// Agent returns a registered agent, from a short-lived cache. Callers must
// not modify the result.
func (r *Relay) Agent(ctx context.Context, id string) (*Agent, error) {
	return r.agents.Get(id, func() (*Agent, error) { return r.store.GetAgent(ctx, id) })
}

func (r *Relay) forget(id string) { r.agents.Delete(id) }

// NewRelay makes a relay over store. Register deliverers with
// SetDeliverer before Run.
func NewRelay(store Store, clock Clock, cfg Config, log *slog.Logger) *Relay {
	cfg.defaults()
	if clock == nil {
		clock = SystemClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &Relay{
		cfg:        cfg,
		store:      store,
		clock:      clock,
		log:        log,
		deliverers: map[EndpointKind]Deliverer{},
		events:     NewBus(),
		wakeCh:     make(chan struct{}, 1),
		due:        map[string]chan struct{}{},
		waiters:    map[string][]chan struct{}{},
		hooks:      map[string][]*messageHook{},
		agents:     cache.New[string, *Agent](agentCacheTTL, 100000),
		depths:     map[string]cachedCount{},
		feeds:      map[string][]*Feed{},
	}
}

// Config returns the relay's effective configuration.
func (r *Relay) Config() Config { return r.cfg }

// Store returns the relay's store.
func (r *Relay) Store() Store { return r.store }

// Clock returns the relay's clock.
func (r *Relay) Clock() Clock { return r.clock }

// Events returns the relay's event bus.
func (r *Relay) Events() *Bus { return r.events }

// SetDeliverer sets the deliverer for an endpoint kind.
func (r *Relay) SetDeliverer(k EndpointKind, d Deliverer) { r.deliverers[k] = d }

// Deliverable reports whether an endpoint kind has a push deliverer.
func (r *Relay) Deliverable(k EndpointKind) bool {
	_, ok := r.deliverers[k]
	return ok
}

// NewID returns a new message id: 32 hex digits of a UUIDv7 (RFC 9562),
// the Unix time in milliseconds followed by 74 random bits. Ids that grow
// with time go in at the end of the stores' message-id index, so a commit
// of many new messages writes a page or two of it instead of a page each
// (BENCHMARKS.md).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return hex.EncodeToString(b[:])
}

// ValidAgentID reports whether id can name an agent: 1 to 128 characters
// of letters, digits and ._:@-, starting with a letter or digit.
func ValidAgentID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != ':' && c != '@' && c != '-')) {
			return false
		}
	}
	return true
}

// URI returns an agent's agent:// URI on this hub.
func (r *Relay) URI(agentID string) string { return "agent://" + r.cfg.Host + "/" + agentID }

// Register creates or refreshes an agent and flushes its queue. It returns
// how many messages are queued for it and whether it is new.
func (r *Relay) Register(ctx context.Context, a *Agent, lease time.Duration) (queued int, created bool, err error) {
	if !ValidAgentID(a.ID) {
		return 0, false, fmt.Errorf("agent id %q: %w", a.ID, ErrInvalid)
	}
	lease, err = r.lease(lease)
	if err != nil {
		return 0, false, err
	}
	if a.Endpoint.Kind == "" {
		a.Endpoint.Kind = EndpointPull
	}
	if a.Endpoint.Pushable() && !r.Deliverable(a.Endpoint.Kind) {
		return 0, false, fmt.Errorf("endpoint kind %q: %w", a.Endpoint.Kind, ErrInvalid)
	}
	if err := r.checkAgentLimit(ctx, a.ID); err != nil {
		return 0, false, err
	}
	now := r.clock.Now()
	a.LeaseSeconds = int(lease / time.Second)
	a.ExpiresAt = now.Add(lease)
	a.LastSeen = now
	a.RegisteredAt = now
	if created, err = r.store.UpsertAgent(ctx, a); err != nil {
		return 0, false, err
	}
	if created {
		r.countMu.Lock()
		r.count.n++
		r.countMu.Unlock()
	}
	r.forget(a.ID)
	if queued, err = r.store.Wake(ctx, a.ID, now); err != nil {
		return 0, created, err
	}
	r.wakeScheduler()
	r.wakeStream(a.ID)
	r.events.Publish(Event{Type: EventRegistered, At: now, Agent: a.ID, Queued: queued})
	return queued, created, nil
}

// checkAgentLimit refuses to register agent id, if it is new, when the hub
// holds Config.MaxAgents agents. Counting the agents reads them all, so
// while a count (plus this instance's registrations since) is under 90% of
// the limit no exact check is made; the count is renewed every 10 s, or
// every second past half the limit. Nearer the limit every registration
// of a new id counts exactly; registrations on several instances at once
// can still pass the limit by their number.
func (r *Relay) checkAgentLimit(ctx context.Context, id string) error {
	max := r.cfg.MaxAgents
	if max <= 0 {
		return nil
	}
	now := time.Now()
	r.countMu.Lock()
	c := r.count
	r.countMu.Unlock()
	renew := 10 * time.Second
	if c.n*2 >= max {
		renew = time.Second
	}
	count := func() error {
		n, err := r.store.CountAgents(ctx)
		if err != nil {
			return fmt.Errorf("count agents: %w", err)
		}
		c = cachedCount{n: n, at: now}
		r.countMu.Lock()
		r.count = c
		r.countMu.Unlock()
		return nil
	}
	if c.at.IsZero() || now.Sub(c.at) > renew {
		if err := count(); err != nil {
			return err
		}
	}
	if c.n*10 < max*9 {
		return nil
	}
	switch _, err := r.store.GetAgent(ctx, id); {
	case err == nil:
		return nil // not new
	case !errors.Is(err, ErrNotFound):
		return err
	}
	if err := count(); err != nil {
		return err
	}
	if c.n >= max {
		return fmt.Errorf("the hub holds %d agents (--max-agents %d): %w", c.n, max, ErrAgentLimit)
	}
	return nil
}

func (r *Relay) lease(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return r.cfg.DefaultLease, nil
	case d < time.Second || d > r.cfg.MaxLease:
		return 0, fmt.Errorf("lease %v outside 1s..%v: %w", d, r.cfg.MaxLease, ErrInvalid)
	}
	return d, nil
}

// Heartbeat renews an agent's lease and flushes its queue.
func (r *Relay) Heartbeat(ctx context.Context, id string, lease time.Duration) (*Agent, int, error) {
	a, err := r.store.GetAgent(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if lease == 0 {
		lease = time.Duration(a.LeaseSeconds) * time.Second
	}
	if lease, err = r.lease(lease); err != nil {
		return nil, 0, err
	}
	now := r.clock.Now()
	if err := r.store.RenewLease(ctx, id, now.Add(lease), now); err != nil {
		return nil, 0, err
	}
	r.forget(id)
	queued, err := r.store.Wake(ctx, id, now)
	if err != nil {
		return nil, 0, err
	}
	r.wakeScheduler()
	r.wakeStream(id)
	a.ExpiresAt, a.LastSeen, a.LeaseSeconds = now.Add(lease), now, int(lease/time.Second)
	return a, queued, nil
}

// Deregister removes an agent. Its queued messages stay until they are
// delivered to a new registration or time out.
func (r *Relay) Deregister(ctx context.Context, id string) error {
	if err := r.store.DeleteAgent(ctx, id); err != nil {
		return err
	}
	r.forget(id)
	r.events.Publish(Event{Type: EventDeregistered, At: r.clock.Now(), Agent: id})
	return nil
}

// SendResult is the answer to Send.
type SendResult struct {
	Receipt   Receipt
	Duplicate bool
}

// Send accepts a message: when it returns without error the message is
// durable and will end in exactly one terminal status. m.ID, Sender and
// Receiver must be set; ReceivedAt and ExpiresAt are set here from the hub's
// clock. A message whose id was accepted before is a retry when it comes
// from the same sender to the same receiver with the same content
// (SameContent): it gets the first outcome with Duplicate set and is not
// routed again; otherwise the error is ErrIDConflict.
func (r *Relay) Send(ctx context.Context, m *Message) (SendResult, error) {
	if m.ID == "" || len(m.ID) > 200 {
		return SendResult{}, fmt.Errorf("message_id must be 1..200 characters: %w", ErrInvalid)
	}
	if m.Sender == "" || m.Receiver == "" {
		return SendResult{}, fmt.Errorf("sender and receiver are required: %w", ErrInvalid)
	}
	if m.TTL == 0 {
		m.TTL = r.cfg.DefaultTTL
	}
	if m.TTL < time.Millisecond || m.TTL > r.cfg.MaxTTL {
		return SendResult{}, fmt.Errorf("ttl %v outside 1ms..%v: %w", m.TTL, r.cfg.MaxTTL, ErrInvalid)
	}
	if m.Type == "" {
		m.Type = "message"
	}
	if len(m.Parts) > r.cfg.MaxParts {
		return SendResult{}, fmt.Errorf("%d content parts, at most %d: %w", len(m.Parts), r.cfg.MaxParts, ErrTooLarge)
	}
	recv, err := r.Agent(ctx, m.Receiver)
	if errors.Is(err, ErrNotFound) {
		// A repeated id whose first send was accepted still answers with
		// the first outcome, even if the receiver has since gone.
		if rc, err2 := r.store.GetReceipt(ctx, m.ID); err2 == nil && rc.Sender == m.Sender && rc.Receiver == m.Receiver {
			if err := r.sameContent(ctx, m); err != nil {
				return SendResult{}, err
			}
			return SendResult{Receipt: *rc, Duplicate: true}, nil
		}
		return SendResult{}, fmt.Errorf("receiver %q: %w", m.Receiver, ErrUnknownReceiver)
	}
	if err != nil {
		return SendResult{}, err
	}
	if err := CheckCard(recv, m); err != nil {
		return SendResult{}, err
	}
	if m.TraceParent == "" {
		m.TraceParent = TraceParentFrom(ctx)
	}
	now := r.clock.Now()
	m.ReceivedAt = now
	m.ExpiresAt = now.Add(m.TTL)
	rc := Receipt{MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Status: StatusQueued,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: m.ExpiresAt}
	if !m.SentAt.IsZero() && m.SentAt.Add(m.TTL+r.cfg.Skew).Before(now) {
		rc.Status = StatusExpired
		rc.History = []ReceiptEvent{{At: now, Status: StatusExpired, Detail: "past its ttl on arrival"}}
	} else {
		rc.History = []ReceiptEvent{{At: now, Status: StatusQueued, Detail: "accepted"}}
	}
	res, feed, err := r.accept(ctx, m, &rc, now)
	if err != nil {
		return SendResult{}, err
	}
	if res.Duplicate {
		if err := r.sameContent(ctx, m); err != nil {
			return SendResult{}, err
		}
		return SendResult{Receipt: res.Receipt, Duplicate: true}, nil
	}
	r.events.Publish(Event{Type: EventAccepted, At: now, MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver,
		Status: rc.Status, Protocol: m.Protocol, ConversationID: m.ConversationID, CorrelationID: m.CorrelationID, MessageType: m.Type})
	if rc.Status == StatusQueued {
		r.queued(m.Receiver)
		r.queuedBytes(m)
		switch {
		case feed != nil:
			// Stored pulled for a stream here: it is the stream's until
			// its lease runs out.
			cp := *m // the stream reads it after Send returns
			if !feed.put(&cp) {
				r.log.Debug("stream ended during a hand-off; the message is pulled again when its lease runs out",
					"message_id", m.ID, "receiver", m.Receiver)
			}
		case recv.Endpoint.Pushable() && recv.Alive(now):
			r.wakeScheduler()
			r.wakeStream(m.Receiver)
		default:
			// Only a pull or a stream can take it now. The scheduler would
			// claim the lane just to park it (a write per message when the
			// lane keeps emptying), so it is left to the next poll; a
			// registration that makes the receiver pushable wakes it.
			r.wakeStream(m.Receiver)
		}
	} else {
		r.notify(m.ID)
	}
	if m.CorrelationID != "" {
		r.notify(resultKeyPrefix + m.CorrelationID)
	}
	return SendResult{Receipt: res.Receipt}, nil
}

// accept stores m. When the receiver has a stream on this instance with
// room and the store can hand the message out in the same write, it is
// stored pulled for that stream, whose feed is returned.
func (r *Relay) accept(ctx context.Context, m *Message, rc *Receipt, now time.Time) (AcceptResult, *Feed, error) {
	if rc.Status == StatusQueued {
		if err := r.checkQueueBytes(ctx, m); err != nil {
			return AcceptResult{}, nil, err
		}
	}
	limit := r.queueLimit(ctx, m.Receiver)
	if ap, ok := r.store.(AcceptPuller); ok && rc.Status == StatusQueued {
		if f := r.feedFor(m.Receiver); f != nil {
			res, pulled, err := ap.AcceptPulled(ctx, m, rc, limit, now, now.Add(f.visibility))
			if !pulled {
				f = nil
			}
			return res, f, err
		}
	}
	res, err := r.store.Accept(ctx, m, rc, limit)
	return res, nil, err
}

// sameContent checks that m, whose id was already accepted from the same
// sender for the same receiver, repeats that message: a retry answers the
// first outcome, but an id reused for other content is ErrIDConflict,
// since answering "duplicate" would let the sender believe a message the
// hub never took was sent. Content is the type, the correlation id and the
// parts, compared as JSON values (key order and number spelling do not
// matter); conversation ids, metadata, TTL and timestamps may differ
// between attempts. A first message purged since counts as the same.
func (r *Relay) sameContent(ctx context.Context, m *Message) error {
	first, err := r.store.GetMessage(ctx, m.ID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read message %q: %w", m.ID, err)
	}
	if !SameContent(first, m) {
		return fmt.Errorf("message %q was sent before with other content (a retry must repeat the message): %w", m.ID, ErrIDConflict)
	}
	return nil
}

// Receipt returns a message's receipt.
func (r *Relay) Receipt(ctx context.Context, id string) (*Receipt, error) {
	return r.store.GetReceipt(ctx, id)
}

// WaitReceipt waits until message id has a terminal receipt or ctx ends.
func (r *Relay) WaitReceipt(ctx context.Context, id string) (*Receipt, error) {
	return waitFor(ctx, r, id, func() (*Receipt, bool, error) {
		rc, err := r.store.GetReceipt(ctx, id)
		if err != nil {
			return nil, false, err
		}
		return rc, rc.Status.Terminal(), nil
	})
}

// WaitResult waits until a message correlated to id arrives or ctx ends.
func (r *Relay) WaitResult(ctx context.Context, id string) (*Message, error) {
	return waitFor(ctx, r, resultKeyPrefix+id, func() (*Message, bool, error) {
		ms, err := r.store.Results(ctx, id, 1)
		if err != nil || len(ms) == 0 {
			return nil, false, err
		}
		return ms[0], true, nil
	})
}

// Polls of a wait (waitFor): the first after waitPollFirst, then twice
// as far apart each time up to waitPollMax.
const (
	waitPollFirst = 250 * time.Millisecond
	waitPollMax   = 2 * time.Second
)

// waitFor polls check whenever key is notified, and also now and then —
// 250 ms after it starts, then twice as long each time up to every 2 s —
// so that changes made by other hub instances are seen too (receipts that
// end there are notified here on stores that share them; results are
// not). A wait that polled every 250 ms cost a store read four times a
// second for as long as it lasted, and waits can be many and long.
func waitFor[T any](ctx context.Context, r *Relay, key string, check func() (T, bool, error)) (T, error) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.waiters[key] = append(r.waiters[key], ch)
	r.mu.Unlock()
	defer r.unwait(key, ch)
	poll := NewPoll(waitPollFirst, waitPollMax)
	defer poll.Stop()
	for {
		v, ok, err := check()
		if err != nil || ok {
			return v, err
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-ch:
		case <-poll.C():
			poll.Fired()
		}
	}
}

func (r *Relay) unwait(key string, ch chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.waiters[key]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(r.waiters, key)
	} else {
		r.waiters[key] = ws
	}
}

func (r *Relay) notify(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.waiters[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	id := strings.TrimPrefix(key, resultKeyPrefix)
	for _, h := range r.hooks[id] {
		h.fn(id)
	}
}

// resultKeyPrefix marks the waiters' key for results correlated to a
// message, as opposed to its receipt.
const resultKeyPrefix = "result:"

type messageHook struct{ fn func(id string) }

// OnMessageEvent calls fn with id whenever something may have changed for
// message id as this instance sees it: its receipt moved, or a result
// correlated to it arrived (for changes made by other instances, only
// receipts are notified, and only on stores that share them, see
// NotifyReceipt). It serves callers that follow many messages at once
// with one goroutine where WaitReceipt and WaitResult need one per
// message. fn runs with the relay's lock held: it must return at once and
// must not call the relay. Calling stop ends the calls.
func (r *Relay) OnMessageEvent(id string, fn func(id string)) (stop func()) {
	h := &messageHook{fn: fn}
	r.mu.Lock()
	r.hooks[id] = append(r.hooks[id], h)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		hs := slices.DeleteFunc(r.hooks[id], func(x *messageHook) bool { return x == h })
		if len(hs) == 0 {
			delete(r.hooks, id)
		} else {
			r.hooks[id] = hs
		}
	}
}

// Wake asks the scheduler (and every stream waiting in Due) to look for
// due work now. Stores that share state between hub instances call it when
// another instance made work due.
func (r *Relay) Wake() {
	r.wakeScheduler()
	r.wakeStreams()
}

// wakeScheduler makes the scheduler look for due lanes now.
func (r *Relay) wakeScheduler() {
	select {
	case r.wakeCh <- struct{}{}:
	default:
	}
}

// maxDue bounds the receivers with a Due channel kept; past it they are
// all woken (a stream woken for nothing pulls once more).
const maxDue = 100000

// wakeStreams wakes every stream waiting in Due.
func (r *Relay) wakeStreams() {
	r.dueMu.Lock()
	defer r.dueMu.Unlock()
	r.wakeAllLocked()
}

func (r *Relay) wakeAllLocked() {
	for _, ch := range r.due {
		close(ch)
	}
	clear(r.due)
}

// wakeStream wakes the streams of one receiver.
func (r *Relay) wakeStream(receiver string) {
	r.dueMu.Lock()
	defer r.dueMu.Unlock()
	if ch, ok := r.due[receiver]; ok {
		close(ch)
		delete(r.due, receiver)
	}
}

// Due returns a channel that is closed when receiver may have new work (a
// message sent to it, its registration, a replay) or at the next Wake: a
// stream that found its queue empty waits on it. Call it before the pull
// whose emptiness it will wait on, so that no wake-up is missed.
func (r *Relay) Due(receiver string) <-chan struct{} {
	r.dueMu.Lock()
	defer r.dueMu.Unlock()
	ch, ok := r.due[receiver]
	if !ok {
		if len(r.due) >= maxDue {
			r.wakeAllLocked()
		}
		ch = make(chan struct{})
		r.due[receiver] = ch
	}
	return ch
}

// NotifyReceipt wakes whoever waits for message id's receipt; stores shared
// between instances call it when another instance ended a message.
func (r *Relay) NotifyReceipt(id string) { r.notify(id) }

// Pull hands an agent up to limit of its queued messages. With autoAck they
// count as delivered at once (at-most-once, the tutorial's pending call);
// otherwise they stay queued, invisible to other pulls for visibility, until
// Ack.
func (r *Relay) Pull(ctx context.Context, agentID string, limit int, visibility time.Duration, autoAck bool) ([]*Message, error) {
	if _, err := r.Agent(ctx, agentID); err != nil {
		return nil, err
	}
	if visibility <= 0 {
		visibility = 30 * time.Second
	}
	now := r.clock.Now()
	ms, err := r.store.Pull(ctx, agentID, now, now.Add(visibility), limit, autoAck)
	if err != nil {
		return nil, err
	}
	if autoAck {
		for _, m := range ms {
			r.delivered(m, now, "pulled")
		}
	}
	return ms, nil
}

// Ack acknowledges pulled messages.
func (r *Relay) Ack(ctx context.Context, agentID string, ids []string) (int, error) {
	now := r.clock.Now()
	n, err := r.store.Ack(ctx, agentID, ids, now)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		r.notify(id)
	}
	return n, nil
}

func (r *Relay) delivered(m *Message, at time.Time, detail string) {
	r.events.Publish(Event{Type: EventDelivered, At: at, MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver,
		Status: StatusDelivered, Protocol: m.Protocol, ConversationID: m.ConversationID, Detail: detail, Attempts: m.Attempts})
	r.notify(m.ID)
}

// Replay re-queues a dead letter with a fresh TTL (its original TTL when
// ttl is 0).
func (r *Relay) Replay(ctx context.Context, id string, ttl time.Duration) (*Receipt, error) {
	m, err := r.store.GetMessage(ctx, id)
	if err != nil {
		return nil, err
	}
	if ttl == 0 {
		ttl = m.TTL
	}
	if ttl <= 0 || ttl > r.cfg.MaxTTL {
		return nil, fmt.Errorf("ttl %v: %w", ttl, ErrInvalid)
	}
	now := r.clock.Now()
	rc, err := r.store.Replay(ctx, id, now, now.Add(ttl))
	if err != nil {
		return nil, err
	}
	r.wakeScheduler()
	r.wakeStream(rc.Receiver)
	r.events.Publish(Event{Type: EventReplayed, At: now, MessageID: id, Sender: rc.Sender, Receiver: rc.Receiver, Status: StatusQueued})
	return rc, nil
}

// Backoff is the delay before retry number attempt (1-based): exponential
// from BackoffBase, capped at BackoffMax, with jitter in [d/2, d].
func (r *Relay) Backoff(attempt int) time.Duration {
	d := r.cfg.BackoffBase
	for i := 1; i < attempt && d < r.cfg.BackoffMax; i++ {
		d *= 2
	}
	if d > r.cfg.BackoffMax {
		d = r.cfg.BackoffMax
	}
	half := d / 2
	return half + time.Duration(mrand.Int64N(int64(half)+1))
}
