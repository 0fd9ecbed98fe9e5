// Package ratelimit bounds request rates per key (an agent's credential, or
// the client address of anonymous callers) with token buckets, in bounded
// memory.
package ratelimit

import (
	"math"
	"sync"
	"time"
)

// maxKeys bounds memory: past it, idle buckets are dropped, and if none is
// idle new keys share one overflow bucket.
const maxKeys = 100000

// Limiter hands out tokens per key at Rate per second up to Burst.
type Limiter struct {
	Rate  float64
	Burst float64
	Now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	overflow  bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// New returns a limiter; rate <= 0 means unlimited.
func New(rate float64, burst int) *Limiter {
	if burst < 1 {
		burst = int(math.Max(1, rate))
	}
	return &Limiter{Rate: rate, Burst: float64(burst), buckets: map[string]*bucket{}}
}

// Allow takes a token for key. When it refuses, it says how long until a
// token is available.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	if l == nil || l.Rate <= 0 {
		return true, 0
	}
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxKeys && now.Sub(l.lastSweep) >= time.Second {
			l.sweep(now)
			l.lastSweep = now
		}
		if len(l.buckets) >= maxKeys {
			b = &l.overflow
		} else {
			b = &bucket{tokens: l.Burst, last: now}
			l.buckets[key] = b
		}
	}
	b.tokens = math.Min(l.Burst, b.tokens+now.Sub(b.last).Seconds()*l.Rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.Rate * float64(time.Second))
}

// sweep drops buckets that have refilled completely (idle keys).
func (l *Limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.Rate >= l.Burst {
			delete(l.buckets, k)
		}
	}
}

// Len is the number of keys tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
