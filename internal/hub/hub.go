// Package hub assembles a Switchboard hub: it opens the store, builds the
// relay with its deliverers, mounts every protocol adapter and the operator
// routes behind authentication, and runs the HTTP server and the scheduler.
package hub

import (
	"cmp"
	"context"
	"crypto/rand"
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
	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/dashboard"
	"github.com/switchboard-hub/switchboard/internal/deliver/a2aremote"
	"github.com/switchboard-hub/switchboard/internal/deliver/webhook"
	"github.com/switchboard-hub/switchboard/internal/metrics"
	"github.com/switchboard-hub/switchboard/internal/opsapi"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
	"github.com/switchboard-hub/switchboard/internal/proto/atp"
	"github.com/switchboard-hub/switchboard/internal/proto/mamp"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
	"github.com/switchboard-hub/switchboard/internal/ratelimit"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/internal/store/postgres"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
	"github.com/switchboard-hub/switchboard/internal/tracing"
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
}

// ErrDevNotLoopback refuses --dev on a non-loopback address.
var ErrDevNotLoopback = errors.New("--dev (auth off) is only allowed on a loopback address")

// New builds a hub.
func New(ctx context.Context, opt Options) (*Hub, error) {
	if opt.Addr == "" {
		opt.Addr = "127.0.0.1:8080"
	}
	if opt.DataDir == "" {
		opt.DataDir = "switchboard-data"
	}
	if opt.MaxBody <= 0 {
		opt.MaxBody = 1 << 20
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
	relay := core.NewRelay(st, clock, opt.Relay, log)
	if err := follow(ctx, st, relay, log); err != nil {
		st.Close()
		return nil, err
	}
	policy := opt.Callbacks
	if opt.Dev {
		policy.AllowLoopback, policy.AllowPrivate = true, true
	}
	client := policy.Client(relay.Config().DeliverTimout)
	key, err := hubKey(ctx, st, clock)
	if err != nil {
		st.Close()
		return nil, err
	}
	signer := &webhook.HMACSigner{Key: key}
	relay.SetDeliverer(core.EndpointATP, webhook.New(client, atp.Encoder{}, signer))
	relay.SetDeliverer(core.EndpointMAMP, webhook.New(client, mamp.Encoder{Host: relay.Config().Host}, signer))
	relay.SetDeliverer(core.EndpointA2A, a2aremote.New(policy.Client(relay.Config().DeliverTimout)))
	client.Transport = tracing.Transport(client.Transport)
	relay.SetDeliverer(a2a.EndpointPush, a2a.PushDeliverer{Client: client})
	// deliverers: each protocol adapter adds its line above this marker.

	h := &Hub{Relay: relay, Store: st, Mux: http.NewServeMux(), opt: opt, log: log, Outbound: client,
		Creds: &auth.Credentials{Store: st, Clock: clock},
		conns: &connCounter{max: connLimit(opt.MaxConns, openFileLimit()), log: log,
			maxPerClient:     orDefault(opt.MaxConnsPerClient, DefaultMaxConnsPerClient),
			maxIdlePerClient: orDefault(opt.MaxIdlePerClient, DefaultMaxIdlePerClient)}}
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
	}
	atp.New(relay, atp.Options{MaxBody: opt.MaxBody, Issuer: issuer, Secrets: signer, CheckURL: policy.CheckURL}).Mount(h.Mux)
	opsapi.New(relay, opt.Version).Mount(h.Mux)
	mamp.New(relay, mamp.Options{MaxBody: opt.MaxBody, Issuer: issuer, Remotes: mamp.RemotesFromEnv(), Context: ctx, Logger: log, CheckURL: policy.CheckURL, Secrets: signer}).Mount(h.Mux)
	a2a.New(relay, a2a.Options{MaxBody: opt.MaxBody, Secured: !opt.Dev, Context: ctx, Logger: log, HTTPClient: client, CheckURL: policy.CheckURL}).Mount(h.Mux)
	a2aReg := a2aremote.NewRegistrar(relay, a2aremote.Options{Logger: log, Client: policy.Client(10 * time.Second)})
	a2aReg.Mount(h.Mux)
	go a2aReg.Run(ctx)
	h.AMP = amp.New(&ampstore.Store{Records: st, Clock: clock})
	ampHandler := ampapi.New(h.AMP, h.log)
	h.Mux.Handle("GET /v4/amp", ampHandler)
	// A tick writes the session's state: with auth on it needs a
	// credential, like every other write.
	h.Mux.Handle("POST /v4/tick", members(ampHandler))
	mcpSrv := mcpadapter.New(relay, mcpadapter.Options{Version: opt.Version, Logger: log, AMP: h.AMP, MaxBody: opt.MaxBody})
	mcpSrv.Mount(h.Mux)
	go mcpSrv.Watch(ctx)
	met := metrics.New(relay, metrics.WithPublic(opt.MetricsPublic))
	go met.Run(ctx)
	h.conns.register(met.Registry())
	registerBudget(met.Registry(), relay.Config().Memory)
	h.Mux.Handle("GET /metrics", met.Handler())
	dash, err := dashboard.New(relay, dashboard.Options{Dev: opt.Dev, AdminToken: h.AdminToken, Routes: h.Mux})
	if err != nil {
		st.Close()
		return nil, err
	}
	dash.Mount(h.Mux)
	go dash.Run(ctx)
	// adapters: each protocol adapter mounts its routes above this marker.
	limit := opt.RateLimit
	if limit == 0 && !opt.Dev {
		limit = 1000
	}
	limiter := ratelimit.New(limit, opt.RateBurst)
	// Security headers outermost, so refusals (401, 429) carry them too.
	h.Handler = secureHeaders(budgeted(relay.Config().Memory, opt.MaxBody, authenticated(authn, limiter, rateLimited(limiter, unrouted(h.Mux)))), opt.TLSCert != "")
	h.Handler = tracing.Middleware(h.Handler)
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

// follow wakes the relay when another hub instance on the same database
// makes work due or ends a message (PostgreSQL LISTEN/NOTIFY).
func follow(ctx context.Context, st core.Store, relay *core.Relay, log *slog.Logger) error {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return nil
	}
	due, err := pg.Notifier().Listen(ctx, pg.DueChannel())
	if err != nil {
		return fmt.Errorf("listen for due work: %w", err)
	}
	receipts, err := pg.Notifier().Listen(ctx, pg.ReceiptChannel())
	if err != nil {
		return fmt.Errorf("listen for receipts: %w", err)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-due:
				if !ok {
					log.Warn("due notifications ended")
					return
				}
				relay.Wake()
			case payload, ok := <-receipts:
				if !ok {
					return
				}
				for _, id := range postgres.ReceiptIDs(payload) {
					relay.NotifyReceipt(id)
				}
			}
		}
	}()
	return nil
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

// Serve runs the scheduler and serves HTTP on ln until ctx ends, then shuts
// down gracefully.
func (h *Hub) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           h.Handler,
		ReadHeaderTimeout: cmp.Or(h.opt.HeaderTimeout, DefaultHeaderTimeout),
		IdleTimeout:       cmp.Or(h.opt.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    64 << 10,
		ConnState:         h.conns.state,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = h.Relay.Run(rctx) }()
	errc := make(chan error, 1)
	ln = h.conns.listener(ln)
	go func() {
		if h.opt.TLSCert != "" {
			errc <- srv.ServeTLS(ln, h.opt.TLSCert, h.opt.TLSKey)
			return
		}
		errc <- srv.Serve(ln)
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close closes the store.
func (h *Hub) Close() error { return h.Store.Close() }
