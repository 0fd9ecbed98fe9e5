// Package ampstore keeps AMP session state in the hub's store (SQLite or
// PostgreSQL), so every hub instance sees the same sessions. Updates use the
// store's record versions: a concurrent update is retried on the fresh
// state, so two writers never lose each other's change.
package ampstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/core"
)

// Kind is the record kind of AMP sessions.
const Kind = "amp_session"

// maxRetries bounds optimistic retries under contention.
const maxRetries = 50

// Store is an amp.StateStore on a core.RecordStore.
type Store struct {
	Records core.RecordStore
	Clock   core.Clock
}

var _ amp.StateStore = (*Store)(nil)

// Load implements amp.StateStore.
func (s *Store) Load(ctx context.Context, sessionID string) (amp.State, bool, error) {
	if sessionID == "" {
		return amp.State{}, false, amp.ErrEmptySession
	}
	rec, err := s.Records.GetRecord(ctx, Kind, sessionID)
	if errors.Is(err, core.ErrNotFound) {
		return amp.State{}, false, nil
	}
	if err != nil {
		return amp.State{}, false, err
	}
	var st amp.State
	if err := json.Unmarshal(rec.Data, &st); err != nil {
		return amp.State{}, false, fmt.Errorf("ampstore: decode %s: %w", sessionID, err)
	}
	return st, true, nil
}

// Update implements amp.StateStore.
func (s *Store) Update(ctx context.Context, sessionID string, fn func(*amp.State) error) error {
	if sessionID == "" {
		return amp.ErrEmptySession
	}
	for i := 0; i < maxRetries; i++ {
		var st amp.State
		var version int64
		rec, err := s.Records.GetRecord(ctx, Kind, sessionID)
		switch {
		case errors.Is(err, core.ErrNotFound):
			st.SessionID = sessionID
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(rec.Data, &st); err != nil {
				return fmt.Errorf("ampstore: decode %s: %w", sessionID, err)
			}
			version = rec.Version
		}
		if err := fn(&st); err != nil {
			return err
		}
		data, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("ampstore: encode %s: %w", sessionID, err)
		}
		_, err = s.Records.PutRecord(ctx, core.Record{Kind: Kind, ID: sessionID, Data: data, Version: version, UpdatedAt: s.Clock.Now()})
		if errors.Is(err, core.ErrConflict) {
			continue // someone else updated it: run fn again on their state
		}
		return err
	}
	return fmt.Errorf("ampstore: session %s: too much contention: %w", sessionID, core.ErrConflict)
}

// Sessions lists stored sessions, most recently updated first.
func (s *Store) Sessions(ctx context.Context, limit int) ([]amp.State, error) {
	recs, err := s.Records.ListRecords(ctx, Kind, "", limit)
	if err != nil {
		return nil, err
	}
	out := make([]amp.State, 0, len(recs))
	for _, r := range recs {
		var st amp.State
		if json.Unmarshal(r.Data, &st) == nil {
			out = append(out, st)
		}
	}
	return out, nil
}
