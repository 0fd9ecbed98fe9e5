// Package hub assembles a Switchboard hub: it opens the store, builds the
// relay with its deliverers, mounts every protocol adapter and the operator
// routes behind authentication, and runs the HTTP server and the scheduler.
package hub

import (
	"context"
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

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/deliver/webhook"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/opsapi"
	"github.com/switchboard-hub/switchboard/internal/proto/atp"
	"github.com/switchboard-hub/switchboard/internal/proto/mamp"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
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
	NoSync  bool
	Relay   core.Config
	Version string
	Logger  *slog.Logger
	// Clock overrides the system clock (tests).
	Clock core.Clock
}

// Hub is an assembled hub.
type Hub struct {
	Relay   *core.Relay
	Store   core.Store
	Handler http.Handler
	Mux     *http.ServeMux
	Creds   *auth.Credentials
	// AdminToken is the operator token in force (empty in dev mode).
	AdminToken string

	opt Options
	log *slog.Logger
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
	client := &http.Client{Timeout: relay.Config().DeliverTimout}
	relay.SetDeliverer(core.EndpointATP, webhook.New(client, atp.Encoder{}, nil))
	relay.SetDeliverer(core.EndpointMAMP, webhook.New(client, mamp.Encoder{Host: relay.Config().Host}, nil))
	// deliverers: each protocol adapter adds its line above this marker.

	h := &Hub{Relay: relay, Store: st, Mux: http.NewServeMux(), opt: opt, log: log,
		Creds: &auth.Credentials{Store: st, Clock: clock}}
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
	atp.New(relay, atp.Options{MaxBody: opt.MaxBody, Issuer: issuer}).Mount(h.Mux)
	opsapi.New(relay, opt.Version).Mount(h.Mux)
	mamp.New(relay, mamp.Options{MaxBody: opt.MaxBody, Issuer: issuer, Remotes: mamp.RemotesFromEnv(), Context: ctx, Logger: log}).Mount(h.Mux)
	// adapters: each protocol adapter mounts its routes above this marker.
	h.Handler = authn.Middleware(h.Mux, func(w http.ResponseWriter, r *http.Request, err error) {
		httperr.From(w, err)
	})
	return h, nil
}

func openStore(ctx context.Context, opt Options) (core.Store, error) {
	switch {
	case opt.StoreURL == "" || strings.HasPrefix(opt.StoreURL, "sqlite:"):
		dir := strings.TrimPrefix(opt.StoreURL, "sqlite:")
		if dir == "" {
			dir = opt.DataDir
		}
		return sqlite.Open(ctx, dir, sqlite.Options{NoSync: opt.NoSync})
	}
	return nil, fmt.Errorf("store %q: unsupported store URL (use sqlite:DIR or postgres://…)", opt.StoreURL)
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
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = h.Relay.Run(rctx) }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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
