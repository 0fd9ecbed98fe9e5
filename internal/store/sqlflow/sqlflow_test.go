package sqlflow_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlflow"
)

// TestFold folds hand-made rows: messages queued before the window, ended
// in it, accepted after it, and a clock-skewed end before its acceptance.
func TestFold(t *testing.T) {
	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	q := core.FlowQuery{Since: since, Width: time.Minute, Buckets: 3}
	const queued = -2 // a message still queued has no end bucket
	tests := []struct {
		name string
		rows []sqlflow.Row
		want string // accepted/delivered/dead/queued per bucket
	}{
		{"nothing", nil, "0/0/0/0 0/0/0/0 0/0/0/0"},
		{"queued since before the window", []sqlflow.Row{{Accepted: -1, Ended: queued, All: 4}}, "0/0/0/4 0/0/0/4 0/0/0/4"},
		{"queued before, delivered in bucket 1", []sqlflow.Row{{Accepted: -1, Ended: 1, Delivered: 2, All: 2}}, "0/0/0/2 0/2/0/0 0/0/0/0"},
		{"accepted in 0, dead in 2", []sqlflow.Row{{Accepted: 0, Ended: 2, DeadLetters: 1, All: 1}}, "1/0/0/1 0/0/0/1 0/0/1/0"},
		{"accepted and expired in 1 (neither delivered nor dead)", []sqlflow.Row{{Accepted: 1, Ended: 1, All: 1}}, "0/0/0/0 1/0/0/0 0/0/0/0"},
		{"accepted after the window", []sqlflow.Row{{Accepted: 3, Ended: queued, All: 5}}, "0/0/0/0 0/0/0/0 0/0/0/0"},
		{"ended after the window", []sqlflow.Row{{Accepted: 2, Ended: 3, Delivered: 1, All: 1}}, "0/0/0/0 0/0/0/0 1/0/0/1"},
		{"an end stamped before its acceptance", []sqlflow.Row{{Accepted: 1, Ended: 0, Delivered: 1, All: 1}}, "0/1/0/0 1/0/0/0 0/0/0/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sqlflow.Fold(q, tt.rows)
			var parts []string
			for i, b := range got {
				if want := since.Add(time.Duration(i) * time.Minute); !b.Start.Equal(want) {
					t.Errorf("bucket %d starts %s, want %s", i, b.Start, want)
				}
				parts = append(parts, strings.Join([]string{strconv.Itoa(b.Accepted), strconv.Itoa(b.Delivered), strconv.Itoa(b.DeadLetters), strconv.Itoa(b.Queued)}, "/"))
			}
			if s := strings.Join(parts, " "); s != tt.want {
				t.Errorf("got %s, want %s", s, tt.want)
			}
		})
	}
}
