// Package hub assembles a Switchboard hub: it opens the store, builds the
// relay with its deliverers, mounts every protocol adapter and the operator
// routes behind authentication, and runs the HTTP server, the adapters'
// background work and the scheduler.
//
// The hub owns every goroutine it starts. New starts none; Serve starts
// them all in one group and joins them all before it returns, stopping in
// this order:
//
//  1. stop accepting: the listener closes, connections waiting for a
//     request (idle, or opened and never used) are closed, and the
//     requests in flight end (their contexts are cancelled, so streams
//     end; http.Server.Shutdown waits for them, up to ShutdownTimeout);
//  2. drain: the adapters' and the hub's background work stops (Adapter.Run
//     and the other workers return);
//  3. stop the deliverers: the scheduler finishes its deliveries in
//     flight and returns (core.Relay.Run);
//  4. close the store.
package hub

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/amp/ampapi"
	"github.com/switchboard-hub/switchboard/internal/amp/ampstore"
	"github.com/switchboard-hub/switchboard/internal/audit"
	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/dashboard"
	"github.com/switchboard-hub/switchboard/internal/deliver/webhook"
	"github.com/switchboard-hub/switchboard/internal/metrics"
	"github.com/switchboard-hub/switchboard/internal/opsapi"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
	a2aremote "github.com/switchboard-hub/switchboard/internal/proto/a2a/remote"
	"github.com/switchboard-hub/switchboard/internal/proto/atp"
	"github.com/switchboard-hub/switchboard/internal/proto/mamp"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
	"github.com/switchboard-hub/switchboard/internal/ratelimit"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/internal/store/postgres"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
	"github.com/switchboard-hub/switchboard/internal/tracing"
	"golang.org/x/sync/errgroup"
)

// Options configure a hub.
type Options struct {
	// Addr is the listen address [127.0.0.1:8080].
	Addr string
	// DataDir holds the embedded store [./switchboard-data].
	DataDir string
	// StoreURL selects another store (postgres://…); empty for embedded.
	StoreURL string
	// Dev turns auth off; allowed only on a loopback address.
	Dev bool
	// AdminToken is the operator token; when empty one is generated and
	// kept in DataDir/admin.token.
	AdminToken string
	// Host is the hub's name in agent:// URIs [the listen host].
	Host string
	// MaxBody bounds request bodies [1 MiB].
	MaxBody int64
	// NoSync turns off fsync (benchmarks of the non-durable path only).
	NoSync bool
	// Sync is the embedded store's durability: "full" (default) or
	// "normal" (see sqlite.Options.Sync).
	Sync string
	// Recover says what to do with an embedded store found damaged or
	// missing at start: "" refuses to start (the default), "fresh" or
	// "salvage" (see sqlite.Options.Recover).
	Recover string
	// IntegrityCheck is the embedded store's check at start: "quick"
	// (default), "full" or "off" (see sqlite.Options.Check).
	IntegrityCheck string
	Relay          core.Config
	Version        string
	Logger         *slog.Logger
	// Clock overrides the system clock (tests).
	Clock core.Clock
	// RateLimit is requests per second per credential (or per client
	// address for anonymous callers); 0 means 1000 with auth on and no
	// limit in dev mode, negative means no limit. The admin token is not
	// limited.
	RateLimit float64
	// RateBurst is the bucket size [RateLimit].
	RateBurst int
	// TLSCert and TLSKey, when both set, serve HTTPS.
	TLSCert, TLSKey string
	// Callbacks is the SSRF policy for every URL the hub calls; dev mode
	// allows loopback and private addresses.
	Callbacks ssrf.Policy
	// MetricsPublic serves /metrics without the admin token.
	MetricsPublic bool
	// BodyTimeout bounds how long a request body may take to arrive (see
	// bodyDeadline); 0 means DefaultBodyTimeout, negative means no limit.
	BodyTimeout time.Duration
	// MemoryBudget is how much memory the hub may take on above its idle
	// size. A third of it bounds what the hub holds for clients (request
	// bodies while they are handled, the message cache, messages claimed
	// for delivery: core.Budget); the rest is the garbage collector's
	// headroom and memory outside Go's heap (see SetMemoryLimit). 0 means
	// DefaultMemoryBudget(), negative no budget.
	MemoryBudget int64
	// MaxConns bounds the client connections held at once; one over it
	// is closed unanswered. 0 means DefaultMaxConns (less if the
	// process's open-file limit is lower), negative means no bound.
	MaxConns int
	// NoRequestLog turns off the request log (one INFO record per
	// answered request; see docs/logging.md). The audit log stays on.
	NoRequestLog bool
	// MaxConnsPerClient bounds the connections one client address holds;
	// 0 means DefaultMaxConnsPerClient, negative no bound.
	MaxConnsPerClient int
	// MaxIdlePerClient bounds the connections one client address keeps
	// waiting (idle keep-alive, or not yet sending); 0 means
	// DefaultMaxIdlePerClient, negative no bound.
	MaxIdlePerClient int
	// IdleTimeout closes a keep-alive connection idle this long
	// [DefaultIdleTimeout].
	IdleTimeout time.Duration
	// HeaderTimeout bounds how long a request's headers may take to
	// arrive [DefaultHeaderTimeout].
	HeaderTimeout time.Duration
	// A2ATaskPoll is how long an A2A client waiting on a task goes
	// before the hub re-reads the task unwoken (a2a.Options.TaskPoll;
	// 0: its default). Changes made on this instance, or announced by
	// another one, wake the client at once; the poll is the fallback.
	A2ATaskPoll time.Duration
}

// Defaults of Options.BodyTimeout, IdleTimeout and HeaderTimeout.
const (
	DefaultBodyTimeout   = 30 * time.Second
	DefaultIdleTimeout   = 120 * time.Second
	DefaultHeaderTimeout = 10 * time.Second
)

// Hub is an assembled hub.
type Hub struct {
	Relay   *core.Relay
	Store   core.Store
	Handler http.Handler
	Mux     *http.ServeMux
	Creds   *auth.Credentials
	// AdminToken is the operator token in force (empty in dev mode).
	AdminToken string
	// AMP is the motivation engine, its sessions kept in the store.
	AMP *amp.Engine
	// Outbound is the HTTP client for every request the hub makes; it
	// enforces the SSRF policy.
	Outbound *http.Client

	opt   Options
	log   *slog.Logger
	conns *connCounter
	// adapters are the protocol adapters on the contract, mounted by New
	// and run by Serve.
	adapters []Adapter
	// workers are the background jobs of the adapters not yet on the
	// contract and of the hub itself, run by Serve beside the adapters.
	workers   []worker
	closeOnce sync.Once
	closeErr  error
	// stage, when set (tests), is told each shutdown stage as it ends.
	stage func(string)
}

// Adapter is what the hub asks of a protocol adapter (and of the operator
// routes): its name, its routes, and its background work. Adding a
// protocol is a package that implements it and one line in New.
type Adapter interface {
	// Name names the adapter in logs ("atp").
	Name() string
	// Mount adds the adapter's routes to mux; the hub serves them behind
	// authentication (core.PrincipalFrom gives each request's caller).
	Mount(mux *http.ServeMux)
	// Run does the adapter's background work until ctx ends, then returns
	// (nil, or the error that stopped it early, which stops the hub). An
	// adapter without background work returns when ctx ends.
	Run(ctx context.Context) error
}

// Challenger is an optional part of the adapter contract: the
// WWW-Authenticate challenge of the 401 the hub answers, for a request to
// one of the adapter's routes, when it refuses the request's credential
// before the adapter sees it (ok false: not the adapter's route).
type Challenger interface {
	Challenge(r *http.Request) (challenge string, ok bool)
}

// worker is a background job the hub runs until its context ends.
type worker struct {
	name string
	run  func(ctx context.Context)
}

// ShutdownTimeout bounds how long Serve waits for requests in flight when
// it stops.
const ShutdownTimeout = 10 * time.Second

// ErrDevNotLoopback refuses --dev on a non-loopback address.
var ErrDevNotLoopback = errors.New("--dev (auth off) is only allowed on a loopback address")

// New builds a hub.
func New(ctx context.Context, opt Options) (*Hub, error) {
	if opt.Addr == "" {
		opt.Addr = DefaultAddr
	}
	if opt.DataDir == "" {
		opt.DataDir = DefaultDataDir
	}
	if opt.MaxBody <= 0 {
		opt.MaxBody = DefaultMaxBody
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	if opt.Dev && !isLoopback(opt.Addr) {
		return nil, fmt.Errorf("listen address %s: %w", opt.Addr, ErrDevNotLoopback)
	}
	if opt.Relay.Host == "" {
		opt.Relay.Host = opt.Host
	}
	switch {
	case opt.MemoryBudget == 0:
		opt.MemoryBudget = DefaultMemoryBudget()
	case opt.MemoryBudget < 0:
		opt.MemoryBudget = 0
	}
	if opt.Relay.Memory == nil {
		// A third for what the hub holds for clients; the rest is the
		// garbage collector's headroom and memory outside Go's heap
		// (SQLite's page caches), see SetMemoryLimit.
		opt.Relay.Memory = core.NewBudget(opt.MemoryBudget / 3)
	}
	if m := opt.Relay.Memory; m != nil && m.Limit() < 2*(opt.MaxBody*bodyFactor+4096) {
		return nil, fmt.Errorf("a memory budget of %d bytes is too small for --max-body %d: a third of it must hold two requests of the largest body, %d bytes each while handled (raise --memory-budget to at least %d)",
			opt.MemoryBudget, opt.MaxBody, opt.MaxBody*bodyFactor+4096, 6*(opt.MaxBody*bodyFactor+4096))
	}
	if opt.Relay.Host == "" {
		opt.Relay.Host = hostOf(opt.Addr)
	}
	st, err := openStore(ctx, opt)
	if err != nil {
		return nil, err
	}
	clock := opt.Clock
	if clock == nil {
		clock = core.SystemClock{}
	}
	key, err := hubKey(ctx, st, clock)
	if err != nil {
		st.Close()
		return nil, err
	}
	if len(opt.Relay.IDKey) == 0 {
		// Internal ids are keyed alike on every instance of one store.
		opt.Relay.IDKey = deriveKey(key, "internal agent ids")
	}
	relay := core.NewRelay(st, clock, opt.Relay, log)
	policy := opt.Callbacks
	if opt.Dev {
		policy.AllowLoopback, policy.AllowPrivate = true, true
	}
	client := policy.Client(relay.Config().DeliverTimeout)
	signer := &webhook.HMACSigner{Key: key}
	relay.SetDeliverer(core.EndpointATP, webhook.New(client, atp.Encoder{}, signer))
	relay.SetDeliverer(core.EndpointMAMP, webhook.New(client, mamp.Encoder{Host: relay.Config().Host}, signer))
	relay.SetDeliverer(core.EndpointA2A, a2aremote.New(policy.Client(relay.Config().DeliverTimeout)))
	client.Transport = tracing.Transport(client.Transport)
	relay.SetDeliverer(a2a.EndpointPush, webhook.New(client, a2a.PushEncoder{}, a2a.PushSigner{}))
	// deliverers: each protocol adapter adds its line above this marker.

	h := &Hub{Relay: relay, Store: st, Mux: http.NewServeMux(), opt: opt, log: log, Outbound: client,
		Creds: &auth.Credentials{Store: st, Clock: clock},
		conns: &connCounter{max: connLimit(opt.MaxConns, openFileLimit()), log: log,
			maxPerClient:     orDefault(opt.MaxConnsPerClient, DefaultMaxConnsPerClient),
			maxIdlePerClient: orDefault(opt.MaxIdlePerClient, DefaultMaxIdlePerClient)}}
	if pg, ok := st.(*postgres.Store); ok {
		due, receipts, err := listen(ctx, pg)
		if err != nil {
			st.Close()
			return nil, err
		}
		h.workers = append(h.workers, worker{"store notifications", func(ctx context.Context) { follow(ctx, pg, due, receipts, relay, log) }})
	}
	authn := &auth.Authenticator{Dev: opt.Dev, Creds: h.Creds}
	if !opt.Dev {
		tok, err := adminToken(opt)
		if err != nil {
			st.Close()
			return nil, err
		}
		h.AdminToken = tok
		authn.AdminHash = auth.Hash(tok)
	}
	var issuer atp.CredentialIssuer
	if !opt.Dev {
		issuer = h.Creds
		// Every protocol's deregistration ends the identity's
		// credentials, in the core.
		relay.SetRevoker(h.Creds)
	}
	mampSrv := mamp.New(relay, mamp.Options{MaxBody: opt.MaxBody, Issuer: issuer, Records: st, Remotes: mamp.RemotesFromEnv(),
		Logger: log, CheckURL: policy.CheckURL, Secrets: signer})
	a2aSrv := a2a.New(relay, a2a.Options{Records: st, MaxBody: opt.MaxBody, Secured: !opt.Dev, Logger: log, CheckURL: policy.CheckURL,
		TaskPoll: opt.A2ATaskPoll})
	relay.SetDeliverer(a2a.EndpointReply, a2aSrv.ReplyDeliverer())
	// Adapters on the contract: mounted here, run by Serve.
	h.adapters = []Adapter{
		atp.New(relay, atp.Options{MaxBody: opt.MaxBody, Issuer: issuer, Secrets: signer, CheckURL: policy.CheckURL}),
		mampSrv,
		a2aSrv,
		a2aremote.NewRegistrar(relay, a2aremote.Options{Logger: log, Client: policy.Client(10 * time.Second)}),
		opsapi.New(relay, opt.Version),
		opsapi.NewTokens(relay, h.Creds),
	}
	for _, a := range h.adapters {
		a.Mount(h.Mux)
	}
	h.AMP = amp.New(&ampstore.Store{Records: st, Clock: clock})
	ampHandler := ampapi.New(h.AMP, h.log)
	h.Mux.Handle("GET /v4/amp", ampHandler)
	h.Mux.Handle("OPTIONS /v4/amp", ampHandler) // CORS preflight: 204, as the reference
	h.Mux.Handle("OPTIONS /v4/tick", ampHandler)
	// A tick writes the session's state: with auth on it needs a
	// credential, like every other write.
	h.Mux.Handle("POST /v4/tick", members(ampHandler))
	// MCP acts for the operator as an internal id (OperatorID): no caller
	// can register it ahead of the operator, and nobody can guess it.
	mcpSrv := mcpadapter.New(relay, mcpadapter.Options{Version: opt.Version, Logger: log, AMP: h.AMP, MaxBody: opt.MaxBody,
		Records: st})
	mcpSrv.Mount(h.Mux)
	h.adapters = append(h.adapters, mcpSrv)
	met := metrics.New(relay, metrics.WithPublic(opt.MetricsPublic), metrics.WithVersion(opt.Version))
	h.workers = append(h.workers, worker{"metrics", met.Run})
	h.conns.register(met.Registry())
	registerBudget(met.Registry(), relay.Config().Memory)
	h.Mux.Handle("GET /metrics", met.Handler())
	flow, _ := st.(dashboard.FlowStore) // both stores: the charts read the stored flow
	dash, err := dashboard.New(relay, dashboard.Options{Dev: opt.Dev, AdminToken: h.AdminToken, Routes: h.Mux, Flow: flow,
		Conversations: dashboard.Conversations{
			List: func(ctx context.Context, p core.Principal, agent string, limit int) (any, error) {
				return mampSrv.Conversations(ctx, p, agent, limit)
			},
			Get: func(ctx context.Context, p core.Principal, id string, after int64, limit int) (any, error) {
				return mampSrv.Conversation(ctx, p, id, after, limit)
			},
		}})
	if err != nil {
		st.Close()
		return nil, err
	}
	dash.Mount(h.Mux)
	h.workers = append(h.workers, worker{"dashboard samples", dash.Run})
	// adapters: each protocol adapter mounts its routes above this marker.
	limit := opt.RateLimit
	if limit == 0 && !opt.Dev {
		limit = 1000
	}
	limiter := ratelimit.New(limit, opt.RateBurst)
	limiter.Now = clock.Now // buckets refill on the hub's clock (tests control it)
	// Security headers outermost, so refusals (401, 429) carry them too.
	var challenges []Challenger
	for _, a := range h.adapters {
		if c, ok := a.(Challenger); ok {
			challenges = append(challenges, c)
		}
	}
	h.Handler = secureHeaders(budgeted(relay.Config().Memory, opt.MaxBody, authenticated(authn, limiter, challenges, rateLimited(limiter, unrouted(h.Mux)))), opt.TLSCert != "")
	h.Handler = tracing.Middleware(h.Handler)
	rec := audit.New(log)
	h.workers = append(h.workers, worker{"audit of registrations", func(ctx context.Context) { auditRelay(ctx, relay.Events(), rec) }})
	h.Handler = newObserver(h.Mux, log, !opt.NoRequestLog, rec, met.HTTP()).wrap(h.Handler)
	if d := cmp.Or(opt.BodyTimeout, DefaultBodyTimeout); d > 0 {
		h.Handler = bodyDeadline(d, h.Handler)
	}
	return h, nil
}

// hubKey returns the key webhook secrets derive from, kept in the store so
// every instance on one database signs alike; the first start creates it.
func hubKey(ctx context.Context, st core.RecordStore, clock core.Clock) ([]byte, error) {
	for i := 0; i < 3; i++ {
		rec, err := st.GetRecord(ctx, "hub_secret", "webhook-key")
		if err == nil {
			return rec.Data, nil
		}
		if !errors.Is(err, core.ErrNotFound) {
			return nil, fmt.Errorf("hub key: %w", err)
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		_, err = st.PutRecord(ctx, core.Record{Kind: "hub_secret", ID: "webhook-key", Data: key, UpdatedAt: clock.Now()})
		if err == nil {
			return key, nil
		}
		if !errors.Is(err, core.ErrConflict) {
			return nil, fmt.Errorf("hub key: %w", err)
		}
	}
	return nil, errors.New("hub key: could not create or read it")
}

func openStore(ctx context.Context, opt Options) (core.Store, error) {
	switch {
	case opt.StoreURL == "" || strings.HasPrefix(opt.StoreURL, "sqlite:"):
		dir := strings.TrimPrefix(opt.StoreURL, "sqlite:")
		if dir == "" {
			dir = opt.DataDir
		}
		return sqlite.Open(ctx, dir, sqlite.Options{NoSync: opt.NoSync, Sync: opt.Sync,
			Check: opt.IntegrityCheck, Recover: opt.Recover, Logger: opt.Logger,
			Budget: opt.Relay.Memory, CacheBytes: share(opt.MemoryBudget, 16, 32<<20), ReadBytes: share(opt.MemoryBudget, 16, sqlite.DefaultReadBytes)})
	case strings.HasPrefix(opt.StoreURL, "postgres://") || strings.HasPrefix(opt.StoreURL, "postgresql://"):
		if opt.Recover != "" {
			return nil, errors.New("--recover applies to the embedded store only (PostgreSQL has its own recovery)")
		}
		return postgres.Open(ctx, opt.StoreURL, postgres.Options{Logger: opt.Logger, ReadBytes: share(opt.MemoryBudget, 16, postgres.DefaultReadBytes)})
	}
	return nil, fmt.Errorf("store %q: unsupported store URL (use sqlite:DIR or postgres://…)", opt.StoreURL)
}

// orDefault is v, or def when v is 0 (negative: no bound).
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// share is budget/div, at most limit (limit when there is no budget).
func share(budget, div, limit int64) int64 {
	if budget <= 0 {
		return limit
	}
	return min(max(budget/div, 64<<10), limit)
}

// listen subscribes to the notifications another hub instance on the same
// PostgreSQL database sends when it makes work due or ends a message.
func listen(ctx context.Context, pg *postgres.Store) (due, receipts <-chan string, err error) {
	if due, err = pg.Notifier().Listen(ctx, pg.DueChannel()); err != nil {
		return nil, nil, fmt.Errorf("listen for due work: %w", err)
	}
	if receipts, err = pg.Notifier().Listen(ctx, pg.ReceiptChannel()); err != nil {
		return nil, nil, fmt.Errorf("listen for receipts: %w", err)
	}
	return due, receipts, nil
}

// follow wakes the relay on the notifications of listen until ctx ends:
// its scheduler only for due work this instance should claim now (see
// postgres.Store.DueWake), the waits for receipts with the receipts the
// notifications carry, the waits for results with the replies other
// instances accepted, and the followers of records with the writes
// other instances announced (core.RecordEvent). What it cannot read — a
// notification of a newer build, a garbled one, the empty one after the
// listener reconnected — makes every wait here read the store
// (core.Relay.LookNow, at most once per lookGap), and is logged, as are
// notifications of older builds, at most once per formatLogGap.
func follow(ctx context.Context, pg *postgres.Store, due, receipts <-chan string, relay *core.Relay, log *slog.Logger) {
	var look looker
	defer look.stop()
	var newer, older rareLog
	for {
		select {
		case <-ctx.Done():
			return
		case <-look.C():
			look.fired(relay)
		case payload, ok := <-due:
			if !ok {
				log.Warn("due notifications ended")
				return
			}
			switch pg.DueWake(payload) {
			case postgres.WakeAll:
				relay.Wake()
			case postgres.WakeUnknown:
				relay.Wake()
				if n, ok := newer.add(1); ok {
					log.Warn("a hub instance on this database speaks a newer notification format; looking for due work on each",
						"channel", pg.DueChannel(), "unread", n)
				}
			case postgres.WakeStreams:
				relay.WakeStreams()
			}
		case payload, ok := <-receipts:
			if !ok {
				return
			}
			rd := pg.ReadReceipts(payload, relay.Follows)
			for _, n := range rd.Receipts {
				if n.Receipt != nil {
					relay.NotifyEnded(n.Receipt)
				} else {
					relay.NotifyReceipt(n.ID)
				}
			}
			for _, ev := range rd.Records {
				relay.NotifyRecord(ev)
			}
			for _, id := range rd.Results {
				relay.NotifyResult(id)
			}
			if rd.LookNow {
				look.now(relay)
			}
			if n, ok := newer.add(rd.Unknown); ok {
				log.Warn("a hub instance on this database speaks a newer notification format; waits here read the store on each",
					"channel", pg.ReceiptChannel(), "unread", n, "every", lookGap)
			}
			if n, ok := older.add(rd.Legacy); ok {
				log.Info("a hub instance on this database speaks an older notification format; read",
					"channel", pg.ReceiptChannel(), "lines", n)
			}
		}
	}
}

// lookGap is the least time between two looks (core.Relay.LookNow) that
// follow makes: each costs a store read per wait here, as a wait's first
// poll does, and a peer of a newer build may ask for one with each of its
// notifications (every few milliseconds under load).
const lookGap = 250 * time.Millisecond

// looker calls core.Relay.LookNow at once, or, within lookGap of its last
// call, once when lookGap has passed.
type looker struct {
	last    time.Time
	timer   *time.Timer
	pending bool
}

// C is the channel on which a deferred look is due; call fired then.
func (l *looker) C() <-chan time.Time {
	if l.timer == nil {
		return nil
	}
	return l.timer.C
}

func (l *looker) now(relay *core.Relay) {
	if l.pending {
		return
	}
	d := lookGap - time.Since(l.last)
	if l.last.IsZero() || d <= 0 {
		l.look(relay)
		return
	}
	if l.timer == nil {
		l.timer = time.NewTimer(d)
	} else {
		l.timer.Reset(d)
	}
	l.pending = true
}

func (l *looker) fired(relay *core.Relay) {
	l.pending = false
	l.look(relay)
}

func (l *looker) look(relay *core.Relay) {
	l.last = time.Now()
	relay.LookNow()
}

func (l *looker) stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

// formatLogGap is how often at most follow logs that another instance
// speaks another notification format.
const formatLogGap = 10 * time.Minute

// rareLog counts occurrences and says when to log them: the first at
// once, then at most once per formatLogGap, with the count since.
type rareLog struct {
	last time.Time
	n    int
}

// add counts n occurrences (none when n is 0); when it is time to log,
// ok is true and total is the count to log.
func (r *rareLog) add(n int) (total int, ok bool) {
	if n == 0 {
		return 0, false
	}
	r.n += n
	if !r.last.IsZero() && time.Since(r.last) < formatLogGap {
		return 0, false
	}
	r.last = time.Now()
	total, r.n = r.n, 0
	return total, true
}

// deriveKey derives a key for purpose from the hub's key.
func deriveKey(key []byte, purpose string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(purpose))
	return mac.Sum(nil)
}

// adminToken returns the configured admin token or the one kept in the
// data directory, creating it on first start.
func adminToken(opt Options) (string, error) {
	if opt.AdminToken != "" {
		return opt.AdminToken, nil
	}
	if v := os.Getenv("SWITCHBOARD_ADMIN_TOKEN"); v != "" {
		return v, nil
	}
	if err := os.MkdirAll(opt.DataDir, 0o700); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	path := filepath.Join(opt.DataDir, "admin.token")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	tok := "sba_" + strings.TrimPrefix(auth.NewToken(), auth.TokenPrefix)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return tok, nil
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil || h == "" || h == "0.0.0.0" || h == "::" {
		if name, err := os.Hostname(); err == nil {
			return name
		}
		return "localhost"
	}
	return h
}

func isLoopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Serve serves HTTP on ln and runs the adapters' and the hub's background
// work and the scheduler until ctx ends (or the server or an adapter
// fails), then stops in the order of the package doc and returns. The
// store is closed when it returns; Close may still be called.
func (h *Hub) Serve(ctx context.Context, ln net.Listener) error {
	// Requests end when the hub stops (ctx ends or something fails):
	// streams end with them.
	reqCtx, endRequests := context.WithCancel(ctx)
	defer endRequests()
	srv := &http.Server{
		Handler:           h.Handler,
		ReadHeaderTimeout: cmp.Or(h.opt.HeaderTimeout, DefaultHeaderTimeout),
		IdleTimeout:       cmp.Or(h.opt.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		// HTTP/2 without TLS too (prior knowledge, h2c): the A2A gRPC
		// binding is served on this port (HTTP/2 with TLS as ever).
		Protocols: serverProtocols(),
	}
	stage := func(s string) {
		h.log.Debug("hub stopped", "stage", s)
		if h.stage != nil {
			h.stage(s)
		}
	}
	// The scheduler (the deliverers) runs until the very end: stopped
	// last but the store.
	deliverCtx, stopDeliver := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDeliver()
	deliver := make(chan error, 1)
	go func() { deliver <- h.Relay.Run(deliverCtx) }()

	// The HTTP server and the background work share a group: the first
	// to fail stops the others.
	g, gctx := errgroup.WithContext(ctx)
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var work sync.WaitGroup
	for _, a := range h.adapters {
		work.Add(1)
		g.Go(func() error {
			defer work.Done()
			if err := a.Run(workCtx); err != nil && workCtx.Err() == nil {
				return fmt.Errorf("adapter %s: %w", a.Name(), err)
			}
			return nil
		})
	}
	for _, w := range h.workers {
		work.Add(1)
		go func() { defer work.Done(); w.run(workCtx) }()
	}
	h.conns.attach(srv)
	ln = h.conns.listener(ln)
	served := make(chan error, 1)
	go func() {
		var err error
		if h.opt.TLSCert != "" {
			err = srv.ServeTLS(ln, h.opt.TLSCert, h.opt.TLSKey)
		} else {
			err = srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		served <- err
	}()
	var err error
	select {
	case <-gctx.Done():
		err = context.Cause(gctx)
		if ctx.Err() != nil {
			err = nil // the caller's stop, not a failure
		}
	case err = <-served:
		served <- err
	}
	// 1. Stop accepting, end the requests in flight.
	endRequests()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	if serr := srv.Shutdown(sctx); serr != nil {
		h.log.Warn("requests still in flight at shutdown were cut off", "err", serr)
		_ = srv.Close()
	}
	scancel()
	if serr := <-served; err == nil {
		err = serr
	}
	stage("http")
	// 2. Drain: background work ends.
	stopWork()
	if gerr := g.Wait(); err == nil && ctx.Err() == nil {
		err = gerr
	}
	work.Wait()
	stage("workers")
	// 3. Stop the deliverers.
	stopDeliver()
	<-deliver
	stage("deliverers")
	// 4. Close the store.
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	stage("store")
	return err
}

// serverProtocols are the protocols the hub serves: HTTP/1.1, HTTP/2
// over TLS and HTTP/2 without it (h2c with prior knowledge, as gRPC
// clients speak it).
func serverProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// Close closes the store (once; Serve does it when it returns).
func (h *Hub) Close() error {
	h.closeOnce.Do(func() {
		h.closeErr = h.Store.Close()
	})
	return h.closeErr
}
