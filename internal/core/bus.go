package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// EventType names what happened.
type EventType string

// Event types published on the bus.
const (
	EventAccepted     EventType = "accepted"
	EventDelivered    EventType = "delivered"
	EventRejected     EventType = "rejected"
	EventTimeout      EventType = "timeout"
	EventRetry        EventType = "retry"
	EventReplayed     EventType = "replayed"
	EventRegistered   EventType = "registered"
	EventDeregistered EventType = "deregistered"
)

// Event is one thing that happened in the relay, for live views (tail, the
// dashboard), metrics and tests.
type Event struct {
	Type           EventType     `json:"type"`
	At             time.Time     `json:"at"`
	MessageID      string        `json:"message_id,omitempty"`
	Sender         string        `json:"sender,omitempty"`
	Receiver       string        `json:"receiver,omitempty"`
	Agent          string        `json:"agent,omitempty"`
	Status         Status        `json:"status,omitempty"`
	Protocol       string        `json:"protocol,omitempty"`
	MessageType    string        `json:"message_type,omitempty"`
	ConversationID string        `json:"conversation_id,omitempty"`
	CorrelationID  string        `json:"correlation_id,omitempty"`
	Attempts       int           `json:"attempts,omitempty"`
	Code           int           `json:"code,omitempty"`
	Detail         string        `json:"detail,omitempty"`
	Error          string        `json:"error,omitempty"`
	Queued         int           `json:"queued,omitempty"`
	Latency        time.Duration `json:"latency_ns,omitempty"`
}

// Bus fans events out to subscribers. Publishing never blocks: a
// subscriber that falls behind loses events, and Dropped counts them.
type Bus struct {
	mu      sync.RWMutex
	subs    map[chan Event]struct{}
	dropped atomic.Int64
}

// NewBus makes an empty bus.
func NewBus() *Bus { return &Bus{subs: map[chan Event]struct{}{}} }

// Subscribe returns a channel of events with the given buffer and a
// function that ends the subscription.
func (b *Bus) Subscribe(buffer int) (<-chan Event, func()) {
	ch := make(chan Event, buffer)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, ch)
			b.mu.Unlock()
		})
	}
}

// Publish sends e to every subscriber that has room.
func (b *Bus) Publish(e Event) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
			b.dropped.Add(1)
		}
	}
}

// Dropped counts events lost to slow subscribers.
func (b *Bus) Dropped() int64 { return b.dropped.Load() }
