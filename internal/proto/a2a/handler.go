package a2a

import (
	"context"
	"fmt"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// handler is the a2asrv.RequestHandler of the hub: each method finds the
// agent the request is for, checks what the caller may see with the
// relay's principal-taking operations, and answers with the A2A error of
// the relay's error kind (wireError).
type handler struct{ s *Server }

var _ a2asrv.RequestHandler = (*handler)(nil)

type agentKey struct{}

// withAgent returns ctx naming the agent a request is for (from its path).
func withAgent(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, agentKey{}, id)
}

type versionKey struct{}

// withVersion returns ctx carrying the A2A version a request speaks.
func withVersion(ctx context.Context, v Version) context.Context {
	return context.WithValue(ctx, versionKey{}, v)
}

// versionOf is the A2A version of the request of ctx (1.0 when unknown).
func versionOf(ctx context.Context) Version {
	if v, ok := ctx.Value(versionKey{}).(Version); ok {
		return v
	}
	return V10
}

// agent returns the agent a request is for: the one its route named, or
// else its tenant (gRPC). The caller must be allowed to look agents up;
// a hidden agent is not found.
func (s *Server) agent(ctx context.Context, tenant string) (*core.Agent, error) {
	id, _ := ctx.Value(agentKey{}).(string)
	if tenant == "" {
		tenant, _ = ctx.Value(tenantKey{}).(string)
	}
	switch {
	case id == "" && tenant == "":
		return nil, invalid("tenant (the agent's id on this hub) is required")
	case id == "":
		id = tenant
	case tenant != "" && tenant != id:
		return nil, invalid(fmt.Sprintf("tenant %q does not name this agent (%q)", tenant, id))
	}
	p := core.PrincipalFrom(ctx)
	if core.Hidden(id) {
		// Hidden agents take A2A requests from nobody, the operator
		// included: they stand for the hub's own helpers.
		return nil, wireError(ctx, fmt.Errorf("agent %q: %w", id, core.ErrNotFound))
	}
	a, err := s.relay.LookupAgent(ctx, p, id)
	if err != nil {
		return nil, wireError(ctx, err)
	}
	return a, nil
}

// visible returns task id of agent ag when the caller of ctx may see it:
// the agent whose credential created it (in the identity that created
// it, which the relay decides by the receipt of the task's first
// message), the operator, dev mode. Any other task is not found, exactly
// as one that does not exist.
func (s *Server) visible(ctx context.Context, ag *core.Agent, id string) (*TaskRecord, error) {
	if id == "" {
		return nil, invalid("the task id is required")
	}
	r, err := s.tasks.get(ctx, ag.ID, id)
	if err != nil {
		return nil, wireError(ctx, err)
	}
	if err := s.mayRead(ctx, core.PrincipalFrom(ctx), r); err != nil {
		return nil, wireError(ctx, err)
	}
	return r, nil
}

// agentSeeing returns the agent a request is for (see agent) when the
// caller of ctx may see its task id (see visible).
func (s *Server) agentSeeing(ctx context.Context, tenant, id string) (*core.Agent, error) {
	ag, err := s.agent(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if _, err := s.visible(ctx, ag, id); err != nil {
		return nil, err
	}
	return ag, nil
}

// mayRead decides whether p may see task r (see visible).
func (s *Server) mayRead(ctx context.Context, p core.Principal, r *TaskRecord) error {
	if p.Admin || p.Dev {
		return nil
	}
	notFound := fmt.Errorf("task %q: %w", r.Task.ID, ErrTaskNotFound)
	if p.AgentID == "" || r.Owner != p.AgentID || len(r.Links) == 0 {
		return notFound
	}
	rc, err := s.relay.ReceiptFor(ctx, p, r.Links[0].MessageID)
	switch {
	case core.KindOf(err) == core.KindNotFound:
		return notFound
	case err != nil:
		return err
	case rc.Sender != p.AgentID:
		return notFound
	}
	return nil
}

// GetTask implements a2asrv.RequestHandler.
func (h *handler) GetTask(ctx context.Context, req *sdk.GetTaskRequest) (*sdk.Task, error) {
	s := h.s
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, invalid("historyLength must not be negative")
	}
	ag, err := s.agentSeeing(ctx, req.Tenant, string(req.ID))
	if err != nil {
		return nil, err
	}
	r := s.reconcile(ctx, ag.ID, string(req.ID))
	if r == nil {
		return nil, wireError(ctx, fmt.Errorf("task %q: %w", req.ID, ErrTaskNotFound))
	}
	return view(r, req.HistoryLength, true), nil
}

// CancelTask implements a2asrv.RequestHandler. The task is canceled on the
// hub; its agent is not told (see docs/a2a.md).
func (h *handler) CancelTask(ctx context.Context, req *sdk.CancelTaskRequest) (*sdk.Task, error) {
	s := h.s
	ag, err := s.agentSeeing(ctx, req.Tenant, string(req.ID))
	if err != nil {
		return nil, err
	}
	r, err := s.tasks.update(ctx, ag.ID, string(req.ID), func(r *TaskRecord) error {
		if r.Task.Status.State.Terminal() {
			return sdk.NewError(sdk.ErrTaskNotCancelable, fmt.Sprintf("task %s is %s and cannot be canceled", r.Task.ID, r.Task.Status.State))
		}
		return r.SetState(sdk.TaskStateCanceled, nil, s.relay.Clock().Now())
	})
	if err != nil {
		return nil, wireError(ctx, err)
	}
	return view(r, nil, true), nil
}

// GetExtendedAgentCard implements a2asrv.RequestHandler: the hub's agents
// have no extended card.
func (h *handler) GetExtendedAgentCard(ctx context.Context, req *sdk.GetExtendedAgentCardRequest) (*sdk.AgentCard, error) {
	if _, err := h.s.agent(ctx, req.Tenant); err != nil {
		return nil, err
	}
	return nil, sdk.NewError(sdk.ErrExtendedCardNotConfigured, "this agent has no extended card")
}

// errNotFoundTask is the answer for a task the caller cannot see.
func errNotFoundTask(id sdk.TaskID) error {
	return sdk.NewError(sdk.ErrTaskNotFound, fmt.Sprintf("task %q: %v", id, ErrTaskNotFound))
}
