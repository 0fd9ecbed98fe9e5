package core

import (
	"fmt"
	"time"
)

// MaxFlowBuckets bounds the buckets of one FlowQuery.
const MaxFlowBuckets = 500

// FlowQuery asks a store for the message flow over a window of time cut
// into Buckets buckets of width Width, the first starting at Since.
type FlowQuery struct {
	Since   time.Time
	Width   time.Duration
	Buckets int
}

// Until is the end of q's last bucket.
func (q FlowQuery) Until() time.Time { return q.Since.Add(time.Duration(q.Buckets) * q.Width) }

// Validate refuses a query with no buckets, too many, or a width under a
// millisecond (ErrInvalid).
func (q FlowQuery) Validate() error {
	switch {
	case q.Buckets <= 0 || q.Buckets > MaxFlowBuckets:
		return fmt.Errorf("flow: %d buckets, want 1..%d: %w", q.Buckets, MaxFlowBuckets, ErrInvalid)
	case q.Width < time.Millisecond:
		return fmt.Errorf("flow: bucket width %s under 1ms: %w", q.Width, ErrInvalid)
	case q.Since.IsZero():
		return fmt.Errorf("flow: no start time: %w", ErrInvalid)
	}
	return nil
}

// FlowBucket is the stored messages' flow during one bucket of a
// FlowQuery, [Start, Start+Width).
type FlowBucket struct {
	Start time.Time `json:"start"`
	// Accepted counts the messages accepted (stored) during the bucket.
	Accepted int `json:"accepted"`
	// Delivered counts the messages delivered (or acknowledged) during
	// the bucket.
	Delivered int `json:"delivered"`
	// DeadLetters counts the messages that became dead letters (rejected,
	// or timed out undelivered) during the bucket.
	DeadLetters int `json:"dead_letters"`
	// Queued is the queue depth at the bucket's end: the messages accepted
	// before it and not ended (delivered, dead, expired) before it.
	Queued int `json:"queued"`
}
