package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/webhooksig"
)

// HMACSigner signs every push with the receiving agent's signing secret,
// derived from the hub's key so that every hub instance sharing the store
// derives the same one. See package webhooksig for the wire format.
type HMACSigner struct {
	Key []byte
	Now func() time.Time
}

// SecretFor returns an agent's signing secret (hex).
func (s *HMACSigner) SecretFor(agentID string) string {
	m := hmac.New(sha256.New, s.Key)
	m.Write([]byte("switchboard webhook secret\x00" + agentID))
	return hex.EncodeToString(m.Sum(nil))
}

// Sign implements Signer.
func (s *HMACSigner) Sign(req *http.Request, a *core.Agent, body []byte) error {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	webhooksig.Sign(req, []byte(s.SecretFor(a.ID)), body, now)
	return nil
}
