package webhooksig

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	secret := []byte("s3cret")
	body := []byte(`{"message_id":"m1"}`)
	now := time.Unix(1_800_000_000, 0)
	signed := func(sec []byte, at time.Time, b []byte) *httptestReq {
		r := httptest.NewRequest("POST", "/", nil)
		Sign(r, sec, b, at)
		return &httptestReq{r}
	}
	cases := []struct {
		name string
		req  *httptestReq
		body []byte
		want error
	}{
		{"valid", signed(secret, now, body), body, nil},
		{"wrong secret", signed([]byte("other"), now, body), body, ErrMismatch},
		{"tampered body", signed(secret, now, body), []byte(`{"message_id":"m2"}`), ErrMismatch},
		{"too old", signed(secret, now.Add(-6*time.Minute), body), body, ErrStale},
		{"from the future", signed(secret, now.Add(6*time.Minute), body), body, ErrStale},
		{"unsigned", &httptestReq{httptest.NewRequest("POST", "/", nil)}, body, ErrMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &Verifier{Secret: secret, Now: func() time.Time { return now }}
			if err := v.Verify(c.req.Request, c.body); !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	v := &Verifier{Secret: secret, Now: func() time.Time { return now }}
	r := signed(secret, now, body)
	if err := v.Verify(r.Request, body); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(r.Request, body); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v", err)
	}
}
