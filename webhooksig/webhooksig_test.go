package webhooksig

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The test vector published with the Standard Webhooks specification's
// reference libraries.
func TestSignatureStandardVector(t *testing.T) {
	key, err := Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Signature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		secret string
		ok     bool
	}{
		{"whsec_c2VjcmV0", true},
		{"c2VjcmV0", true}, // the prefix is optional
		{"whsec_", false},
		{"whsec_not base64!", false},
		{"", false},
	}
	for _, tt := range tests {
		key, err := Key(tt.secret)
		if (err == nil) != tt.ok || (tt.ok && string(key) != "secret") || (!tt.ok && !errors.Is(err, ErrSecret)) {
			t.Errorf("Key(%q) = %q, %v; want ok %v", tt.secret, key, err, tt.ok)
		}
	}
	if s := NewSecret(); !strings.HasPrefix(s, SecretPrefix) {
		t.Errorf("NewSecret() = %q", s)
	} else if k, err := Key(s); err != nil || len(k) != 32 {
		t.Errorf("NewSecret's key: %d bytes, %v", len(k), err)
	}
}

func TestVerify(t *testing.T) {
	secret := SecretFromKey([]byte("0123456789abcdef0123456789abcdef"))
	other := SecretFromKey([]byte("another key entirely, 32 bytes!!"))
	body := []byte(`{"message_id":"m1"}`)
	now := time.Unix(1_800_000_000, 0)
	signed := func(sec, id string, at time.Time) *http.Request {
		r := httptest.NewRequest("POST", "/", nil)
		if err := Sign(r, sec, id, body, at); err != nil {
			t.Fatal(err)
		}
		return r
	}
	edit := func(r *http.Request, f func(http.Header)) *http.Request { f(r.Header); return r }
	cases := []struct {
		name   string
		req    *http.Request
		body   []byte
		secret string
		want   error
	}{
		{"valid", signed(secret, "m1", now), body, secret, nil},
		{"wrong secret", signed(other, "m1", now), body, secret, ErrMismatch},
		{"tampered body", signed(secret, "m1", now), []byte(`{"message_id":"m2"}`), secret, ErrMismatch},
		{"id changed", edit(signed(secret, "m1", now), func(h http.Header) { h.Set(IDHeader, "m2") }), body, secret, ErrMismatch},
		{"timestamp changed", edit(signed(secret, "m1", now), func(h http.Header) { h.Set(TimestampHeader, "1800000001") }), body, secret, ErrMismatch},
		{"timestamp not a number", edit(signed(secret, "m1", now), func(h http.Header) { h.Set(TimestampHeader, "soon") }), body, secret, ErrMismatch},
		{"too old", signed(secret, "m1", now.Add(-6*time.Minute)), body, secret, ErrStale},
		{"from the future", signed(secret, "m1", now.Add(6*time.Minute)), body, secret, ErrStale},
		{"unsigned", httptest.NewRequest("POST", "/", nil), body, secret, ErrMissing},
		{"no id", edit(signed(secret, "m1", now), func(h http.Header) { h.Del(IDHeader) }), body, secret, ErrMissing},
		{"one of several signatures matches", edit(signed(secret, "m1", now), func(h http.Header) {
			h.Set(SignatureHeader, "v1,bm90IHRoaXMgb25l "+h.Get(SignatureHeader))
		}), body, secret, nil},
		{"malformed secret", signed(secret, "m1", now), body, "whsec_???", ErrSecret},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &Verifier{Secret: []byte(c.secret), Now: func() time.Time { return now }}
			err := v.Verify(c.req, c.body)
			if (c.want == nil && err != nil) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestVerifyRefusesReplays(t *testing.T) {
	secret := NewSecret()
	now := time.Unix(1_800_000_000, 0)
	v := &Verifier{Secret: []byte(secret), Now: func() time.Time { return now }}
	body := []byte(`{}`)
	first := httptest.NewRequest("POST", "/", nil)
	if err := Sign(first, secret, "m1", body, now); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(first, body); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(first, body); !errors.Is(err, ErrReplay) {
		t.Fatalf("the same request again: %v, want ErrReplay", err)
	}
	// A redelivery of the same message, signed anew a second later, is not
	// a replay (deduplicate it by webhook-id).
	retry := httptest.NewRequest("POST", "/", nil)
	if err := Sign(retry, secret, "m1", body, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(retry, body); err != nil {
		t.Fatalf("a redelivery signed anew: %v", err)
	}
}
