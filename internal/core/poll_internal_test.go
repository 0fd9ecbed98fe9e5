package core

import (
	"testing"
	"time"
)

func TestPollSpacesOut(t *testing.T) {
	p := NewPoll(250*time.Millisecond, 2*time.Second)
	defer p.Stop()
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second}
	for i, w := range want {
		p.Fired()
		if p.gap != w {
			t.Fatalf("gap after %d polls: %v, want %v", i+1, p.gap, w)
		}
	}
	p.Again()
	if p.gap != 250*time.Millisecond {
		t.Fatalf("gap after Again: %v", p.gap)
	}
	p.Fired()
	if p.gap != 500*time.Millisecond {
		t.Fatalf("gap after Again and a poll: %v", p.gap)
	}
}
