package proctest

import "testing"

func TestHasFlag(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--dev", "--data", "/tmp/x"}, false},
		{[]string{"--dev", "--request-log=true"}, true},
		{[]string{"--request-log"}, true},
		{[]string{"-log-level", "debug"}, true},
		{[]string{"--log-level=info"}, true},
		{[]string{"--request-logger"}, false},
		{[]string{"--", "--log-level"}, false},
	}
	for _, tt := range tests {
		if got := hasFlag(tt.args, "--request-log", "--log-level"); got != tt.want {
			t.Errorf("hasFlag(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}
