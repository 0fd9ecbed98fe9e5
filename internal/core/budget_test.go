package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func TestBudget(t *testing.T) {
	var none *core.Budget
	if !none.TryAcquire(1<<40) || !none.Room(1<<40) || none.Limit() != 0 {
		t.Error("a nil budget limits")
	}
	none.Release(5) // no panic
	if core.NewBudget(0) != nil || core.NewBudget(-1) != nil {
		t.Error("a budget of 0 or less is not nil (no limit)")
	}
	b := core.NewBudget(100)
	steps := []struct {
		op   string
		n    int64
		ok   bool
		used int64
	}{
		{"try", 60, true, 60},
		{"try", 50, false, 60},
		{"try", 40, true, 100},
		{"try", 1, false, 100},
		{"release", 40, true, 60},
		{"acquire", 70, true, 130}, // held memory is counted even past the limit
		{"try", 1, false, 130},
		{"release", 130, true, 0},
		{"try", 101, false, 0},
	}
	for i, s := range steps {
		ok := true
		switch s.op {
		case "try":
			ok = b.TryAcquire(s.n)
		case "release":
			b.Release(s.n)
		case "acquire":
			b.Acquire(s.n)
		}
		if ok != s.ok || b.Used() != s.used {
			t.Errorf("step %d %s(%d): ok %v used %d, want %v %d", i, s.op, s.n, ok, b.Used(), s.ok, s.used)
		}
	}
}

func TestBudgetAcquireWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := core.NewBudget(100)
		b.TryAcquire(80)
		got := make(chan bool, 1)
		go func() { got <- b.AcquireWait(context.Background(), 50, time.Second) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("AcquireWait returned while the budget was full")
		default:
		}
		b.Release(40) // room for 50 now
		if !<-got {
			t.Fatal("AcquireWait did not take the room released")
		}
		if b.Used() != 90 {
			t.Errorf("used %d, want 90", b.Used())
		}
		// No room within the wait: refused after it.
		start := time.Now()
		if b.AcquireWait(context.Background(), 50, time.Second) {
			t.Fatal("AcquireWait took room that never came")
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("waited %v, want the full second", waited)
		}
		// More than the whole budget is refused at once.
		if b.AcquireWait(context.Background(), 101, time.Hour) {
			t.Fatal("took more than the budget")
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { got <- b.AcquireWait(ctx, 50, time.Hour) }()
		synctest.Wait()
		cancel()
		if <-got {
			t.Fatal("AcquireWait took room after its context ended")
		}
	})
}

func TestMemorySize(t *testing.T) {
	small := &core.Message{ID: "m", Sender: "a", Receiver: "b", Parts: []core.Part{{Kind: core.PartText, Text: "hi"}}}
	big := &core.Message{ID: "m", Sender: "a", Receiver: "b", Parts: []core.Part{{Kind: core.PartText, Text: strings.Repeat("x", 1<<20)}},
		Metadata: map[string]any{"k": strings.Repeat("y", 1000), "n": []any{map[string]any{"z": "w"}}}}
	if s := core.MemorySize(small); s < 256 || s > 1024 {
		t.Errorf("small message: %d", s)
	}
	if s := core.MemorySize(big); s < 1<<20+1000 || s > 1<<20+4096 {
		t.Errorf("1 MiB message: %d", s)
	}
	bin := &core.Message{Parts: []core.Part{{Kind: core.PartImage, Bytes: make([]byte, 3000)}}}
	if s := core.MemorySize(bin); s < 4000 { // base64 in its encoding
		t.Errorf("3,000 bytes of image: %d", s)
	}
}

// TestQueueBytesQuota: a send that would take its receiver's queue past
// MaxQueueBytes is refused with ErrQueueFull and stores nothing; one that
// fits, or one to another receiver, is accepted; delivering makes room.
func TestQueueBytesQuota(t *testing.T) {
	f := newFixture(t, core.Config{MaxQueueBytes: 10000})
	f.register(t, "puller", core.EndpointPull)
	send := func(id, to string, size int) error {
		_, err := f.relay.SendAs(f.ctx, testHub, &core.Message{ID: id, Sender: "planner", Receiver: to, Type: "t", TTL: time.Hour,
			Parts: []core.Part{{Kind: core.PartText, Text: strings.Repeat("x", size)}}})
		return err
	}
	for i, c := range []struct {
		id, to string
		size   int
		full   bool
	}{
		{"a", "puller", 4000, false},
		{"b", "puller", 4000, false},
		{"c", "puller", 4000, true}, // 12,000 > 10,000
		{"d", "puller", 500, false},
		{"e", "worker", 9000, false}, // another receiver's queue
	} {
		err := send(c.id, c.to, c.size)
		if got := errors.Is(err, core.ErrQueueFull); got != c.full {
			t.Fatalf("send %d (%s, %d bytes): %v, want full=%v", i, c.id, c.size, err, c.full)
		}
	}
	if _, err := f.relay.ReceiptFor(f.ctx, core.AdminPrincipal(), "c"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("the refused message was stored: %v", err)
	}
	ms, err := f.relay.PullAs(f.ctx, core.AdminPrincipal(), "puller", 10, time.Minute, true)
	if err != nil || len(ms) != 3 {
		t.Fatalf("pull: %d, %v", len(ms), err)
	}
	// Near the quota every send reads the queue's size: the room made is
	// seen at once.
	if err := send("c", "puller", 4000); err != nil {
		t.Errorf("after the queue was pulled: %v", err)
	}
}
