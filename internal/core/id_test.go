package core_test

import (
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func TestNewID(t *testing.T) {
	before := time.Now().UnixMilli()
	seen := map[string]bool{}
	var last string
	for i := range 10000 {
		id := core.NewID()
		b, err := hex.DecodeString(id)
		if err != nil || len(b) != 16 {
			t.Fatalf("id %q: want 32 hex digits", id)
		}
		if b[6]>>4 != 7 || b[8]>>6 != 2 {
			t.Fatalf("id %q: version %d, variant %b; want a UUIDv7 (7, 10)", id, b[6]>>4, b[8]>>6)
		}
		ms, _ := strconv.ParseInt(id[:12], 16, 64)
		if now := time.Now().UnixMilli(); ms < before || ms > now {
			t.Fatalf("id %q: time %d ms, want between %d and %d", id, ms, before, now)
		}
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
		// Ids of a later millisecond sort after those of an earlier one.
		if i > 0 && last[:12] < id[:12] && last >= id {
			t.Fatalf("id %q of a later millisecond sorts before %q", id, last)
		}
		if i > 0 && id[:12] < last[:12] {
			t.Fatalf("id %q has an earlier time than %q, made before it", id, last)
		}
		last = id
	}
}
