package sqlite

import (
	"testing"
	"time"
)

// queue returns a request channel holding n requests.
func queue(n int) chan *op {
	ch := make(chan *op, 2*maxBatch)
	for range n {
		ch <- &op{}
	}
	return ch
}

// next runs b.next and fails the test if it does not return: each case
// below must return without outside help (a lingering batcher is given an
// hour, so returning at all shows it did not wait for the timer).
func next(t *testing.T, b *batcher) ([]*op, bool) {
	t.Helper()
	type result struct {
		n    int
		open bool
	}
	done := make(chan result, 1)
	var got []*op
	go func() {
		batch, open := b.next()
		got = batch
		done <- result{len(batch), open}
	}()
	select {
	case r := <-done:
		return got[:r.n], r.open
	case <-time.After(30 * time.Second):
		t.Fatal("batcher.next did not return")
		return nil, false
	}
}

func TestBatcherCollects(t *testing.T) {
	tests := []struct {
		name     string
		last     int // previous batch size
		queued   int // requests waiting when next is called
		later    int // requests sent one by one after next is called
		linger   time.Duration
		wantSize int
		atLeast  bool // wantSize is a minimum (requests racing in may join)
	}{
		// A quiet store commits a lone request at once (with an hour's
		// linger and nothing more coming, waiting would hang the case).
		{name: "idle commits alone", last: 0, queued: 1, linger: time.Hour, wantSize: 1},
		{name: "small previous batch does not linger", last: lingerAfter - 1, queued: 2, linger: time.Hour, wantSize: 2},
		// After a busy batch, a small one waits for more, up to lingerBelow.
		{name: "busy lingers until lingerBelow", last: lingerAfter, queued: 1, later: 40, linger: time.Hour, wantSize: lingerBelow, atLeast: true},
		{name: "busy and full enough commits at once", last: 100, queued: lingerBelow, linger: time.Hour, wantSize: lingerBelow},
		// The linger is bounded: with nothing more coming, the timer ends it.
		{name: "linger ends with the timer", last: 100, queued: 3, later: 0, linger: time.Millisecond, wantSize: 3},
		{name: "no linger configured", last: 100, queued: 3, linger: 0, wantSize: 3},
		{name: "capped at maxBatch", last: 0, queued: maxBatch + 88, linger: time.Hour, wantSize: maxBatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := queue(tt.queued)
			b := &batcher{ops: ops, quit: make(chan struct{}), linger: tt.linger, last: tt.last}
			stop := make(chan struct{})
			defer close(stop)
			if tt.later > 0 {
				go func() {
					for range tt.later {
						select {
						case ops <- &op{}:
						case <-stop:
							return
						}
						time.Sleep(50 * time.Microsecond)
					}
				}()
			}
			batch, open := next(t, b)
			if !open {
				t.Fatal("open = false, want true")
			}
			if len(batch) != tt.wantSize && !(tt.atLeast && len(batch) > tt.wantSize) {
				t.Fatalf("batch of %d, want %d", len(batch), tt.wantSize)
			}
			if b.last != len(batch) {
				t.Fatalf("last = %d, want %d", b.last, len(batch))
			}
		})
	}
}

func TestBatcherKeepsEveryRequest(t *testing.T) {
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
		batch, open := next(t, b)
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
}

func TestBatcherQuit(t *testing.T) {
	t.Run("while lingering returns what it gathered", func(t *testing.T) {
		quit := make(chan struct{})
		b := &batcher{ops: queue(2), quit: quit, linger: time.Hour, last: 100}
		time.AfterFunc(10*time.Millisecond, func() { close(quit) })
		batch, open := next(t, b)
		if open {
			t.Fatal("open = true after quit")
		}
		if len(batch) != 2 {
			t.Fatalf("batch of %d, want the 2 gathered (to commit)", len(batch))
		}
	})
	t.Run("while idle returns nothing", func(t *testing.T) {
		quit := make(chan struct{})
		close(quit)
		b := &batcher{ops: make(chan *op), quit: quit, linger: time.Hour}
		batch, open := next(t, b)
		if open || len(batch) != 0 {
			t.Fatalf("got %d, open=%v; want 0, false", len(batch), open)
		}
	})
}
