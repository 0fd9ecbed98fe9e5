package core

import (
	"context"
	"errors"
	"fmt"
)

// ListAgents lists the agents f selects to p (any credential), in id
// order: hidden agents (internal ids) only to the operator, dev mode and
// the hub. With f.Limit, it returns f.Limit agents whenever that many are
// visible to p: the hidden ones it leaves out do not take room.
func (r *Relay) ListAgents(ctx context.Context, p Principal, f AgentFilter) ([]*Agent, error) {
	if err := Authorize(p, OpListAgents, RelNone); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	if Authorize(p, OpListHidden, RelNone) == nil {
		return r.store.ListAgents(ctx, f)
	}
	want := f.Limit
	for {
		list, err := r.store.ListAgents(ctx, f)
		if err != nil {
			return nil, err
		}
		vis := visible(list)
		if want <= 0 || len(vis) >= want || len(list) < f.Limit {
			if want > 0 && len(vis) > want {
				vis = vis[:want]
			}
			return vis, nil
		}
		// Hidden agents took room in the page: read a longer one (the
		// store pages by limit only, so the reads together cost at most
		// twice the last).
		f.Limit *= 2
	}
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
