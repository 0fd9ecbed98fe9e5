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
	"path/filepath"
	"sync"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

func init() { register("mcp", "MCP server on stdio, for MCP hosts that launch a command", runMCP) }

const mcpUsage = `Usage:
  switchboard mcp [--hub URL] [--token TOKEN] [--agent ID]
  switchboard mcp --embedded [--data DIR] [--addr ADDR] [--dev] [--agent ID [--allow SENDER]…]

Serves the Model Context Protocol on stdin/stdout, for MCP hosts (desktop
assistants, IDEs, coding agents) that launch a command. Nothing but MCP is
written on stdout; logs go to stderr. Both protocol eras are served: a host
may send server/discover (2026-07-28) and then initialize.

By default it bridges to a running hub's Streamable HTTP endpoint (/mcp):
the hub's tools, resources and prompts are mirrored and every call is
forwarded with its progress, cancellation and errors; MCP tasks (get,
list, cancel, result, status notifications) are carried to the hub, which
keeps them across its restarts. With --embedded it
runs a hub in this process instead (its store in --data) and serves MCP
over it; the hub also listens on --addr so that other agents can register
and answer (use --addr "" for no listener). The embedded hub has auth on
unless --dev: agents registering on it get tokens, its admin token is kept
in --data/admin.token, and this session acts as the operator.

Who the host is: with a token, the agent the token belongs to (the admin
token acts as the operator); without auth (a --dev hub, or --embedded
--dev), the agent "mcp-host"; with --agent, that agent.

--agent binds the session to an agent and makes it a Claude Code channel:
the server declares the capability claude/channel and pushes every
message addressed to the agent into the session as a
notifications/claude/channel event; the reply tool answers it. A message
is acknowledged only after its notification was written, so nothing is
lost while the host or the hub restarts. Embedded, a missing agent is
registered, taking messages from the senders --allow names (ids or
agent:// globs; none: any sender, authenticated unless --dev). Bridged,
the token must be the agent's (or the admin token). Claude Code loads a
channel with --dangerously-load-development-channels server:NAME while
channels are a research preview.

Host configuration (e.g. claude_desktop_config.json, .mcp.json):
  {"mcpServers": {"switchboard": {"command": "switchboard",
     "args": ["mcp", "--hub", "http://127.0.0.1:8080", "--agent", "reviewer"],
     "env": {"SWITCHBOARD_TOKEN": "sbk_…"}}}}

Flags:
`

func runMCP(ctx context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(s.err)
	hubURL := fs.String("hub", envOr("SWITCHBOARD_HUB", "http://127.0.0.1:8080"), "the running hub to bridge to (env SWITCHBOARD_HUB); /mcp is added when the URL has no path")
	token := fs.String("token", os.Getenv("SWITCHBOARD_TOKEN"), "bearer token for the hub: an agent's token or the admin token (env SWITCHBOARD_TOKEN)")
	agent := fs.String("agent", os.Getenv("SWITCHBOARD_AGENT"), "bind the session to this agent and push its messages into the host as channel events (env SWITCHBOARD_AGENT)")
	var allow []string
	fs.Func("allow", "with --embedded and --agent: a sender the agent takes messages from, when it registers the agent (repeatable; an id or an agent:// glob)", func(v string) error {
		allow = append(allow, v)
		return nil
	})
	embedded := fs.Bool("embedded", false, "run a hub in this process instead of bridging to one")
	dataDir := fs.String("data", envOr("SWITCHBOARD_DATA", "./switchboard-data"), "with --embedded: data directory of the embedded store (env SWITCHBOARD_DATA)")
	addr := fs.String("addr", "127.0.0.1:8080", `with --embedded: where the hub listens for agents ("" for nowhere)`)
	dev := fs.Bool("dev", false, "with --embedded: auth off (loopback only)")
	loopback := fs.Bool("allow-loopback-callbacks", false, "with --embedded: let the hub call agents on loopback addresses (on with --dev)")
	private := fs.Bool("allow-private-callbacks", false, "with --embedded: let the hub call agents on private-range addresses (on with --dev)")
	hostID := fs.String("host-agent", mcpadapter.DefaultHostAgentID, "the agent id the host acts as on a hub with auth off")
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
	if *agent != "" && !core.ValidAgentID(*agent) {
		fmt.Fprintf(s.err, "mcp: --agent %q is not a valid agent id\n", *agent)
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(s.err, &slog.HandlerOptions{Level: lvl}))
	if !*embedded {
		u, err := mcpEndpoint(*hubURL)
		if err != nil {
			fmt.Fprintf(s.err, "mcp: %v\n", err)
			return exitUsage
		}
		err = mcpadapter.ServeStdio(ctx, mcpadapter.Remote(mcpadapter.RemoteOptions{URL: u, Token: *token, Version: version,
			Agent: *agent, Logger: log}), s.in, s.out)
		if err != nil {
			fmt.Fprintf(s.err, "mcp: %v\n", err)
			return exitUnavail
		}
		return exitOK
	}
	o := hub.Options{Addr: *addr, DataDir: *dataDir, Dev: *dev, Logger: log, Version: version}
	o.Callbacks.AllowLoopback, o.Callbacks.AllowPrivate = *loopback, *private
	mo := mcpadapter.Options{HostAgentID: *hostID, Version: version, Logger: log, Agent: *agent, AllowedSenders: allow}
	return runEmbeddedMCP(ctx, s, o, mo)
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

func runEmbeddedMCP(ctx context.Context, s stdio, o hub.Options, mo mcpadapter.Options) int {
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
	// Whoever runs the command owns the hub's data: the operator (with
	// auth off, dev mode).
	mo.Caller = core.AdminPrincipal()
	if o.Dev {
		mo.Caller = core.DevPrincipal()
	}
	mo.AMP, mo.Records = h.AMP, h.Store
	// The bound agent exists before anyone is told where the hub is, so
	// that a message sent to it at once is kept for the session.
	if err := mcpadapter.PrepareAgent(hctx, h.Relay, mo); err != nil {
		fmt.Fprintf(s.err, "mcp: --agent %s: %v\n", mo.Agent, err)
		return exitFailure
	}
	if listen {
		ln, err := net.Listen("tcp", o.Addr)
		if err != nil {
			fmt.Fprintf(s.err, "mcp: embedded hub: %v (choose another --addr, or --addr \"\")\n", err)
			return exitFailure
		}
		// Always say where the hub listens, whatever the log level: agents
		// (and tests) need the address.
		auth := "auth off"
		if !o.Dev {
			auth = "auth on, admin token in " + filepath.Join(o.DataDir, "admin.token")
		}
		fmt.Fprintf(s.err, "switchboard: embedded hub listening on http://%s (data %s, %s)\n", ln.Addr(), o.DataDir, auth)
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Serve(hctx, ln) }()
	} else {
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Relay.Run(hctx) }()
	}
	if err := mcpadapter.ServeStdio(hctx, mcpadapter.Local(h.Relay, mo), s.in, s.out); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(s.err, "mcp: %v\n", err)
		return exitFailure
	}
	return exitOK
}
