package sqlite

import (
	"testing"
	"testing/synctest"
	"time"
)

// The batcher tests run in synctest bubbles: its linger timer and the
// requests arriving one by one follow the bubble's clock, so each case's
// batch size and the time it took are exact, with no real waiting (an
// hour's linger passes at once when nothing else can happen).

// queue returns a request channel holding n requests.
func queue(n int) chan *op {
	ch := make(chan *op, 2*maxBatch)
	for range n {
		ch <- &op{}
	}
	return ch
}

// next runs b.next and returns its batch and how long it took on the
// bubble's clock.
func next(b *batcher) ([]*op, bool, time.Duration) {
	start := time.Now()
	batch, open := b.next()
	return batch, open, time.Since(start)
}

// gap is the time between two requests sent one by one.
const gap = 50 * time.Microsecond

func TestBatcherCollects(t *testing.T) {
	tests := []struct {
		name     string
		last     int // previous batch size
		queued   int // requests waiting when next is called
		later    int // requests sent one by one, gap apart, from when next is called
		linger   time.Duration
		wantSize int
		wantTook time.Duration
	}{
		// A quiet store commits a lone request at once, though its linger
		// is an hour.
		{name: "idle commits alone", last: 0, queued: 1, linger: time.Hour, wantSize: 1},
		{name: "small previous batch does not linger", last: lingerAfter - 1, queued: 2, linger: time.Hour, wantSize: 2},
		// After a busy batch, a small one waits for more, up to lingerBelow:
		// the first later request comes at once, then one per gap.
		{name: "busy lingers until lingerBelow", last: lingerAfter, queued: 1, later: 40, linger: time.Hour,
			wantSize: lingerBelow, wantTook: (lingerBelow - 2) * gap},
		{name: "busy and full enough commits at once", last: 100, queued: lingerBelow, linger: time.Hour, wantSize: lingerBelow},
		// The linger is bounded: with nothing more coming, the timer ends it.
		{name: "linger ends with the timer", last: 100, queued: 3, later: 0, linger: time.Millisecond, wantSize: 3, wantTook: time.Millisecond},
		{name: "no linger configured", last: 100, queued: 3, linger: 0, wantSize: 3},
		{name: "capped at maxBatch", last: 0, queued: maxBatch + 88, linger: time.Hour, wantSize: maxBatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ops := queue(tt.queued)
				b := &batcher{ops: ops, quit: make(chan struct{}), linger: tt.linger, last: tt.last}
				stop, sent := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(sent)
					for range tt.later {
						select {
						case ops <- &op{}:
						case <-stop:
							return
						}
						select {
						case <-time.After(gap):
						case <-stop:
							return
						}
					}
				}()
				defer func() { close(stop); <-sent }()
				batch, open, took := next(b)
				if !open {
					t.Fatal("open = false, want true")
				}
				if len(batch) != tt.wantSize {
					t.Fatalf("batch of %d, want %d", len(batch), tt.wantSize)
				}
				if took != tt.wantTook {
					t.Errorf("next took %v, want %v", took, tt.wantTook)
				}
				if b.last != len(batch) {
					t.Fatalf("last = %d, want %d", b.last, len(batch))
				}
			})
		})
	}
}

func TestBatcherKeepsEveryRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Requests are never dropped or repeated across batches, lingering or not.
		const total = 3*maxBatch + 7
		ops := make(chan *op, total)
		want := map[*op]bool{}
		for range total {
			o := &op{}
			want[o] = true
			ops <- o
		}
		b := &batcher{ops: ops, quit: make(chan struct{}), linger: time.Millisecond, last: lingerAfter}
		for len(want) > 0 {
			batch, open, _ := next(b)
			if !open {
				t.Fatal("closed early")
			}
			for _, o := range batch {
				if !want[o] {
					t.Fatal("request handed out twice or unknown")
				}
				delete(want, o)
			}
		}
	})
}

func TestBatcherQuit(t *testing.T) {
	t.Run("while lingering returns what it gathered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			quit := make(chan struct{})
			b := &batcher{ops: queue(2), quit: quit, linger: time.Hour, last: 100}
			time.AfterFunc(10*time.Millisecond, func() { close(quit) })
			batch, open, took := next(b)
			if open {
				t.Fatal("open = true after quit")
			}
			if len(batch) != 2 {
				t.Fatalf("batch of %d, want the 2 gathered (to commit)", len(batch))
			}
			if took != 10*time.Millisecond {
				t.Errorf("next returned %v after it was called, want at the quit, 10ms", took)
			}
		})
	})
	t.Run("while idle returns nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			quit := make(chan struct{})
			close(quit)
			b := &batcher{ops: make(chan *op), quit: quit, linger: time.Hour}
			batch, open, _ := next(b)
			if open || len(batch) != 0 {
				t.Fatalf("got %d, open=%v; want 0, false", len(batch), open)
			}
		})
	})
}
