package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/fftoml"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/tracing"
)

func init() { register("serve", "run the hub", runServe) }

func runServe(ctx context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(s.err)
	d := hub.Defaults()
	var o hub.Options
	fs.StringVar(&o.Addr, "addr", d.Addr, "listen address")
	fs.StringVar(&o.DataDir, "data", d.DataDir, "data directory of the embedded store (and of the generated admin token)")
	fs.StringVar(&o.StoreURL, "store", "", "store URL: empty for the embedded store, or postgres://…")
	fs.BoolVar(&o.Dev, "dev", false, "development mode: auth off (only on a loopback address)")
	fs.StringVar(&o.AdminToken, "admin-token", "", "operator token (default: generated on first start into DATA/admin.token, mode 0600)")
	fs.StringVar(&o.Host, "host", "", "the hub's host name in agent:// URIs (default: the listen host)")
	fs.Int64Var(&o.MaxBody, "max-body", d.MaxBody, "largest request body in bytes")
	fs.DurationVar(&o.BodyTimeout, "body-timeout", d.BodyTimeout, "how long a request body may take to arrive before the request is answered 408 and its connection closed (0: no limit)")
	fs.DurationVar(&o.Relay.DefaultTTL, "default-ttl", d.Relay.DefaultTTL, "TTL of messages that give none")
	fs.DurationVar(&o.Relay.Retention, "retention", d.Relay.Retention, "how long receipts of finished messages, and finished A2A tasks (at least 2h), are kept")
	fs.DurationVar(&o.Relay.DeliverTimeout, "deliver-timeout", d.Relay.DeliverTimeout, "how long one delivery attempt may take before it counts as failed and is retried")
	fs.IntVar(&o.Relay.MaxQueue, "max-queue", d.Relay.MaxQueue, "queued messages per receiver before sends are refused with 429 (-1: no limit)")
	maxQueueBytes := fs.String("max-queue-bytes", "1GiB", "bytes of queued messages per receiver before sends are refused with 429 queue_full (0: no limit)")
	memBudget := fs.String("memory-budget", envOr("SWITCHBOARD_MEMORY_BUDGET", "auto"), "how much memory the hub may take on above its idle size: a third for what it holds for clients — request bodies being handled (4× their size), cached and claimed messages; a request that finds no room within a second gets 507 over_budget with Retry-After —, the rest for the garbage collector's headroom (the Go runtime's soft memory limit is set from it, and GOGC to 400 within it, unless GOMEMLIMIT or GOGC is set) and memory outside Go's heap (auto: a quarter of the machine's or cgroup's memory; off: none; env SWITCHBOARD_MEMORY_BUDGET)")
	fs.IntVar(&o.Relay.MaxAgents, "max-agents", d.Relay.MaxAgents, "registered agents (alive or not, the hub's own push and callback agents included) before registering a new agent id is refused with 507 agent_limit (0: no limit)")
	fs.IntVar(&o.MaxConns, "max-conns", 0, "client connections held at once; past it the oldest waiting connection (idle keep-alive, or not yet sending) is closed to make room, or the new one is closed unanswered if none waits (0: 10000, or the open-file limit less 512 if lower; -1: no bound)")
	fs.IntVar(&o.MaxConnsPerClient, "max-conns-per-client", hub.DefaultMaxConnsPerClient, "connections one client address may hold; past it its oldest waiting connection is closed, or the new one if none waits (-1: no bound; raise it behind a proxy, whose connections all come from one address)")
	fs.IntVar(&o.MaxIdlePerClient, "max-idle-per-client", hub.DefaultMaxIdlePerClient, "connections one client address may keep waiting (idle keep-alive, or not yet sending); past it its oldest is closed (-1: no bound)")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", hub.DefaultIdleTimeout, "how long a keep-alive connection may idle between requests")
	fs.DurationVar(&o.HeaderTimeout, "header-timeout", hub.DefaultHeaderTimeout, "how long a request's headers may take to arrive (a new connection that sends nothing is closed after it)")
	fs.IntVar(&o.Relay.MaxStreams, "max-streams", d.Relay.MaxStreams, "event streams (GET /atp/stream, and MAMP conversation streams) one agent may hold open on this hub; opening one more ends the oldest (-1: no limit)")
	fs.DurationVar(&o.Relay.ClaimLease, "claim-lease", d.Relay.ClaimLease, "how long an instance owns the delivery lanes it claimed (renewed as it delivers; at least 10/9 of --deliver-timeout); another instance takes over a crashed one's lanes after it")
	fs.StringVar(&o.Sync, "sync", d.Sync, "embedded store durability: full (fsync every commit: survives power loss) or normal (survives kill -9 of the hub, not a machine crash; faster)")
	fs.StringVar(&o.Recover, "recover", "", "when the embedded store is found damaged or missing at start (the hub refuses to start otherwise): salvage (move the damaged files to DATA/damaged-TIME/ and copy what can still be read into a new database) or fresh (move them there and start empty); a healthy store is opened as it is")
	fs.StringVar(&o.IntegrityCheck, "integrity-check", "quick", "the embedded store's check at start: quick (reads every page: 0.4-0.7 s for a 500 MiB database here), full (also compares indexes with tables; slower) or off")
	fs.BoolVar(&o.NoSync, "no-sync", false, "do not fsync the embedded store (benchmarks only: a crash can lose accepted messages)")
	fs.BoolVar(&o.Callbacks.AllowLoopback, "allow-loopback-callbacks", false, "let the hub call loopback addresses (on by default with --dev)")
	fs.BoolVar(&o.Callbacks.AllowPrivate, "allow-private-callbacks", false, "let the hub call private-range addresses (on by default with --dev)")
	fs.BoolVar(&o.MetricsPublic, "metrics-public", false, "serve /metrics without the admin token (for a scraper on a trusted network)")
	fs.Float64Var(&o.RateLimit, "rate-limit", 0, "requests per second per agent credential or anonymous address (0: 1000 with auth on, none with --dev; -1: none)")
	fs.IntVar(&o.RateBurst, "rate-burst", 0, "rate limit burst (default: the rate)")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate file (with --tls-key: serve HTTPS)")
	fs.StringVar(&o.TLSKey, "tls-key", "", "TLS key file")
	requestLog := fs.Bool("request-log", true, "write one log record per answered request (docs/logging.md); the audit log is always on")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	pprofAddr := fs.String("pprof", "", "serve Go profiling (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060")
	fs.String("config", "", "configuration file (TOML: one key per flag, e.g. addr = \"0.0.0.0:8080\", max-queue = 5000)")
	printConfig := fs.Bool("print-config", false, "print the configuration in force (as a TOML configuration file, with where each value came from) and exit")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: switchboard serve [flags]

Runs the hub: ATP at /atp/*, MAMP at /mamp/v1/*, A2A at /a2a/{agent} (cards under
/.well-known/), MCP at /mcp, AMP at /v4/amp and /v4/tick, the dashboard at
/dashboard/, and /healthz, /readyz, /metrics, /v1/* for operators.
Auth is on unless --dev; the embedded store (default) needs nothing installed.

Every flag can also be set in the environment, as SWITCHBOARD_ and the flag's
name in capitals with - as _ (--max-queue: SWITCHBOARD_MAX_QUEUE), or in the
TOML file named by --config (SWITCHBOARD_CONFIG), under the flag's name
(max-queue = 5000). A flag beats the environment, which beats the file,
which beats the default. --print-config shows the result.

Flags:`)
		fs.PrintDefaults()
	}
	if err := ff.Parse(fs, args, ff.WithEnvVarPrefix(envPrefix), ff.WithConfigFileFlag("config"),
		ff.WithConfigFileParser(fftoml.Parser)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		if !isFlagError(err) {
			fmt.Fprintf(s.err, "serve: %v\n", err)
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "switchboard serve: unexpected argument %q\n\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	if *printConfig {
		if err := printServeConfig(s.out, fs, args); err != nil {
			fmt.Fprintf(s.err, "serve: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	o.NoRequestLog = !*requestLog
	if (o.TLSCert == "") != (o.TLSKey == "") {
		fmt.Fprintln(s.err, "serve: --tls-cert and --tls-key go together")
		return exitUsage
	}
	o.BodyTimeout = hubBodyTimeout(o.BodyTimeout)
	var err error
	if o.Relay.MaxQueueBytes, err = hub.ParseSize(*maxQueueBytes); err != nil {
		fmt.Fprintf(s.err, "serve: --max-queue-bytes: %v\n", err)
		return exitUsage
	}
	switch *memBudget {
	case "auto", "":
		o.MemoryBudget = hub.DefaultMemoryBudget()
	case "off", "-1":
		o.MemoryBudget = -1
	default:
		if o.MemoryBudget, err = hub.ParseSize(*memBudget); err != nil || o.MemoryBudget == 0 {
			fmt.Fprintf(s.err, "serve: --memory-budget: want a size such as 512MiB, auto or off\n")
			return exitUsage
		}
	}

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
	tokenFile := filepath.Join(o.DataDir, "admin.token")
	_, statErr := os.Stat(tokenFile)
	firstStart := !o.Dev && o.AdminToken == "" && os.Getenv("SWITCHBOARD_ADMIN_TOKEN") == "" && errors.Is(statErr, iofs.ErrNotExist)
	log := slog.New(slog.NewJSONHandler(s.err, &slog.HandlerOptions{Level: lvl}))
	o.Logger, o.Version = log, version
	stopTracing, err2 := tracing.Setup(ctx, "switchboard", version)
	err = err2
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
	hub.SetMemoryLimit(o.MemoryBudget)
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		fmt.Fprintf(s.err, "serve: %v\n", err)
		return exitFailure
	}
	mode := "auth on"
	if o.Dev {
		mode = "dev mode, auth off"
	} else if o.AdminToken == "" && os.Getenv("SWITCHBOARD_ADMIN_TOKEN") == "" {
		mode = "auth on, admin token in " + tokenFile
	}
	if *pprofAddr != "" {
		if err := servePprof(ctx, *pprofAddr); err != nil {
			fmt.Fprintf(s.err, "serve: -pprof: %v\n", err)
			return exitUsage
		}
	}
	log.Info("switchboard listening", "addr", ln.Addr().String(), "store", storeName(o), "mode", mode, "version", version)
	if firstStart {
		firstStartNotice(s.err, hubURL(ln.Addr().String(), o.TLSCert != ""), tokenFile)
	}
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

// envPrefix starts the environment variable of every flag.
const envPrefix = "SWITCHBOARD"

// isFlagError reports whether err is one the flag package has already
// printed (with the usage).
func isFlagError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "flag provided but not defined") || strings.HasPrefix(msg, "invalid value") ||
		strings.HasPrefix(msg, "invalid boolean") || strings.HasPrefix(msg, "bad flag syntax") ||
		strings.HasPrefix(msg, "flag needs an argument")
}

// hubURL is the base URL of a hub listening on addr.
func hubURL(addr string, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && (host == "0.0.0.0" || host == "::") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return scheme + "://" + addr
}

// firstStartNotice tells the operator of a new hub where its admin token
// is (it is not shown) and how agents get theirs.
func firstStartNotice(w io.Writer, base, tokenFile string) {
	fmt.Fprintf(w, `
switchboard: first start. Auth is on; the operator's admin token was written
to %[2]s (mode 0600). It is not shown here: read it from the file.

  Use it from this machine (the CLI then needs no --token):
    switchboard login --hub %[1]s --token-file %[2]s
  or with curl:
    curl -s %[1]s/v1/dlq -H "Authorization: Bearer $(cat %[2]s)"

  An agent gets its own token from its first registration (keep it; it is
  shown once):
    curl -s %[1]s/atp/register -H 'Content-Type: application/json' \
      -d '{"agent_id":"worker","capabilities":["text.reverse"]}'
    # → {"token":"sbk_…","signing_secret":"whsec_…",…}
  and sends with it:
    curl -s %[1]s/atp/send -H "Authorization: Bearer $WORKER_TOKEN" \
      -H 'Content-Type: application/json' -d '{"sender":"worker","receiver":"…","payload":{…}}'
  The operator can issue an agent a new token: switchboard token rotate AGENT

`, base, tokenFile)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
