package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/cache"
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
	Host           string        // the hub's host in agent:// URIs [localhost]
	DefaultTTL     time.Duration // when a sender gives none [1m]
	MaxTTL         time.Duration // longest TTL accepted [7 days]
	DefaultLease   time.Duration // registration lease [300s]
	MaxLease       time.Duration // [24h]
	ClaimLease     time.Duration // how long a claimed lane is ours [30s]
	MaxInFlight    int           // lanes delivered at once [128]
	PerLane        int           // messages claimed per lane [32]
	BackoffBase    time.Duration // first retry delay [200ms]
	BackoffMax     time.Duration // longest retry delay [30s]
	DeliverTimeout time.Duration // one attempt's timeout [10s]
	Poll           time.Duration // scheduler poll when idle [250ms]
	WaitPoll       time.Duration // first poll of a wait for a receipt or results; later ones twice as far apart, up to 8 times it [250ms]
	Retention      time.Duration // how long terminal receipts are kept [24h]
	MaxQueue       int           // queued messages per receiver, below 0 no limit [100000]
	MaxQueueBytes  int64         // bytes of queued messages per receiver (stores that are QueueSizers), 0 no limit [0]
	Memory         *Budget       // what the hub may hold in memory (budget.go) [nil: no limit]
	MaxAgents      int           // registered agents (alive or not) before a new id is refused [0: no limit]
	Skew           time.Duration // sender clock tolerance for "expired" [2s]
	MaxParts       int           // content parts per message [64]
	MaxStreams     int           // streams one receiver may hold open on one instance (one more ends the oldest), below 0 no limit [16]
	Owner          string        // this instance's claim owner name [random]
	// IDKey keys InternalID; instances sharing a store must share it (the
	// hub derives it from a key kept in the store) [random].
	IDKey []byte
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
	def(&c.DeliverTimeout, 10*time.Second)
	def(&c.Poll, 250*time.Millisecond)
	def(&c.WaitPoll, waitPollFirst)
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
	if len(c.IDKey) == 0 {
		c.IDKey = make([]byte, 32)
		_, _ = rand.Read(c.IDKey)
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
	revoker    CredentialRevoker
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
	// recordHooks are the OnRecordEvent callbacks (recordevents.go).
	recordHooks recordHooks

	// attempts hands delivery outcomes to the sends that wait for them
	// (SendAsAwaitAttempt).
	attempts attemptWatchers
	// claimedAttempts counts the first attempts made outside the
	// scheduler (attemptClaimed); Run waits for them when it stops.
	claimedAttempts sync.WaitGroup
	stopOnce        sync.Once
	stopMu          sync.Mutex
	stopCh          chan struct{} // closed when Run ends (stopClaimed)

	agents  *cache.TTL[string, *Agent]
	members *cache.TTL[memberKey, struct{}]
	// laneFails is each lane's last failed attempt (dead letters' errors).
	laneFails laneFailures

	feedMu sync.Mutex
	feeds  map[string][]*Feed // receiver → its streams' feeds on this instance

	depthMu sync.Mutex
	depths  map[string]cachedCount

	countMu sync.Mutex
	count   cachedCount // agents registered, as last counted (plus this instance's new ones since)

	qbytes queueBytes // receivers' queued bytes (budget.go)

	// identityLocks keep a send to an agent and the end of its identity
	// apart on this instance: a send holds its receiver's lock for reading
	// from reading the receiver to storing the message, a deregistration
	// for writing while it ends the identity, so a message is either
	// ended with the identity or refused for want of a receiver, never
	// left queued for the id's next registration. (Instances sharing a
	// store have the scheduler's generation check, attemptLane.)
	identityLocks [64]sync.RWMutex
}

// identityLock is agent id's stripe of identityLocks.
func (r *Relay) identityLock(id string) *sync.RWMutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	return &r.identityLocks[h.Sum32()%uint32(len(r.identityLocks))]
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

// forget drops the cached record of agent id.
func (r *Relay) forget(id string) { r.agents.Delete(id) }

// forgetIdentity drops what the relay keeps of agent id's identity: its
// cached record and memberships.
func (r *Relay) forgetIdentity(id string) {
	r.agents.Delete(id)
	r.members.DeleteFunc(func(k memberKey, _ struct{}) bool { return k.agent == id })
}

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
		members:    cache.New[memberKey, struct{}](agentCacheTTL, 100000),
		depths:     map[string]cachedCount{},
		feeds:      map[string][]*Feed{},
	}
}

// Config returns the relay's effective configuration.
func (r *Relay) Config() Config { return r.cfg }

// Records returns the store's document store, for the state an adapter
// keeps of its own (A2A tasks and push configs, MAMP callbacks, AMP
// sessions): adapters take it through a narrow interface they define for
// what they use, in place of the whole store.
func (r *Relay) Records() RecordStore { return r.store }

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

// URI returns an agent's agent:// URI on this hub (see AgentURI: a remote
// id name@domain is agent://domain/name).
func (r *Relay) URI(agentID string) string { return AgentURI(r.cfg.Host, agentID) }
