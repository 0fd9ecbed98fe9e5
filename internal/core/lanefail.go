package core

import (
	"context"
	"fmt"
	"sync"
)

// maxLaneFailures bounds the lanes whose last failure the relay remembers;
// past it the memory starts over.
const maxLaneFailures = 10000

// laneFailure is the last failed attempt on a lane.
type laneFailure struct {
	messageID string
	code      int
	err       string
}

// laneFailures remembers, per lane, the last failed delivery attempt, so
// that a message that timed out without an attempt of its own, held
// behind a head that kept failing, can say why in its dead letter.
type laneFailures struct {
	mu sync.Mutex
	m  map[Lane]laneFailure
}

// note records what a completed lane round says about the lane: a retry
// is its last failure, a delivery clears it.
func (f *laneFailures) note(lane Lane, outs []Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range outs {
		switch o.Kind {
		case OutcomeRetry:
			if f.m == nil || len(f.m) >= maxLaneFailures {
				f.m = map[Lane]laneFailure{}
			}
			f.m[lane] = laneFailure{messageID: o.MessageID, code: o.Code, err: o.Error}
		case OutcomeDelivered:
			delete(f.m, lane)
		}
	}
}

// heldBehind returns the error for message m of lane, timed out before any
// attempt of its own, or "" when the lane had no failure.
func (f *laneFailures) heldBehind(lane Lane, m *Message) (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lf, ok := f.m[lane]
	if !ok || lf.messageID == m.ID || lf.err == "" {
		return 0, ""
	}
	return lf.code, fmt.Sprintf("not attempted: held behind %s, an earlier message to the same receiver whose delivery failed: %s", lf.messageID, lf.err)
}

// DeadLetterNoter is an optional Store capability: it gives a dead letter
// that has no error of its own (it timed out before any attempt) the
// error that explains it. The relay uses it for messages the expiry sweep
// ended while they were held behind a failing message of their lane.
type DeadLetterNoter interface {
	// NoteDeadLetter sets the code and last error of message id if it is
	// terminal and has no last error yet.
	NoteDeadLetter(ctx context.Context, id string, code int, lastError string) error
}

// noteHeldBehind gives the never-attempted messages among rcs the error of
// the failing message they were held behind, in the store and in rcs.
func (r *Relay) noteHeldBehind(ctx context.Context, rcs []*Receipt) {
	noter, ok := r.store.(DeadLetterNoter)
	if !ok {
		return
	}
	for _, rc := range rcs {
		if rc.Attempts > 0 || rc.LastError != "" {
			continue
		}
		code, msg := r.laneFails.heldBehind(Lane{Receiver: rc.Receiver, Sender: rc.Sender}, &Message{ID: rc.MessageID})
		if msg == "" {
			continue
		}
		if err := noter.NoteDeadLetter(ctx, rc.MessageID, code, msg); err != nil {
			r.log.Warn("note a dead letter's error", "message_id", rc.MessageID, "err", err)
			continue
		}
		rc.Code, rc.LastError = code, msg
	}
}
