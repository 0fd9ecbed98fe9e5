package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/switchboard-hub/switchboard/internal/hub"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

func init() { register("mcp", "MCP server on stdio, for MCP hosts that launch a command", runMCP) }

const mcpUsage = `Usage:
  switchboard mcp [--hub URL] [--token TOKEN]
  switchboard mcp --embedded [--data DIR] [--addr ADDR] [--dev]

Serves the Model Context Protocol on stdin/stdout, for MCP hosts (desktop
assistants, IDEs, agent frameworks) that launch a command. Nothing but MCP
is written on stdout; logs go to stderr.

By default it bridges to a running hub's Streamable HTTP endpoint (/mcp):
the hub's tools, resources and prompts are mirrored and every call is
forwarded with its progress, cancellation and errors. With --embedded it
runs a hub in this process instead (its store in --data) and serves MCP
over it; the hub also listens on --addr so that other agents can register
and answer (use --addr "" for no listener).

The MCP host acts as one agent of the hub: with a token, the agent the
token belongs to (the admin token acts as mcp-host); without auth (a --dev
hub, or --embedded), the agent "mcp-host". Replies to it are queued and
returned by the wait_for_reply tool.

Host configuration (e.g. claude_desktop_config.json, .mcp.json):
  {"mcpServers": {"switchboard": {"command": "switchboard",
     "args": ["mcp", "--hub", "http://127.0.0.1:8080"],
     "env": {"SWITCHBOARD_TOKEN": "sbk_…"}}}}

Flags:
`

func runMCP(ctx context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(s.err)
	hubURL := fs.String("hub", envOr("SWITCHBOARD_HUB", "http://127.0.0.1:8080"), "the running hub to bridge to (env SWITCHBOARD_HUB); /mcp is added when the URL has no path")
	token := fs.String("token", os.Getenv("SWITCHBOARD_TOKEN"), "bearer token for the hub: an agent's token or the admin token (env SWITCHBOARD_TOKEN)")
	embedded := fs.Bool("embedded", false, "run a hub in this process instead of bridging to one")
	dataDir := fs.String("data", envOr("SWITCHBOARD_DATA", "./switchboard-data"), "with --embedded: data directory of the embedded store (env SWITCHBOARD_DATA)")
	addr := fs.String("addr", "127.0.0.1:8080", `with --embedded: where the hub listens for agents ("" for nowhere)`)
	dev := fs.Bool("dev", false, "with --embedded: auth off on the hub's HTTP listener (loopback only)")
	hostID := fs.String("host-agent", mcpadapter.DefaultHostAgentID, "the agent id the MCP host acts as without a token")
	logLevel := fs.String("log-level", "warn", "log level on stderr: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprint(s.err, mcpUsage)
		fs.PrintDefaults()
	}
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(s.err, "mcp: bad --log-level: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(s.err, &slog.HandlerOptions{Level: lvl}))
	if !*embedded {
		u, err := mcpEndpoint(*hubURL)
		if err != nil {
			fmt.Fprintf(s.err, "mcp: %v\n", err)
			return exitUsage
		}
		err = mcpadapter.ServeStdio(ctx, mcpadapter.Remote(mcpadapter.RemoteOptions{URL: u, Token: *token, Version: version}), s.in, s.out)
		if err != nil {
			fmt.Fprintf(s.err, "mcp: %v\n", err)
			return exitUnavail
		}
		return exitOK
	}
	return runEmbeddedMCP(ctx, s, log, hub.Options{Addr: *addr, DataDir: *dataDir, Dev: *dev, Logger: log, Version: version}, *hostID)
}

// mcpEndpoint turns a hub URL into its MCP endpoint URL.
func mcpEndpoint(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--hub %q must be an http(s) URL", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = mcpadapter.Path
	}
	return u.String(), nil
}

func runEmbeddedMCP(ctx context.Context, s stdio, log *slog.Logger, o hub.Options, hostID string) int {
	listen := o.Addr != ""
	if !listen {
		o.Addr = "127.0.0.1:0" // the hub needs an address; nothing listens on it
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h, err := hub.New(hctx, o)
	if err != nil {
		fmt.Fprintf(s.err, "mcp: %v\n", err)
		if errors.Is(err, hub.ErrDevNotLoopback) {
			return exitUsage
		}
		return exitFailure
	}
	defer h.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if listen {
		ln, err := net.Listen("tcp", o.Addr)
		if err != nil {
			fmt.Fprintf(s.err, "mcp: embedded hub: %v (choose another --addr, or --addr \"\")\n", err)
			return exitFailure
		}
		// Always say where the hub listens, whatever the log level: agents
		// (and tests) need the address.
		fmt.Fprintf(s.err, "switchboard: embedded hub listening on http://%s (data %s)\n", ln.Addr(), o.DataDir)
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Serve(hctx, ln) }()
	} else {
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Relay.Run(hctx) }()
	}
	backend := mcpadapter.Local(h.Relay, mcpadapter.Options{HostAgentID: hostID, Version: version, Logger: log, AMP: h.AMP})
	if err := mcpadapter.ServeStdio(hctx, backend, s.in, s.out); err != nil && !strings.Contains(err.Error(), "context canceled") {
		fmt.Fprintf(s.err, "mcp: %v\n", err)
		return exitFailure
	}
	return exitOK
}
