package cache

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// reader counts its calls and returns the current value of *v.
type reader struct {
	calls int
	v     *string
	err   error
}

func (r *reader) read() (string, error) {
	r.calls++
	return *r.v, r.err
}

func TestGet(t *testing.T) {
	v := "a"
	tests := []struct {
		name      string
		ttl       time.Duration
		between   func(c *TTL[string, string]) // run between the two Gets
		err       error
		wantCalls int
		wantV     string
	}{
		{name: "fresh: read once", ttl: time.Hour, wantCalls: 1, wantV: "a"},
		{name: "expired: read again", ttl: time.Millisecond, between: func(*TTL[string, string]) { time.Sleep(time.Millisecond + 1) }, wantCalls: 2, wantV: "b"},
		{name: "not yet expired: cached", ttl: time.Millisecond, between: func(*TTL[string, string]) { time.Sleep(time.Millisecond - 1) }, wantCalls: 1, wantV: "a"},
		{name: "deleted: read again", ttl: time.Hour, between: func(c *TTL[string, string]) { c.Delete("k") }, wantCalls: 2, wantV: "b"},
		{name: "deleted by value: read again", ttl: time.Hour, between: func(c *TTL[string, string]) {
			c.DeleteFunc(func(_, v string) bool { return v == "a" })
		}, wantCalls: 2, wantV: "b"},
		{name: "another key deleted: still cached", ttl: time.Hour, between: func(c *TTL[string, string]) { c.Delete("other") }, wantCalls: 1, wantV: "a"},
		{name: "errors are not cached", ttl: time.Hour, err: errors.New("down"), wantCalls: 2, wantV: "b"},
	}
	for _, tt := range tests {
		// In a synctest bubble a sleep moves the bubble's clock: the
		// expiry case waits exactly, and not at all in real time.
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v = "a"
				c := New[string, string](tt.ttl, 10)
				r := &reader{v: &v, err: tt.err}
				if got, err := c.Get("k", r.read); got != "a" || err != tt.err {
					t.Fatalf("first Get: %q, %v", got, err)
				}
				v, r.err = "b", nil
				if tt.between != nil {
					tt.between(c)
				}
				if got, err := c.Get("k", r.read); got != tt.wantV || err != nil {
					t.Fatalf("second Get: %q, %v; want %q", got, err, tt.wantV)
				}
				if r.calls != tt.wantCalls {
					t.Errorf("%d reads, want %d", r.calls, tt.wantCalls)
				}
			})
		})
	}
}

// A read that began before a deletion answers with what it read, but does
// not cache it.
func TestDeleteDuringRead(t *testing.T) {
	for _, del := range []func(c *TTL[string, string]){
		func(c *TTL[string, string]) { c.Delete("k") },
		func(c *TTL[string, string]) { c.DeleteFunc(func(string, string) bool { return false }) },
	} {
		c := New[string, string](time.Hour, 10)
		got, _ := c.Get("k", func() (string, error) {
			del(c) // the change lands while the read is in flight
			return "old", nil
		})
		if got != "old" {
			t.Fatalf("Get: %q, want the value it read", got)
		}
		got, _ = c.Get("k", func() (string, error) { return "new", nil })
		if got != "new" {
			t.Errorf("after the deletion: %q, want a fresh read (the read in flight must not have been cached)", got)
		}
	}
}

// Deleting one key does not keep a read of another from being cached.
func TestDeleteLeavesOtherReadsCached(t *testing.T) {
	c := New[string, string](time.Hour, 10)
	_, _ = c.Get("a", func() (string, error) {
		c.Delete("b")
		return "a1", nil
	})
	if got, _ := c.Get("a", func() (string, error) { return "a2", nil }); got != "a1" {
		t.Errorf("Get(a) = %q, want the cached a1", got)
	}
	if len(c.reading) != 0 || len(c.stale) != 0 {
		t.Errorf("bookkeeping left behind: reading %v, stale %v", c.reading, c.stale)
	}
}

func TestBounded(t *testing.T) {
	c := New[int, int](time.Hour, 3)
	for i := range 10 {
		_, _ = c.Get(i, func() (int, error) { return i, nil })
		if len(c.m) > 3 {
			t.Fatalf("%d entries after %d reads, want at most 3", len(c.m), i+1)
		}
	}
}

// TestGetSharesOneRead: concurrent misses of a key wait for one read and
// share its value; a Delete during the read makes later Gets read again.
func TestGetSharesOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[string, string](time.Hour, 10)
		var calls atomic.Int32
		release := make(chan struct{})
		read := func() (string, error) {
			calls.Add(1)
			<-release
			return "v", nil
		}
		got := make(chan string, 10)
		for range 10 {
			go func() { v, _ := c.Get("k", read); got <- v }()
		}
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d reads for 10 concurrent misses, want 1", n)
		}
		close(release)
		for range 10 {
			if v := <-got; v != "v" {
				t.Fatalf("got %q", v)
			}
		}
		// Deleted while a read is in flight: the next Get does not join it.
		block := make(chan struct{})
		c.Delete("k")
		go c.Get("k", func() (string, error) { calls.Add(1); <-block; return "old", nil })
		synctest.Wait()
		c.Delete("k")
		v, _ := c.Get("k", func() (string, error) { calls.Add(1); return "new", nil })
		if v != "new" {
			t.Errorf("after a Delete during a read, Get = %q, want a fresh read", v)
		}
		close(block)
		synctest.Wait()
		if v, _ := c.Get("k", read); v == "old" {
			t.Errorf("the stale read was cached: %q", v)
		}
	})
}
