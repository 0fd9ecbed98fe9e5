// Package webhooksig signs and verifies the webhooks a Switchboard hub
// pushes to agents, so an agent can tell a real delivery from a forged or
// replayed one.
//
// A signed request carries two headers:
//
//	X-Switchboard-Timestamp: 1767312000
//	X-Switchboard-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//
// The secret is the agent's signing secret, returned by the hub when the
// agent registers. A verifier refuses a signature that does not match, a
// timestamp outside its window (default five minutes), and the same
// signature seen twice within the window (a replay).
//
// In another language: read the raw body, compute the HMAC-SHA256 of
// "<timestamp>.<body>" with the secret, hex-encode it, compare it in
// constant time with the value after "v1=", and check the timestamp.
package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names.
const (
	TimestampHeader = "X-Switchboard-Timestamp"
	SignatureHeader = "X-Switchboard-Signature"
)

// Errors, matched with errors.Is.
var (
	ErrMissing  = errors.New("webhook signature missing")
	ErrMismatch = errors.New("webhook signature does not match")
	ErrStale    = errors.New("webhook timestamp outside the window")
	ErrReplay   = errors.New("webhook signature already seen")
)

// Signature computes the v1 signature of body at timestamp ts.
func Signature(secret []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Sign sets the signature headers on req for body at time now.
func Sign(req *http.Request, secret []byte, body []byte, now time.Time) {
	ts := now.Unix()
	req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	req.Header.Set(SignatureHeader, Signature(secret, ts, body))
}

// Verifier checks signed requests and remembers signatures within its
// window to refuse replays. It is safe for concurrent use.
type Verifier struct {
	Secret []byte
	// Window is how far a timestamp may be from now [5m].
	Window time.Duration
	// Now is the clock [time.Now].
	Now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time
}

// NewVerifier returns a verifier for secret.
func NewVerifier(secret []byte) *Verifier { return &Verifier{Secret: secret} }

// Verify checks r's signature over body.
func (v *Verifier) Verify(r *http.Request, body []byte) error {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	window := v.Window
	if window <= 0 {
		window = 5 * time.Minute
	}
	tsh, sigh := r.Header.Get(TimestampHeader), r.Header.Get(SignatureHeader)
	if tsh == "" || sigh == "" {
		return ErrMissing
	}
	ts, err := strconv.ParseInt(tsh, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: %w", tsh, ErrMismatch)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > window || d < -window {
		return fmt.Errorf("timestamp is %v away: %w", d.Round(time.Second), ErrStale)
	}
	want := Signature(v.Secret, ts, body)
	ok := false
	for _, s := range strings.Split(sigh, ",") { // several during secret rotation
		if hmac.Equal([]byte(strings.TrimSpace(s)), []byte(want)) {
			ok = true
		}
	}
	if !ok {
		return ErrMismatch
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string]time.Time{}
	}
	for k, at := range v.seen {
		if now.Sub(at) > 2*window {
			delete(v.seen, k)
		}
	}
	if _, dup := v.seen[want]; dup {
		return ErrReplay
	}
	v.seen[want] = now
	return nil
}
