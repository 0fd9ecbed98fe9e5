package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// UpsertAgent implements core.Store.
func (s *Store) UpsertAgent(ctx context.Context, a *core.Agent) (bool, error) {
	if err := core.CheckStorableAgent(a); err != nil {
		return false, err
	}
	data, err := json.Marshal(a)
	if err != nil {
		return false, wrap("encode agent", err)
	}
	caps := make([]string, 0, len(a.Capabilities)+len(a.Card.Tools))
	caps = append(append(caps, a.Capabilities...), a.Card.Tools...)
	var created bool
	var reg time.Time
	// xmax is 0 for a row this statement inserted, set for one it updated.
	err = s.pool.QueryRow(ctx, `INSERT INTO agents (id, data, capabilities, expires_at, registered_at, last_seen)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET data = excluded.data, capabilities = excluded.capabilities,
			expires_at = excluded.expires_at, last_seen = excluded.last_seen
		RETURNING registered_at, xmax = 0`,
		a.ID, data, caps, a.ExpiresAt, a.RegisteredAt, a.LastSeen).Scan(&reg, &created)
	if err != nil {
		return false, wrap("write agent", err)
	}
	a.RegisteredAt = utc(reg)
	return created, nil
}

const agentCols = "data, expires_at, registered_at, last_seen"

func scanAgent(row pgx.Row) (*core.Agent, error) {
	var data []byte
	var exp, reg, seen time.Time
	if err := row.Scan(&data, &exp, &reg, &seen); err != nil {
		return nil, err
	}
	a := new(core.Agent)
	if err := json.Unmarshal(data, a); err != nil {
		return nil, wrap("decode agent", err)
	}
	a.ExpiresAt, a.RegisteredAt, a.LastSeen = utc(exp), utc(reg), utc(seen)
	return a, nil
}

// GetAgent implements core.Store.
func (s *Store) GetAgent(ctx context.Context, id string) (*core.Agent, error) {
	if !core.Storable(id) {
		return nil, fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
	}
	a, err := scanAgent(s.pool.QueryRow(ctx, "SELECT "+agentCols+" FROM agents WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get agent", err)
	}
	return a, nil
}

// ListAgents implements core.Store.
func (s *Store) ListAgents(ctx context.Context, f core.AgentFilter) ([]*core.Agent, error) {
	if !core.Storable(f.Capability) {
		return nil, nil
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Capability != "" {
		where = append(where, "capabilities @> ARRAY["+arg(f.Capability)+"::text]")
	}
	if !f.AliveAt.IsZero() {
		where = append(where, "expires_at > "+arg(f.AliveAt))
	}
	q := "SELECT " + agentCols + " FROM agents"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id"
	if f.Limit > 0 {
		q += " LIMIT " + arg(f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, wrap("list agents", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*core.Agent, error) { return scanAgent(r) })
	if err != nil {
		return nil, wrap("list agents", err)
	}
	return out, nil
}

// CountAgents implements core.Store.
func (s *Store) CountAgents(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM agents").Scan(&n); err != nil {
		return 0, wrap("count agents", err)
	}
	return n, nil
}

// RenewLease implements core.Store.
func (s *Store) RenewLease(ctx context.Context, id string, expiresAt, now time.Time) error {
	if !core.Storable(id) {
		return fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, "UPDATE agents SET expires_at = $2, last_seen = $3 WHERE id = $1", id, expiresAt, now)
	if err != nil {
		return wrap("renew lease", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
	}
	return nil
}

// DeleteAgent implements core.Store.
func (s *Store) DeleteAgent(ctx context.Context, id string) error {
	if !core.Storable(id) {
		return fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM agents WHERE id = $1", id)
	if err != nil {
		return wrap("delete agent", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
	}
	return nil
}
