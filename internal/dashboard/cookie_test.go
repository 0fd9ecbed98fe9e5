package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func newTestDashboard(t testing.TB, token string, ttl time.Duration) *Dashboard {
	t.Helper()
	d, err := newKeyOnly(token, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// newKeyOnly builds the signing part of a dashboard without a relay.
func newKeyOnly(token string, ttl time.Duration) (*Dashboard, error) {
	d := &Dashboard{opt: Options{AdminToken: token, SessionTTL: ttl}}
	d.key = deriveKey(token)
	return d, nil
}

func withCookie(v string) *http.Request {
	r := httptest.NewRequest("GET", "/dashboard/api/agents", nil)
	r.AddCookie(&http.Cookie{Name: CookieName, Value: v})
	return r
}

func TestCookieValidity(t *testing.T) {
	d := newTestDashboard(t, "sba_one", time.Hour)
	other := newTestDashboard(t, "sba_two", time.Hour)
	good := d.cookieValue(time.Now().Add(30 * time.Minute))
	tests := []struct {
		name  string
		value string
		ok    bool
	}{
		{"fresh", good, true},
		{"expired", d.cookieValue(time.Now().Add(-time.Second)), false},
		{"expiry beyond the session ttl", d.cookieValue(time.Now().Add(48 * time.Hour)), false},
		{"signed with another admin token", other.cookieValue(time.Now().Add(time.Minute)), false},
		{"signature cut", good[:len(good)-2], false},
		{"no signature", good[:strings.LastIndexByte(good, '.')], false},
		{"empty", "", false},
		{"admin token itself", "sba_one", false},
	}
	for _, tc := range tests {
		if got := d.validCookie(withCookie(tc.value)); got != tc.ok {
			t.Errorf("%s: valid = %v, want %v", tc.name, got, tc.ok)
		}
	}
	// A rotated admin token ends every session.
	rotated := newTestDashboard(t, "sba_rotated", time.Hour)
	if rotated.validCookie(withCookie(good)) {
		t.Error("a cookie survived an admin token rotation")
	}
}

// FuzzValidCookie: no cookie value that was not signed validates, and
// parsing never panics.
func FuzzValidCookie(f *testing.F) {
	d, _ := newKeyOnly("sba_fuzz", time.Hour)
	f.Add(d.cookieValue(time.Now().Add(time.Minute)))
	f.Add("1.2.3")
	f.Add("..")
	f.Add("99999999999.00.00")
	f.Fuzz(func(t *testing.T, v string) {
		if strings.IndexFunc(v, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune(";\"\\,", r) }) >= 0 {
			return // not a value a browser would send back
		}
		ok := d.validCookie(withCookie(v))
		if !ok {
			return
		}
		i := strings.LastIndexByte(v, '.')
		if d.sign(v[:i]) != v[i+1:] {
			t.Fatalf("%q validated without a matching signature", v)
		}
	})
}
