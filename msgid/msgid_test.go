package msgid

import (
	"encoding/hex"
	"testing"
	"time"
)

func TestAt(t *testing.T) {
	t0 := time.UnixMilli(1767312000123)
	for _, c := range []struct {
		name string
		a, b time.Time
	}{
		{"same millisecond", t0, t0},
		{"next millisecond", t0, t0.Add(time.Millisecond)},
		{"a day later", t0, t0.Add(24 * time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := At(c.a), At(c.b)
			for _, id := range []string{a, b} {
				raw, err := hex.DecodeString(id)
				if err != nil || len(raw) != 16 {
					t.Fatalf("%q: not 16 hex bytes", id)
				}
				if raw[6]>>4 != 7 || raw[8]>>6 != 2 {
					t.Errorf("%q: version %d variant %b, want 7 and 10", id, raw[6]>>4, raw[8]>>6)
				}
			}
			if a == b {
				t.Errorf("two ids alike: %s", a)
			}
			if c.b.After(c.a) && a[:12] >= b[:12] {
				t.Errorf("%s made before %s does not sort first", a, b)
			}
			if got := a[:12]; got != hex.EncodeToString([]byte{byte(c.a.UnixMilli() >> 40), byte(c.a.UnixMilli() >> 32),
				byte(c.a.UnixMilli() >> 24), byte(c.a.UnixMilli() >> 16), byte(c.a.UnixMilli() >> 8), byte(c.a.UnixMilli())}) {
				t.Errorf("time prefix %s", got)
			}
		})
	}
}
