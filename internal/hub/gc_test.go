package hub

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestSetMemoryLimit checks that the hub sets the soft memory limit and
// the collector's heap growth only when it has a budget and the operator
// set neither through the environment.
func TestSetMemoryLimit(t *testing.T) {
	tests := []struct {
		name              string
		budget            int64
		gogc, gomemlimit  string
		wantLimit, wantGC bool
	}{
		{name: "budget", budget: 1 << 30, wantLimit: true, wantGC: true},
		{name: "no budget", budget: 0},
		{name: "GOGC set", budget: 1 << 30, gogc: "100", wantLimit: true},
		{name: "GOMEMLIMIT set", budget: 1 << 30, gomemlimit: "2GiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOGC", tt.gogc)
			t.Setenv("GOMEMLIMIT", tt.gomemlimit)
			const startGC = 123
			prevGC := debug.SetGCPercent(startGC)
			prevLimit := debug.SetMemoryLimit(math.MaxInt64)
			t.Cleanup(func() {
				debug.SetGCPercent(prevGC)
				debug.SetMemoryLimit(prevLimit)
			})
			SetMemoryLimit(tt.budget)
			gc := debug.SetGCPercent(startGC)
			limit := debug.SetMemoryLimit(-1)
			if got := gc == gcPercent; got != tt.wantGC || (!tt.wantGC && gc != startGC) {
				t.Errorf("GC percent = %d, want %d set: %v", gc, gcPercent, tt.wantGC)
			}
			if got := limit != math.MaxInt64; got != tt.wantLimit {
				t.Errorf("memory limit = %d, want set: %v", limit, tt.wantLimit)
			}
			if tt.wantLimit && (limit < tt.budget*3/4 || limit > tt.budget*3/4+(4<<30)) {
				t.Errorf("memory limit = %d, want about three quarters of %d over the process's memory", limit, tt.budget)
			}
		})
	}
}
