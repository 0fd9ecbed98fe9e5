package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCallerKey(t *testing.T) {
	cases := []struct {
		name   string
		p      Principal
		remote string
		key    string // Principal.Key
		caller string // CallerKey
	}{
		{"operator", Principal{Admin: true}, "10.0.0.1:5000", "admin", "admin"},
		{"agent", Principal{AgentID: "w"}, "10.0.0.1:5000", "agent:w", "agent:w"},
		{"dev mode, by address", Principal{Dev: true}, "10.0.0.1:5000", "", "addr:10.0.0.1"},
		{"dev mode, other port", Principal{Dev: true}, "10.0.0.1:6000", "", "addr:10.0.0.1"},
		{"anonymous, IPv6", Principal{}, "[::1]:7000", "", "addr:::1"},
		{"no port", Principal{}, "pipe", "", "addr:pipe"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/a2a/w", nil)
			r.RemoteAddr = tc.remote
			r = r.WithContext(With(r.Context(), tc.p))
			if got := tc.p.Key(); got != tc.key {
				t.Errorf("Key = %q, want %q", got, tc.key)
			}
			if got := CallerKey(r); got != tc.caller {
				t.Errorf("CallerKey = %q, want %q", got, tc.caller)
			}
		})
	}
}
