package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

func TestAllow(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(10, 5)
	l.Now = func() time.Time { return now }
	for i := 0; i < 5; i++ {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("burst token %d refused", i)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("past burst: ok=%v wait=%v", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("keys must not share buckets")
	}
	now = now.Add(100 * time.Millisecond)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("a token should have refilled after 100ms at 10/s")
	}
	if ok, _ := New(0, 0).Allow("x"); !ok {
		t.Fatal("rate 0 is unlimited")
	}
}

func TestBoundedMemory(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(1, 1)
	l.Now = func() time.Time { return now }
	for i := 0; i < maxKeys+500; i++ {
		l.Allow(fmt.Sprint(i))
	}
	if n := l.Len(); n > maxKeys {
		t.Fatalf("%d keys tracked, bound is %d", n, maxKeys)
	}
	now = now.Add(time.Hour) // every bucket refills: all idle
	l.Allow("fresh")
	if n := l.Len(); n > 2 {
		t.Fatalf("idle buckets not swept: %d", n)
	}
}
