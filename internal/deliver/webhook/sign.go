package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/webhooksig"
)

// maxSignerAgents bounds how many agents' signing state an HMACSigner
// keeps; past it the cache is emptied and refills with the agents in use.
const maxSignerAgents = 4096

// HMACSigner signs every push with the receiving agent's signing secret,
// derived from the hub's key so that every hub instance sharing the store
// derives the same one. See package webhooksig for the wire format.
//
// The signer caches, per agent, HMACs keyed with the agent's secret, so a
// push costs neither the derivation of the secret nor a new HMAC; Key
// must therefore not change once the signer is in use.
type HMACSigner struct {
	Key []byte
	Now func() time.Time

	macs  sync.Map // agent ID → *sync.Pool of *signingMAC
	nmacs atomic.Int64
}

// signingMAC is an HMAC-SHA256 keyed with one agent's secret, reused from
// push to push, with room for its sum and the signature.
type signingMAC struct {
	mac hash.Hash
	sum [sha256.Size]byte
	sig [len("v1=") + 2*sha256.Size]byte
}

// SecretFor returns an agent's signing secret (hex).
func (s *HMACSigner) SecretFor(agentID string) string {
	m := hmac.New(sha256.New, s.Key)
	m.Write([]byte("switchboard webhook secret\x00" + agentID))
	return hex.EncodeToString(m.Sum(nil))
}

// Sign implements Signer. The headers are those of webhooksig.Sign.
func (s *HMACSigner) Sign(req *http.Request, a *core.Agent, body []byte) error {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	v := []string{ts, s.signature(a.ID, ts, body)} // one allocation for both values
	req.Header[webhooksig.TimestampHeader] = v[0:1:1]
	req.Header[webhooksig.SignatureHeader] = v[1:2:2]
	return nil
}

// signature is webhooksig.Signature for the secret of agentID at the
// timestamp ts (decimal Unix seconds).
func (s *HMACSigner) signature(agentID, ts string, body []byte) string {
	pool := s.pool(agentID)
	sm := pool.Get().(*signingMAC)
	defer pool.Put(sm)
	sm.mac.Reset()
	sm.mac.Write(append(append(sm.sig[:0], ts...), '.'))
	sm.mac.Write(body)
	sum := sm.mac.Sum(sm.sum[:0])
	n := copy(sm.sig[:], "v1=")
	hex.Encode(sm.sig[n:], sum)
	return string(sm.sig[:])
}

// pool returns the pool of HMACs keyed with agentID's secret.
func (s *HMACSigner) pool(agentID string) *sync.Pool {
	if p, ok := s.macs.Load(agentID); ok {
		return p.(*sync.Pool)
	}
	secret := []byte(s.SecretFor(agentID))
	p := &sync.Pool{New: func() any { return &signingMAC{mac: hmac.New(sha256.New, secret)} }}
	if s.nmacs.Add(1) > maxSignerAgents {
		s.macs.Clear()
		s.nmacs.Store(1)
	}
	got, _ := s.macs.LoadOrStore(agentID, p)
	return got.(*sync.Pool)
}
