package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
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

// HMACSigner signs every push in the Standard Webhooks format with the
// receiving agent's signing secret, derived from the hub's key so that
// every hub instance sharing the store derives the same one. The secret is
// the identity's, not the id's: it is keyed with the agent's identity
// generation (core.Agent.Generation, random), so an id deregistered and
// registered again gets a new secret that no one could derive from the
// old identity's. See package webhooksig for the wire format.
//
// The signer caches, per agent, HMACs keyed with the agent's key, so a
// push costs neither the derivation of the key nor a new HMAC; Key must
// therefore not change once the signer is in use.
type HMACSigner struct {
	Key []byte
	Now func() time.Time

	macs  sync.Map // identity (agent ID, NUL, generation) → *sync.Pool of *signingMAC
	nmacs atomic.Int64
}

// signingMAC is an HMAC-SHA256 keyed with one agent's key, reused from
// push to push, with room for its sum and the signature.
type signingMAC struct {
	mac hash.Hash
	sum [sha256.Size]byte
	sig []byte
}

// identity names an agent identity: its id and generation (ids hold no
// NUL).
func identity(agentID, generation string) string { return agentID + "\x00" + generation }

// agentKey derives the HMAC key of an agent identity from the hub's key.
// An agent registered before generations were kept (no generation) keeps
// the key its id had.
func (s *HMACSigner) agentKey(agentID, generation string) []byte {
	m := hmac.New(sha256.New, s.Key)
	if generation == "" {
		m.Write([]byte("switchboard webhook secret v2\x00" + agentID))
	} else {
		m.Write([]byte("switchboard webhook secret v3\x00" + identity(agentID, generation)))
	}
	return m.Sum(nil)
}

// SecretFor returns the signing secret ("whsec_…") of the identity
// generation of agentID.
func (s *HMACSigner) SecretFor(agentID, generation string) string {
	return webhooksig.SecretFromKey(s.agentKey(agentID, generation))
}

// Sign implements Signer: the headers of webhooksig.Sign, with the message
// id as webhook-id.
func (s *HMACSigner) Sign(req *http.Request, a *core.Agent, messageID string, body []byte) error {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	v := []string{messageID, ts, s.signature(a.ID, a.Generation, messageID, ts, body)} // one allocation for the values
	req.Header[idKey] = v[0:1:1]
	req.Header[timestampKey] = v[1:2:2]
	req.Header[signatureKey] = v[2:3:3]
	return nil
}

// The canonical forms of webhooksig's header names, as Header.Set makes
// them.
var (
	idKey        = http.CanonicalHeaderKey(webhooksig.IDHeader)
	timestampKey = http.CanonicalHeaderKey(webhooksig.TimestampHeader)
	signatureKey = http.CanonicalHeaderKey(webhooksig.SignatureHeader)
)

// signature is webhooksig.Signature for the key of the identity (agentID,
// generation), message id and timestamp ts (decimal Unix seconds).
func (s *HMACSigner) signature(agentID, generation, id, ts string, body []byte) string {
	pool := s.pool(agentID, generation)
	sm := pool.Get().(*signingMAC)
	defer pool.Put(sm)
	sm.mac.Reset()
	buf := append(append(append(append(sm.sig[:0], id...), '.'), ts...), '.')
	sm.mac.Write(buf)
	sm.mac.Write(body)
	sum := sm.mac.Sum(sm.sum[:0])
	out := append(buf[:0], "v1,"...)
	out = base64.StdEncoding.AppendEncode(out, sum)
	sm.sig = out[:0]
	return string(out)
}

// pool returns the pool of HMACs keyed with the identity's key.
func (s *HMACSigner) pool(agentID, generation string) *sync.Pool {
	ident := identity(agentID, generation)
	if p, ok := s.macs.Load(ident); ok {
		return p.(*sync.Pool)
	}
	key := s.agentKey(agentID, generation)
	p := &sync.Pool{New: func() any { return &signingMAC{mac: hmac.New(sha256.New, key)} }}
	if s.nmacs.Add(1) > maxSignerAgents {
		s.macs.Clear()
		s.nmacs.Store(1)
	}
	got, _ := s.macs.LoadOrStore(ident, p)
	return got.(*sync.Pool)
}
