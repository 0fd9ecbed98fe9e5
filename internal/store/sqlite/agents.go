package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// UpsertAgent implements core.Store.
func (s *Store) UpsertAgent(ctx context.Context, a *core.Agent) (bool, error) {
	if err := core.CheckStorableAgent(a); err != nil {
		return false, err
	}
	data, err := json.Marshal(a)
	if err != nil {
		return false, fmt.Errorf("sqlite: encode agent: %w", err)
	}
	var created bool
	err = s.write(ctx, func(tx *wtx) error {
		created = false
		var reg int64
		err := tx.QueryRowContext(ctx, "SELECT registered_at FROM agents WHERE id = ?", a.ID).Scan(&reg)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			created = true
			reg = ts(a.RegisteredAt)
		case err != nil:
			return fmt.Errorf("sqlite: read agent: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO agents(id, data, expires_at, registered_at, last_seen) VALUES (?,?,?,?,?)
			ON CONFLICT(id) DO UPDATE SET data=excluded.data, expires_at=excluded.expires_at, last_seen=excluded.last_seen`,
			a.ID, data, ts(a.ExpiresAt), reg, ts(a.LastSeen)); err != nil {
			return fmt.Errorf("sqlite: write agent: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM agent_caps WHERE agent_id = ?", a.ID); err != nil {
			return fmt.Errorf("sqlite: write capabilities: %w", err)
		}
		for _, c := range capabilitySet(a) {
			if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO agent_caps(capability, agent_id) VALUES (?,?)", c, a.ID); err != nil {
				return fmt.Errorf("sqlite: write capabilities: %w", err)
			}
		}
		a.RegisteredAt = tm(reg)
		return nil
	})
	return created, err
}

// capabilitySet is what an agent can be found by: its capabilities and tools.
func capabilitySet(a *core.Agent) []string {
	out := make([]string, 0, len(a.Capabilities)+len(a.Card.Tools))
	out = append(out, a.Capabilities...)
	return append(out, a.Card.Tools...)
}

const agentCols = "data, expires_at, registered_at, last_seen"

func scanAgent(sc interface{ Scan(...any) error }) (*core.Agent, error) {
	var data []byte
	var exp, reg, seen int64
	if err := sc.Scan(&data, &exp, &reg, &seen); err != nil {
		return nil, err
	}
	a := new(core.Agent)
	if err := json.Unmarshal(data, a); err != nil {
		return nil, fmt.Errorf("sqlite: decode agent: %w", err)
	}
	a.ExpiresAt, a.RegisteredAt, a.LastSeen = tm(exp), tm(reg), tm(seen)
	return a, nil
}

// GetAgent implements core.Store.
func (s *Store) GetAgent(ctx context.Context, id string) (*core.Agent, error) {
	a, err := scanAgent(s.readRow(ctx, "SELECT "+agentCols+" FROM agents WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get agent: %w", err)
	}
	return a, nil
}

// ListAgents implements core.Store.
func (s *Store) ListAgents(ctx context.Context, f core.AgentFilter) ([]*core.Agent, error) {
	var q strings.Builder
	var args []any
	q.WriteString("SELECT " + agentCols + " FROM agents a")
	var where []string
	if f.Capability != "" {
		where = append(where, "a.id IN (SELECT agent_id FROM agent_caps WHERE capability = ?)")
		args = append(args, f.Capability)
	}
	if !f.AliveAt.IsZero() {
		where = append(where, "a.expires_at > ?")
		args = append(args, ts(f.AliveAt))
	}
	if len(where) > 0 {
		q.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	q.WriteString(" ORDER BY a.id")
	if f.Limit > 0 {
		q.WriteString(" LIMIT ?")
		args = append(args, f.Limit)
	}
	rows, err := s.read(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list agents: %w", err)
	}
	defer rows.Close()
	var out []*core.Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list agents: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// CountAgents implements core.Store.
func (s *Store) CountAgents(ctx context.Context) (int, error) {
	var n int
	if err := s.readRow(ctx, "SELECT COUNT(*) FROM agents").Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count agents: %w", err)
	}
	return n, nil
}

// RenewLease implements core.Store.
func (s *Store) RenewLease(ctx context.Context, id string, expiresAt, now time.Time) error {
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "UPDATE agents SET expires_at = ?, last_seen = ? WHERE id = ?", ts(expiresAt), ts(now), id)
		if err != nil {
			return fmt.Errorf("sqlite: renew lease: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
		}
		return nil
	})
}

// DeleteAgent implements core.Store.
func (s *Store) DeleteAgent(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM agents WHERE id = ?", id)
		if err != nil {
			return fmt.Errorf("sqlite: delete agent: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM agent_caps WHERE agent_id = ?", id); err != nil {
			return fmt.Errorf("sqlite: delete agent: %w", err)
		}
		return nil
	})
}
