package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Backend is what a stdio session talks to: a relay in this process
// (Local) or a running hub's /mcp endpoint (Remote).
type Backend interface {
	// server returns the MCP server to connect the stdio session to and a
	// function that releases it.
	server(ctx context.Context) (*sdk.Server, func(), error)
	// serve does the backend's work for the session over r (the channel,
	// task notifications) until ctx ends.
	serve(ctx context.Context, r *router)
}

// ServeStdio serves MCP over in and out (newline-delimited JSON-RPC, as
// MCP's stdio transport defines) until the host closes its end or ctx
// ends. Both protocol eras are served on the one connection (router.go).
func ServeStdio(ctx context.Context, b Backend, in io.Reader, out io.Writer) error {
	srv, release, err := b.server(ctx)
	if err != nil {
		return err
	}
	defer release()
	raw, err := (&sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("mcp stdio: %w", err)
	}
	defer raw.Close()
	r := newRouter(raw)
	if l, ok := b.(interface {
		taskListen() func(context.Context, *router, *jsonrpc.Request, *listenRequest)
	}); ok {
		r.onListen = l.taskListen()
	}
	legacy, err := srv.Connect(ctx, r.legacy, nil)
	if err != nil {
		return fmt.Errorf("mcp stdio: %w", err)
	}
	modern, err := srv.Connect(ctx, r.modern, nil)
	if err != nil {
		_ = legacy.Close()
		return fmt.Errorf("mcp stdio: %w", err)
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.run(sctx) }()
	go func() { defer wg.Done(); b.serve(sctx, r) }()
	done := make(chan error, 2)
	go func() { done <- legacy.Wait() }()
	go func() { done <- modern.Wait() }()
	select {
	case err = <-done: // the host closed stdin: both sessions end
	case <-ctx.Done():
	}
	stop()
	_ = legacy.Close()
	_ = modern.Close()
	_ = raw.Close()
	wg.Wait()
	if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, sdk.ErrConnectionClosed) {
		err = nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Local is a backend over a relay in this process (an embedded hub). Its
// sessions act for opt.Caller — the operator, or dev mode with auth off,
// since whoever runs the command owns the hub's data — and, with
// opt.Agent, as that agent, whose messages are pushed into the host as
// channel notifications.
func Local(relay *core.Relay, opt Options) Backend { return &localBackend{relay: relay, opt: opt} }

// PrepareAgent registers the agent a Local backend with opt is bound to
// (opt.Agent), when it is missing, so that messages sent to it before the
// host connects are accepted and kept. It does nothing without opt.Agent.
func PrepareAgent(ctx context.Context, relay *core.Relay, opt Options) error {
	if opt.Agent == "" {
		return nil
	}
	opt.defaults()
	s := &Server{relay: relay, opt: opt, ensured: map[string]time.Time{}, operatorID: relay.InternalID(operatorKind)}
	return s.ensureHost(ctx, caller{p: opt.Caller, agentID: s.agentFor(opt.Caller, opt.Agent)})
}

type localBackend struct {
	relay *core.Relay
	opt   Options
	s     *Server
}

func (b *localBackend) server(ctx context.Context) (*sdk.Server, func(), error) {
	b.s = New(b.relay, b.opt)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = b.s.Run(wctx) }()
	return b.s.SDK(), func() { cancel(); wg.Wait() }, nil
}

// taskListen serves the 2026-era listens for task ids, when the server
// has tasks.
func (b *localBackend) taskListen() func(context.Context, *router, *jsonrpc.Request, *listenRequest) {
	if b.s.tasks == nil {
		return nil
	}
	return b.s.tasks.serveListenStdio
}

func (b *localBackend) serve(ctx context.Context, r *router) {
	var wg sync.WaitGroup
	if b.s.tasks != nil {
		wg.Add(1)
		go func() { defer wg.Done(); b.s.tasks.notifyOver(ctx, r) }()
	}
	if b.opt.Agent != "" {
		c := caller{p: b.opt.Caller, agentID: b.s.agentFor(b.opt.Caller, b.opt.Agent)}
		ch := &channel{inbox: &localInbox{s: b.s, c: c}, notify: r, log: b.s.opt.Logger, allowed: b.s.allowedSender(c)}
		wg.Add(1)
		go func() { defer wg.Done(); ch.run(ctx, r.Initialized()) }()
	}
	wg.Wait()
}

// RemoteOptions configure a Remote backend.
type RemoteOptions struct {
	// URL is the hub's MCP endpoint, e.g. http://127.0.0.1:8080/mcp.
	URL string
	// Token is the bearer token to present (an agent's token or the admin
	// token); empty for a dev-mode hub.
	Token string
	// HTTPClient makes the requests [a client without timeout, since
	// responses stream]. Its idle connections are closed when the session
	// ends.
	HTTPClient *http.Client
	// Version is reported as the bridge's version.
	Version string
	// Agent binds the bridge to the agent the token belongs to (or, with
	// the admin token or a hub with auth off, names it): its messages are
	// pushed into the host as channel notifications.
	Agent string
	// Logger logs the bridge's activity [slog.Default()].
	Logger *slog.Logger
}

// Remote is a backend that bridges the stdio session to a running hub's
// Streamable HTTP endpoint with the SDK's client: the hub's tools,
// resources, resource templates and prompts are mirrored and every call is
// forwarded, with its progress notifications, cancellation, resource
// subscriptions and errors (tool errors stay results with isError, JSON-RPC
// errors stay JSON-RPC errors).
func Remote(opt RemoteOptions) Backend { return &remoteBackend{opt: opt} }

type remoteBackend struct {
	opt   RemoteOptions
	tasks *hubTasks // the hub's tasks, carried for the host (bridgetasks.go); nil if the hub has none

	mu    sync.Mutex
	local *sdk.Server
	cs    *sdk.ClientSession
	// what was mirrored last, to remove what the hub no longer has
	toolNames, resourceURIs, templateURIs, promptNames []string
}

// headerTransport adds the Authorization and Switchboard-Agent headers.
type headerTransport struct {
	token, agent string
	next         http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	if t.agent != "" {
		r.Header.Set(AgentHeader, t.agent)
	}
	return t.next.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the transport
// underneath (http.Client.CloseIdleConnections reaches it through this).
func (t headerTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (b *remoteBackend) server(ctx context.Context) (*sdk.Server, func(), error) {
	if !strings.HasPrefix(b.opt.URL, "http://") && !strings.HasPrefix(b.opt.URL, "https://") {
		return nil, nil, fmt.Errorf("mcp bridge: hub URL %q must be http(s)", b.opt.URL)
	}
	hc := b.opt.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	if b.opt.Token != "" || b.opt.Agent != "" {
		next := hc.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		c := *hc
		c.Transport = headerTransport{token: b.opt.Token, agent: b.opt.Agent, next: next}
		hc = &c
	}
	version := b.opt.Version
	if version == "" {
		version = "dev"
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "switchboard-mcp-bridge", Version: version}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
			b.forEachLocalSession(func(ss *sdk.ServerSession) { _ = ss.NotifyProgress(ctx, req.Params) })
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			if l := b.localServer(); l != nil {
				_ = l.ResourceUpdated(ctx, req.Params)
			}
		},
		ToolListChangedHandler:     func(ctx context.Context, _ *sdk.ToolListChangedRequest) { b.resync(ctx) },
		PromptListChangedHandler:   func(ctx context.Context, _ *sdk.PromptListChangedRequest) { b.resync(ctx) },
		ResourceListChangedHandler: func(ctx context.Context, _ *sdk.ResourceListChangedRequest) { b.resync(ctx) },
	})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cs, err := client.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: b.opt.URL, HTTPClient: hc}, nil)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("mcp bridge: connect to %s: %w", b.opt.URL, err)
	}
	init := cs.InitializeResult()
	impl := &sdk.Implementation{Name: "switchboard", Version: version}
	opts := &sdk.ServerOptions{
		// Logging stays declared (logging/setLevel) for the revisions before
		// 2026-07-28, which deprecated it.
		//lint:ignore SA1019 served for the older revisions
		Capabilities: &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}},
		SubscribeHandler: func(ctx context.Context, req *sdk.SubscribeRequest) error {
			return cs.Subscribe(ctx, &sdk.SubscribeParams{URI: req.Params.URI})
		},
		UnsubscribeHandler: func(ctx context.Context, req *sdk.UnsubscribeRequest) error {
			return cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: req.Params.URI})
		},
		CompletionHandler: func(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
			return cs.Complete(ctx, req.Params)
		},
	}
	if init != nil {
		if init.ServerInfo != nil {
			impl = init.ServerInfo
		}
		opts.Instructions = init.Instructions
	}
	if b.opt.Agent != "" {
		opts.Capabilities.Experimental = map[string]any{ChannelCapability: map[string]any{}}
		opts.Instructions += "\n\n" + channelInstructions(b.opt.Agent)
	}
	if init != nil && init.Capabilities != nil && init.Capabilities.Extensions[TasksExtension] != nil {
		b.tasks = newHubTasks(b.opt.URL, hc, version, b.logger())
		opts.Capabilities.AddExtension(TasksExtension, nil)
	}
	local := sdk.NewServer(impl, opts)
	if b.tasks != nil {
		b.tasks.install(local)
	}
	b.mu.Lock()
	b.local, b.cs = local, cs
	b.mu.Unlock()
	if err := b.mirror(ctx); err != nil {
		_ = cs.Close()
		return nil, nil, err
	}
	return local, func() {
		if b.tasks != nil {
			b.tasks.close(context.WithoutCancel(ctx))
		}
		_ = cs.Close()
		// A connection the client dialled but did not use (its request was
		// served by another that became free) is one the hub has read no
		// request on yet, and a stopping hub waits 5 s for such a one.
		hc.CloseIdleConnections()
	}, nil
}

func (b *remoteBackend) serve(ctx context.Context, r *router) {
	var wg sync.WaitGroup
	if b.tasks != nil {
		wg.Add(1)
		go func() { defer wg.Done(); b.tasks.relayStatus(ctx, r) }()
	}
	if b.opt.Agent != "" {
		ch := &channel{inbox: &remoteInbox{cs: b.cs, agent: b.opt.Agent}, notify: r, log: b.logger()}
		wg.Add(1)
		go func() { defer wg.Done(); ch.run(ctx, r.Initialized()) }()
	}
	wg.Wait()
}

func (b *remoteBackend) logger() *slog.Logger {
	if b.opt.Logger == nil {
		return slog.Default()
	}
	return b.opt.Logger
}

func (b *remoteBackend) localServer() *sdk.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.local
}

func (b *remoteBackend) forEachLocalSession(f func(*sdk.ServerSession)) {
	if l := b.localServer(); l != nil {
		for ss := range l.Sessions() {
			f(ss)
		}
	}
}

func (b *remoteBackend) resync(ctx context.Context) {
	_ = b.mirror(ctx)
}

// mirror copies the hub's tools, resources, templates and prompts onto the
// local server, removing those the hub no longer has.
func (b *remoteBackend) mirror(ctx context.Context) error {
	b.mu.Lock()
	local, cs := b.local, b.cs
	b.mu.Unlock()
	caps := cs.InitializeResult()
	has := func(f func(*sdk.ServerCapabilities) bool) bool {
		return caps == nil || caps.Capabilities == nil || f(caps.Capabilities)
	}
	if has(func(c *sdk.ServerCapabilities) bool { return c.Tools != nil }) {
		var names []string
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return fmt.Errorf("mcp bridge: list tools: %w", err)
			}
			names = append(names, t.Name)
			local.AddTool(t, b.forwardTool(t.Name))
		}
		b.removed(&b.toolNames, names, local.RemoveTools)
	}
	if has(func(c *sdk.ServerCapabilities) bool { return c.Resources != nil }) {
		var uris, tmpls []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return fmt.Errorf("mcp bridge: list resources: %w", err)
			}
			uris = append(uris, r.URI)
			local.AddResource(r, b.forwardRead)
		}
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return fmt.Errorf("mcp bridge: list resource templates: %w", err)
			}
			tmpls = append(tmpls, t.URITemplate)
			local.AddResourceTemplate(t, b.forwardRead)
		}
		b.removed(&b.resourceURIs, uris, local.RemoveResources)
		b.removed(&b.templateURIs, tmpls, local.RemoveResourceTemplates)
	}
	if has(func(c *sdk.ServerCapabilities) bool { return c.Prompts != nil }) {
		var names []string
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return fmt.Errorf("mcp bridge: list prompts: %w", err)
			}
			names = append(names, p.Name)
			local.AddPrompt(p, b.forwardPrompt)
		}
		b.removed(&b.promptNames, names, local.RemovePrompts)
	}
	return nil
}

// removed removes the names in *prev that are not in now, and remembers now.
func (b *remoteBackend) removed(prev *[]string, now []string, remove func(...string)) {
	b.mu.Lock()
	var gone []string
	for _, p := range *prev {
		found := false
		for _, n := range now {
			if n == p {
				found = true
				break
			}
		}
		if !found {
			gone = append(gone, p)
		}
	}
	*prev = now
	b.mu.Unlock()
	if len(gone) > 0 {
		remove(gone...)
	}
}

// protocolError keeps JSON-RPC errors from the hub as they are and turns
// other failures (the hub unreachable) into internal errors.
func protocolError(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "switchboard hub: " + err.Error()}
}

func (b *remoteBackend) forwardTool(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		p := &sdk.CallToolParams{Name: name, Arguments: req.Params.Arguments}
		if tok := req.Params.GetProgressToken(); tok != nil {
			// JSON numbers arrive as float64, which SetProgressToken
			// refuses: keep integral tokens integers.
			if f, ok := tok.(float64); ok && f == float64(int64(f)) {
				tok = int64(f)
			}
			p.Meta = sdk.Meta{"progressToken": tok}
		}
		res, err := b.cs.CallTool(ctx, p)
		if err != nil {
			return nil, protocolError(err)
		}
		return res, nil
	}
}

func (b *remoteBackend) forwardRead(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	res, err := b.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: req.Params.URI})
	if err != nil {
		return nil, protocolError(err)
	}
	return res, nil
}

func (b *remoteBackend) forwardPrompt(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	res, err := b.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
	if err != nil {
		return nil, protocolError(err)
	}
	return res, nil
}
