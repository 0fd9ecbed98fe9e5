// Package webhooksig signs and verifies the webhooks a Switchboard hub
// pushes to agents, in the Standard Webhooks format
// (https://www.standardwebhooks.com), so that a receiver can tell a real
// delivery from a forged or replayed one with this package or with any
// Standard Webhooks library in another language.
//
// A signed request carries three headers:
//
//	webhook-id:        0193f1d2-…            (the message id; the same on every retry)
//	webhook-timestamp: 1767312000            (Unix seconds when this attempt was signed)
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//
// The signing secret is returned by the hub when the agent registers, as
// "whsec_" followed by the base64 of the HMAC key (Key decodes it). The
// signature header may hold several space-separated signatures (during a
// secret rotation); one matching is enough. A Verifier refuses a signature
// that does not match, a timestamp outside its window (default five
// minutes), and the same signature seen twice within the window (a replay).
// A redelivery of the same message after a failed attempt has the same
// webhook-id but a new timestamp and signature, so it passes: deduplicate
// by webhook-id (client.CallbackHandler does) to handle it once.
//
// In another language, use a Standard Webhooks library (for example the
// standardwebhooks npm or PyPI package) with the secret as given, or: read
// the raw body, base64-decode the secret after "whsec_", compute the
// HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>", base64-encode
// it (standard alphabet, padded), compare it in constant time with each
// value after "v1," in webhook-signature, and check the timestamp.
package webhooksig

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names (Standard Webhooks).
const (
	IDHeader        = "webhook-id"
	TimestampHeader = "webhook-timestamp"
	SignatureHeader = "webhook-signature"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// DefaultWindow is how far from now a Verifier accepts a timestamp.
const DefaultWindow = 5 * time.Minute

// Errors, matched with errors.Is.
var (
	ErrMissing  = errors.New("webhook signature missing")
	ErrMismatch = errors.New("webhook signature does not match")
	ErrStale    = errors.New("webhook timestamp outside the window")
	ErrReplay   = errors.New("webhook signature already seen")
	ErrSecret   = errors.New("webhook secret malformed")
)

// NewSecret returns a fresh random signing secret ("whsec_" and the base64
// of 32 random bytes).
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return SecretFromKey(key)
}

// SecretFromKey returns the signing secret of an HMAC key.
func SecretFromKey(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Key returns the HMAC key of a signing secret: the base64 after "whsec_"
// (the prefix is optional, as in the Standard Webhooks libraries).
func Key(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("want %s and base64: %w", SecretPrefix, ErrSecret)
	}
	return key, nil
}

// Signature computes the v1 signature ("v1,<base64>") of body sent as
// message id at timestamp ts, with the HMAC key key.
func Signature(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Sign sets the three headers on req for body, sent as message id at now,
// signed with the secret's key.
func Sign(req *http.Request, secret string, id string, body []byte, now time.Time) error {
	key, err := Key(secret)
	if err != nil {
		return err
	}
	ts := now.Unix()
	req.Header.Set(IDHeader, id)
	req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	req.Header.Set(SignatureHeader, Signature(key, id, ts, body))
	return nil
}

// Verifier checks signed requests and remembers signatures within its
// window to refuse replays. It is safe for concurrent use.
type Verifier struct {
	// Secret is the signing secret as the hub returned it ("whsec_…").
	Secret []byte
	// Window is how far a timestamp may be from now [DefaultWindow].
	Window time.Duration
	// Now is the clock [time.Now].
	Now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time
}

// NewVerifier returns a verifier for a signing secret ("whsec_…").
func NewVerifier(secret []byte) *Verifier { return &Verifier{Secret: secret} }

// Verify checks r's signature over body (the raw request body).
func (v *Verifier) Verify(r *http.Request, body []byte) error {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	window := v.Window
	if window <= 0 {
		window = DefaultWindow
	}
	id, tsh, sigh := r.Header.Get(IDHeader), r.Header.Get(TimestampHeader), r.Header.Get(SignatureHeader)
	if id == "" || tsh == "" || sigh == "" {
		return ErrMissing
	}
	key, err := Key(string(v.Secret))
	if err != nil {
		return err
	}
	ts, err := strconv.ParseInt(tsh, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: %w", tsh, ErrMismatch)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > window || d < -window {
		return fmt.Errorf("timestamp is %v away: %w", d.Round(time.Second), ErrStale)
	}
	want := Signature(key, id, ts, body)
	ok := false
	for _, s := range strings.Fields(sigh) { // several during a secret rotation
		if hmac.Equal([]byte(s), []byte(want)) {
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
