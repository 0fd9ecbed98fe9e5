package a2a

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/stopctx"
)

// Options tune the A2A adapter.
type Options struct {
	// Records keeps the adapter's state: tasks, push configs, follow and
	// retire marks (the hub passes its store's record interface).
	Records core.RecordStore
	// MaxBody bounds a request body in bytes [1 MiB].
	MaxBody int64
	// BlockTimeout caps how long a blocking SendMessage waits for a
	// terminal or interrupted state before it answers with the task as it
	// is [10m, the time a task waits for its agent's result].
	BlockTimeout time.Duration
	// ResultWait is how long after delivery a task keeps waiting for the
	// agent's result message [10m].
	ResultWait time.Duration
	// TTL is the relay TTL of messages sent through A2A [the relay's].
	TTL time.Duration
	// PublicURL is the hub's external base URL for cards [from the
	// request's Host].
	PublicURL string
	// Secured advertises bearer authentication in the cards (auth on).
	Secured bool
	// CheckURL, when set, refuses push notification URLs the hub may not
	// call (the SSRF policy) when a config is set. Without it only the
	// addresses no policy allows are refused then; the push deliverer's
	// own guard refuses the rest at connect time.
	CheckURL func(raw string) error
	// TaskPoll is how long a client waiting on a task (a blocking
	// SendMessage, a stream) waits before it first re-reads the task
	// unwoken; the waits then double up to 8 × TaskPoll [250ms, so up to
	// every 2 s]. A change made on this instance, or announced by another
	// one on a shared store, wakes the client at once; the polls are the
	// fallback for a lost announcement.
	TaskPoll time.Duration
	Logger   *slog.Logger
}

// Server is the A2A adapter: an a2asrv.RequestHandler over the relay,
// served by the SDK's JSON-RPC, HTTP+JSON and gRPC transports (1.0) and
// its 0.3 compatibility transports, plus the cards. It implements the
// hub's adapter contract (Name, Mount, Run).
type Server struct {
	relay *core.Relay
	tasks *tasks
	opt   Options
	log   *slog.Logger
	// hub is the adapter's own principal, for what it does on the
	// relay for itself (registering its helpers, reading the receipts
	// and results of its messages, sending push notifications).
	hub core.Principal

	// Background work started while serving (mark deletions) runs in
	// goroutines that Run waits for; bgOpen is set while Run runs, and
	// bgStop is then the Done channel of Run's context, which ends them.
	bgMu   sync.Mutex
	bgOpen bool
	bgStop <-chan struct{}
	bgWG   sync.WaitGroup

	helperMu   sync.Mutex
	helperSeen map[string]time.Time // helper agents registered lately
	pushLocks  [pushStripes]sync.Mutex
	streams    streamBound

	followers *followers

	handler  a2asrv.RequestHandler
	jsonrpc  http.Handler // 1.0
	jsonrpc0 http.Handler // 0.3
	rest     http.Handler // 1.0
	rest0    http.Handler // 0.3
	grpc     http.Handler
}

// New returns the A2A adapter. Serve it with Mount and Run (the hub's
// adapter contract); register ReplyDeliverer and PushDeliverer's kinds
// with the relay.
func New(relay *core.Relay, opt Options) *Server {
	if opt.MaxBody <= 0 {
		opt.MaxBody = 1 << 20
	}
	if opt.ResultWait <= 0 {
		opt.ResultWait = 10 * time.Minute
	}
	if opt.BlockTimeout <= 0 {
		opt.BlockTimeout = opt.ResultWait
	}
	if opt.TaskPoll <= 0 {
		opt.TaskPoll = taskPollFirst
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	s := &Server{relay: relay, tasks: newTasks(opt.Records, relay.Clock()), opt: opt, log: opt.Logger,
		hub: core.InternalPrincipal("a2a"), helperSeen: map[string]time.Time{}}
	s.followers = newFollowers(s)
	s.tasks.onChange = s.changed
	s.tasks.announce = relay.AnnounceRecord
	s.handler = &handler{s: s}
	keep := a2asrv.WithTransportKeepAlive(15 * time.Second)
	s.jsonrpc = a2asrv.NewJSONRPCHandler(s.handler, keep)
	s.jsonrpc0 = a2av0.NewJSONRPCHandler(s.handler, keep)
	s.rest = a2asrv.NewRESTHandler(s.handler, keep)
	s.rest0 = a2av0.NewRESTHandler(s.handler, keep)
	s.grpc = newGRPC(s.handler)
	return s
}

// Name is the adapter's name (the hub's adapter contract).
func (s *Server) Name() string { return "a2a" }

// Handler returns the adapter's a2asrv.RequestHandler: every operation on
// the hub's agents, whatever the binding. The agent is the one the
// request's context names (the HTTP routes put it there from the path) or
// else the request's tenant (gRPC).
func (s *Server) Handler() a2asrv.RequestHandler { return s.handler }

// Run follows the tasks left open (after a restart, or by an instance
// that is gone), moves open tasks along, wakes the clients waiting on a
// task here when another instance announces a write of it, and deletes
// finished tasks past their keep, until ctx ends; it returns when all of
// its work, and the background work started while it ran, has ended (the
// hub's adapter contract).
func (s *Server) Run(ctx context.Context) error {
	s.bgMu.Lock()
	s.bgOpen, s.bgStop = true, ctx.Done()
	s.bgMu.Unlock()
	stopHearing := s.relay.OnRecordEvent(KindTask, s.tasks.heard)
	defer stopHearing()
	var wg sync.WaitGroup
	wg.Go(func() { s.followers.run(ctx) })
	wg.Go(func() {
		if _, err := s.followers.adopt(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("a2a: adopt open tasks", "err", err)
		}
	})
	wg.Go(func() { s.retireLoop(ctx) })
	wg.Wait()
	s.bgMu.Lock()
	s.bgOpen, s.bgStop = false, nil
	s.bgMu.Unlock()
	s.bgWG.Wait()
	return nil
}

// background runs f in a goroutine that Run waits for, with a context
// that ends when Run's does; when Run is not running (before it starts,
// after it ended, or in tests that drive the server without it) f runs at
// once with ctx, without its cancellation.
func (s *Server) background(ctx context.Context, f func(context.Context)) {
	s.bgMu.Lock()
	if !s.bgOpen {
		s.bgMu.Unlock()
		f(context.WithoutCancel(ctx))
		return
	}
	s.bgWG.Add(1)
	gctx := stopctx.Until(s.bgStop) // the hub's lifecycle owns the work
	s.bgMu.Unlock()
	go func() {
		defer s.bgWG.Done()
		f(gctx)
	}()
}
