package atp

import (
	"fmt"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// TestInOrder merges a stream's pulled messages with those handed to it in
// queue order, once each.
func TestInOrder(t *testing.T) {
	msgs := func(seqs ...int64) []*core.Message {
		var ms []*core.Message
		for _, s := range seqs {
			ms = append(ms, &core.Message{ID: fmt.Sprint("m", s), Seq: s})
		}
		return ms
	}
	for _, tc := range []struct {
		name           string
		pulled, handed []*core.Message
		want           string
	}{
		{"nothing", nil, nil, "[]"},
		{"pulled only", msgs(3, 4), nil, "[m3 m4]"},
		{"handed only", nil, msgs(5, 6), "[m5 m6]"},
		{"handed before the pulled", msgs(7, 9), msgs(5, 6), "[m5 m6 m7 m9]"},
		{"interleaved", msgs(2, 5, 8), msgs(3, 4, 9), "[m2 m3 m4 m5 m8 m9]"},
		{"a lapsed hand-off pulled too", msgs(4, 6), msgs(4, 5), "[m4 m5 m6]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			for _, m := range inOrder(tc.pulled, tc.handed) {
				ids = append(ids, m.ID)
			}
			if got := fmt.Sprint(ids); got != tc.want {
				t.Errorf("inOrder = %s, want %s", got, tc.want)
			}
		})
	}
}
