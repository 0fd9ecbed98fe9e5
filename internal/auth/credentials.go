package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/cache"
	"github.com/switchboard-hub/switchboard/internal/core"
)

// recordKind is the RecordStore kind under which credentials are kept,
// keyed by the SHA-256 of the token (tokens themselves are never stored).
const recordKind = "credential"

// TokenPrefix starts every agent token, so leaked tokens are recognisable.
const TokenPrefix = "sbk_"

// Credentials issues and verifies agent tokens.
//
// Verify keeps the tokens it found in a small cache for CacheTTL, so that an
// agent sending many messages costs one store read a second rather than one
// per request. Revoke empties the cache of the agent's tokens at once; another
// instance on the same store (PostgreSQL) stops accepting a revoked token
// within CacheTTL. Unknown tokens are not cached.
type Credentials struct {
	Store core.RecordStore
	Clock core.Clock
	// CacheTTL is how long a verified token is trusted without reading the
	// store again (default DefaultCacheTTL; negative: no cache).
	CacheTTL time.Duration

	once  sync.Once
	cache *cache.TTL[string, holder] // token hash → its holder; nil: no cache
}

// holder is who a credential belongs to: an agent's identity generation.
type holder struct {
	agent      string
	generation string
}

// The stored form of a credential's holder is the agent id, then, for
// credentials issued since generations are kept, a NUL (which no agent id
// holds) and the generation.
func encodeHolder(h holder) []byte {
	if h.generation == "" {
		return []byte(h.agent)
	}
	return []byte(h.agent + "\x00" + h.generation)
}

func decodeHolder(data []byte) holder {
	agent, gen, _ := strings.Cut(string(data), "\x00")
	return holder{agent: agent, generation: gen}
}

// DefaultCacheTTL is Credentials' default CacheTTL.
const DefaultCacheTTL = time.Second

// maxCachedCreds bounds the cache; past it the cache starts over.
const maxCachedCreds = 10000

// tokens returns the token cache, or nil when it is off.
func (c *Credentials) tokens() *cache.TTL[string, holder] {
	c.once.Do(func() {
		ttl := c.CacheTTL
		if ttl == 0 {
			ttl = DefaultCacheTTL
		}
		if ttl > 0 {
			c.cache = cache.New[string, holder](ttl, maxCachedCreds)
		}
	})
	return c.cache
}

// NewToken returns a fresh random token.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return TokenPrefix + hex.EncodeToString(b[:])
}

// Hash is the stored form of a token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Issue makes a new credential for the identity generation of agentID
// (core.Agent.Generation) and returns its token. An agent may hold several
// credentials (rotation); Revoke removes them all. The relay refuses a
// credential of another generation than the id's current one (an ended
// identity's, see core.Principal.Generation).
func (c *Credentials) Issue(ctx context.Context, agentID, generation string) (string, error) {
	tok := NewToken()
	_, err := c.Store.PutRecord(ctx, core.Record{Kind: recordKind, ID: Hash(tok), Index: agentID,
		Data: encodeHolder(holder{agent: agentID, generation: generation}), UpdatedAt: c.Clock.Now()})
	if err != nil {
		return "", fmt.Errorf("issue credential: %w", err)
	}
	return tok, nil
}

// Verify returns the agent a token belongs to.
func (c *Credentials) Verify(ctx context.Context, token string) (string, error) {
	h, err := c.verifyHash(ctx, Hash(token))
	return h.agent, err
}

// verifyHash returns who holds the token whose stored form is hash: an
// agent's identity generation.
func (c *Credentials) verifyHash(ctx context.Context, hash string) (holder, error) {
	read := func() (holder, error) {
		rec, err := c.Store.GetRecord(ctx, recordKind, hash)
		if errors.Is(err, core.ErrNotFound) {
			return holder{}, fmt.Errorf("unknown token: %w", ErrUnauthenticated)
		}
		if err != nil {
			return holder{}, err
		}
		return decodeHolder(rec.Data), nil
	}
	if t := c.tokens(); t != nil {
		return t.Get(hash, read)
	}
	return read()
}

// HasAny reports whether agentID holds a credential.
func (c *Credentials) HasAny(ctx context.Context, agentID string) (bool, error) {
	recs, err := c.Store.ListRecords(ctx, recordKind, agentID, 1)
	return len(recs) > 0, err
}

// Revoke removes every credential of agentID.
func (c *Credentials) Revoke(ctx context.Context, agentID string) error {
	recs, err := c.Store.ListRecords(ctx, recordKind, agentID, 10000)
	if err != nil {
		return err
	}
	if t := c.tokens(); t != nil {
		defer t.DeleteFunc(func(_ string, h holder) bool { return h.agent == agentID })
	}
	for _, r := range recs {
		if err := c.Store.DeleteRecord(ctx, recordKind, r.ID); err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
	}
	return nil
}

// Authenticator turns a request's bearer token into a Principal.
type Authenticator struct {
	// Dev disables auth: every request is a Dev principal.
	Dev bool
	// AdminHash is Hash of the admin token.
	AdminHash string
	Creds     *Credentials
}

// Bearer extracts a bearer token from an Authorization header value.
func Bearer(h string) (string, bool) {
	const p = "bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		return strings.TrimSpace(h[len(p):]), true
	}
	return "", false
}

// Authenticate returns the principal for r. A request without a token is
// anonymous (handlers refuse what anonymous callers may not do); a request
// with an invalid token is refused with ErrUnauthenticated.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	if a.Dev {
		return core.DevPrincipal(), nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return Principal{}, nil
	}
	tok, ok := Bearer(h)
	if !ok || tok == "" {
		return Principal{}, fmt.Errorf("authorization header must be 'Bearer <token>': %w", ErrUnauthenticated)
	}
	hash := Hash(tok)
	if a.AdminHash != "" && subtle.ConstantTimeCompare([]byte(hash), []byte(a.AdminHash)) == 1 {
		return core.AdminPrincipal(), nil
	}
	holder, err := a.Creds.verifyHash(r.Context(), hash)
	if err != nil {
		return Principal{}, err
	}
	return core.AgentPrincipal(holder.agent, holder.generation), nil
}
