package amp

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"
)

// State is the per-session motivation state persisted between ticks. It is
// plain JSON so that any store (files, the hub database) can keep it.
type State struct {
	SessionID string `json:"session_id"`
	// Owner is the credential the session belongs to ("" for none).
	Owner string `json:"owner,omitempty"`
	// Pressure is the ladder level, 0–4.
	Pressure int `json:"pressure"`
	// PeakPressure is the highest level reached in the session.
	PeakPressure int `json:"peak_pressure"`
	// Failures counts consecutive real tool failures; a real pass resets it.
	Failures int `json:"failures"`
	// TotalFailures counts every failure in the session.
	TotalFailures int `json:"total_failures"`
	// Triggers counts ticks that happened (injected or enforced something).
	Triggers int `json:"triggers"`
	// Denials counts tool calls the guard denied.
	Denials int `json:"denials"`
	// Breakthroughs counts breakthrough events.
	Breakthroughs int `json:"breakthroughs"`
	// Arena is true once the arena situation is active.
	Arena bool `json:"arena"`
	// Dream is true while the session is on a guided-exploration route.
	Dream bool `json:"dream"`
	// Role is the last selected role, or "" if none was ever selected.
	Role string `json:"role,omitempty"`
	// LastPhraseTrigger is when a phrase trigger last injected (trigger cooldown).
	LastPhraseTrigger time.Time `json:"last_phrase_trigger,omitzero"`
	// LastHappened is when a tick last happened (tick cooldown).
	LastHappened time.Time `json:"last_happened,omitzero"`
	// LastActivity is the time of the last tick of any kind.
	LastActivity time.Time `json:"last_activity,omitzero"`
	// StartedAt is the time of the session's first tick.
	StartedAt time.Time `json:"started_at,omitzero"`
	// Checkpoint is written on compaction and restored on the next start.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

// Checkpoint is what compaction protection keeps: the state at compaction
// and a summary of the agent's reasoning so far.
type Checkpoint struct {
	At       time.Time `json:"at"`
	Trigger  string    `json:"trigger,omitempty"`
	Pressure int       `json:"pressure"`
	Failures int       `json:"failures"`
	Role     string    `json:"role,omitempty"`
	Summary  string    `json:"summary,omitempty"`
}

// StateStore persists State per session. Update must be atomic per
// session: concurrent Updates for one session (even from different
// processes, for a file store) run one after another, each seeing the
// previous one's result. If fn returns an error nothing is written and
// Update returns that error.
type StateStore interface {
	// Load returns the session's state, and false if it has none.
	Load(ctx context.Context, sessionID string) (State, bool, error)
	// Update runs fn on the session's state (a zero State with SessionID
	// set if there is none) and saves the result.
	Update(ctx context.Context, sessionID string, fn func(*State) error) error
}

// ErrEmptySession is returned for an empty session id.
var ErrEmptySession = errors.New("amp: empty session id")

// MemoryStore is an in-process StateStore, safe for concurrent use.
type MemoryStore struct {
	mu       sync.Mutex
	sessions map[string]State
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{sessions: map[string]State{}} }

// Load implements StateStore.
func (m *MemoryStore) Load(_ context.Context, sessionID string) (State, bool, error) {
	if sessionID == "" {
		return State{}, false, ErrEmptySession
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.sessions[sessionID]
	return cloneState(st), ok, nil
}

// Update implements StateStore.
func (m *MemoryStore) Update(ctx context.Context, sessionID string, fn func(*State) error) error {
	if sessionID == "" {
		return ErrEmptySession
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.sessions[sessionID]
	if !ok {
		st = State{SessionID: sessionID}
	}
	st = cloneState(st)
	if err := fn(&st); err != nil {
		return err
	}
	m.sessions[sessionID] = st
	return nil
}

func cloneState(s State) State {
	if s.Checkpoint != nil {
		c := *s.Checkpoint
		s.Checkpoint = &c
	}
	return s
}

// OwnedSession returns the store key of sessionID for owner (a caller's
// principal key, such as "agent:bob"): each credential has its own
// namespace of sessions, so one caller can neither read nor drive
// another's. An empty owner (dev mode, local transports) keeps the id as
// it is. The owner's length comes first, so no two (owner, id) pairs
// share a key.
func OwnedSession(owner, sessionID string) string {
	if owner == "" {
		return sessionID
	}
	return strconv.Itoa(len(owner)) + ":" + owner + "/" + sessionID
}
