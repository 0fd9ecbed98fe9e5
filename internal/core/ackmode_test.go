package core_test

import (
	"errors"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func TestParseAckMode(t *testing.T) {
	for _, c := range []struct {
		v       string
		autoAck bool
		ok      bool
	}{
		{"", true, true}, {"auto", true, true}, {"manual", false, true},
		{"Manual", false, false}, {"manaul", false, false}, {"none", false, false},
	} {
		autoAck, err := core.ParseAckMode(c.v)
		if autoAck != c.autoAck || (err == nil) != c.ok {
			t.Errorf("%q: %v, %v; want %v, ok %v", c.v, autoAck, err, c.autoAck, c.ok)
		}
		if err != nil && !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", c.v, err)
		}
	}
}
