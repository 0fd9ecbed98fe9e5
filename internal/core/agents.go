package core

import (
	"context"
	"errors"
	"fmt"
)

// ListAgents lists the agents f selects to p (any credential): hidden
// agents (internal ids) only to the operator, dev mode and the hub. With
// f.Limit, fewer than f.Limit may come back when hidden ones were left
// out.
func (r *Relay) ListAgents(ctx context.Context, p Principal, f AgentFilter) ([]*Agent, error) {
	if err := Authorize(p, OpListAgents, RelNone); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	list, err := r.store.ListAgents(ctx, f)
	if err != nil || Authorize(p, OpListHidden, RelNone) == nil {
		return list, err
	}
	return visible(list), nil
}

// visible leaves the hidden agents out of list.
func visible(list []*Agent) []*Agent {
	out := list[:0]
	for _, a := range list {
		if !Hidden(a.ID) {
			out = append(out, a)
		}
	}
	return out
}

// LookupAgent returns agent id to p (any credential), from the relay's
// short-lived cache: callers must not modify it. A hidden agent is not
// found, except by the operator, dev mode and the hub.
func (r *Relay) LookupAgent(ctx context.Context, p Principal, id string) (*Agent, error) {
	if err := Authorize(p, OpListAgents, RelNone); err != nil {
		return nil, fmt.Errorf("look up agent %q: %w", id, err)
	}
	if Hidden(id) && Authorize(p, OpListHidden, RelNone) != nil {
		return nil, fmt.Errorf("agent %q: %w", id, ErrNotFound)
	}
	a, err := r.Agent(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("agent %q: %w", id, ErrNotFound)
	}
	return a, err
}
