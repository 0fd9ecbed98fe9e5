package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/tracing"
)

func init() { register("serve", "run the hub", runServe) }

func runServe(ctx context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(s.err)
	var o hub.Options
	fs.StringVar(&o.Addr, "addr", envOr("SWITCHBOARD_ADDR", "127.0.0.1:8080"), "listen address (env SWITCHBOARD_ADDR)")
	fs.StringVar(&o.DataDir, "data", envOr("SWITCHBOARD_DATA", "./switchboard-data"), "data directory of the embedded store (env SWITCHBOARD_DATA)")
	fs.StringVar(&o.StoreURL, "store", os.Getenv("SWITCHBOARD_STORE"), "store URL: empty for the embedded store, or postgres://… (env SWITCHBOARD_STORE)")
	fs.BoolVar(&o.Dev, "dev", false, "development mode: auth off (only on a loopback address)")
	fs.StringVar(&o.AdminToken, "admin-token", "", "operator token (env SWITCHBOARD_ADMIN_TOKEN; default: generated into DATA/admin.token)")
	fs.StringVar(&o.Host, "host", "", "the hub's host name in agent:// URIs (default: the listen host)")
	fs.Int64Var(&o.MaxBody, "max-body", 1<<20, "largest request body in bytes")
	fs.DurationVar(&o.BodyTimeout, "body-timeout", hub.DefaultBodyTimeout, "how long a request body may take to arrive before the request is answered 408 and its connection closed (0: no limit)")
	fs.DurationVar(&o.Relay.DefaultTTL, "default-ttl", time.Minute, "TTL of messages that give none")
	fs.DurationVar(&o.Relay.Retention, "retention", 24*time.Hour, "how long receipts of finished messages, and finished A2A tasks (at least 2h), are kept")
	fs.DurationVar(&o.Relay.DeliverTimeout, "deliver-timeout", 10*time.Second, "how long one delivery attempt may take before it counts as failed and is retried")
	fs.IntVar(&o.Relay.MaxQueue, "max-queue", 100000, "queued messages per receiver before sends are refused with 429 (-1: no limit)")
	fs.IntVar(&o.Relay.MaxAgents, "max-agents", 0, "registered agents (alive or not, the hub's own push and callback agents included) before registering a new agent id is refused with 507 agent_limit (0: no limit)")
	fs.IntVar(&o.MaxConns, "max-conns", 0, "client connections held at once; one more is closed unanswered (0: 10000, or the open-file limit less 512 if lower; -1: no bound)")
	fs.IntVar(&o.Relay.MaxStreams, "max-streams", 16, "event streams (GET /atp/stream, and MAMP conversation streams) one agent may hold open on this hub; opening one more ends the oldest (-1: no limit)")
	fs.DurationVar(&o.Relay.ClaimLease, "claim-lease", 30*time.Second, "how long an instance owns the delivery lanes it claimed (renewed as it delivers; at least 10/9 of --deliver-timeout); another instance takes over a crashed one's lanes after it")
	fs.StringVar(&o.Sync, "sync", "full", "embedded store durability: full (fsync every commit: survives power loss) or normal (survives kill -9 of the hub, not a machine crash; faster)")
	fs.BoolVar(&o.NoSync, "no-sync", false, "do not fsync the embedded store (benchmarks only: a crash can lose accepted messages)")
	fs.BoolVar(&o.Callbacks.AllowLoopback, "allow-loopback-callbacks", false, "let the hub call loopback addresses (on by default with --dev)")
	fs.BoolVar(&o.Callbacks.AllowPrivate, "allow-private-callbacks", false, "let the hub call private-range addresses (on by default with --dev)")
	fs.BoolVar(&o.MetricsPublic, "metrics-public", false, "serve /metrics without the admin token (for a scraper on a trusted network)")
	fs.Float64Var(&o.RateLimit, "rate-limit", 0, "requests per second per agent credential or anonymous address (0: 1000 with auth on, none with --dev; -1: none)")
	fs.IntVar(&o.RateBurst, "rate-burst", 0, "rate limit burst (default: the rate)")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate file (with --tls-key: serve HTTPS)")
	fs.StringVar(&o.TLSKey, "tls-key", "", "TLS key file")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	pprofAddr := fs.String("pprof", "", "serve Go profiling (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060")
	fs.Usage = func() {
		fmt.Fprintln(s.err, "Usage: switchboard serve [flags]\n\nRuns the hub: ATP at /atp/*, MAMP at /mamp/v1/*, A2A at /a2a/{agent} (cards under\n/.well-known/), MCP at /mcp, AMP at /v4/amp and /v4/tick, the dashboard at\n/dashboard/, and /healthz, /readyz, /metrics, /v1/* for operators.\nAuth is on unless --dev; the embedded store (default) needs nothing installed.\n\nFlags:")
		fs.PrintDefaults()
	}
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		fmt.Fprintln(s.err, "serve: --tls-cert and --tls-key go together")
		return exitUsage
	}
	o.BodyTimeout = hubBodyTimeout(o.BodyTimeout)
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(s.err, "serve: bad --log-level: %v\n", err)
		return exitUsage
	}
	// A lane's claim must outlast one delivery attempt with room to spare
	// (core: an attempt is started only if it ends within nine tenths of
	// the claim), or a slow receiver's lane could be claimed twice.
	if d, l := o.Relay.DeliverTimeout, o.Relay.ClaimLease; d > 0 && l > 0 && d > l-l/10 {
		fmt.Fprintf(s.err, "serve: --deliver-timeout %v must be at most nine tenths of --claim-lease %v\n", d, l)
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(s.err, &slog.HandlerOptions{Level: lvl}))
	o.Logger, o.Version = log, version
	stopTracing, err := tracing.Setup(ctx, "switchboard", version)
	if err != nil {
		fmt.Fprintf(s.err, "serve: %v\n", err)
		return exitFailure
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stopTracing(sctx)
	}()
	if tracing.Enabled() {
		log.Info("tracing on: exporting spans over OTLP/HTTP")
	}
	h, err := hub.New(ctx, o)
	if err != nil {
		fmt.Fprintf(s.err, "serve: %v\n", err)
		if errors.Is(err, hub.ErrDevNotLoopback) {
			return exitUsage
		}
		return exitFailure
	}
	defer h.Close()
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		fmt.Fprintf(s.err, "serve: %v\n", err)
		return exitFailure
	}
	mode := "auth on"
	if o.Dev {
		mode = "dev mode, auth off"
	} else if o.AdminToken == "" && os.Getenv("SWITCHBOARD_ADMIN_TOKEN") == "" {
		mode = "auth on, admin token in " + o.DataDir + "/admin.token"
	}
	if *pprofAddr != "" {
		if err := servePprof(ctx, *pprofAddr); err != nil {
			fmt.Fprintf(s.err, "serve: -pprof: %v\n", err)
			return exitUsage
		}
	}
	log.Info("switchboard listening", "addr", ln.Addr().String(), "store", storeName(o), "mode", mode, "version", version)
	if err := h.Serve(ctx, ln); err != nil {
		log.Error("serve", "err", err)
		return exitFailure
	}
	log.Info("switchboard stopped")
	return exitOK
}

// servePprof serves the profiling handlers on a separate loopback listener.
func servePprof(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errors.New("profiling is only served on a loopback address")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// hubBodyTimeout is hub.Options.BodyTimeout for the --body-timeout flag,
// whose 0 means no limit (the option's 0 means its default).
func hubBodyTimeout(flag time.Duration) time.Duration {
	if flag <= 0 {
		return -1
	}
	return flag
}

func storeName(o hub.Options) string {
	if o.StoreURL != "" {
		return "external"
	}
	return "sqlite:" + o.DataDir
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
