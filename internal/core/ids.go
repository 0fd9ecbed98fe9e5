package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/switchboard-hub/switchboard/msgid"
)

// Namespace is the kind of an agent id.
type Namespace int

// Agent id namespaces. Each has its own rule for who may bind an id in it
// (see the authorization table).
const (
	// NamespaceLocal ids name agents registered on this hub by whoever
	// holds their credential: "worker", "planner.eu-1".
	NamespaceLocal Namespace = iota
	// NamespaceRemote ids name agents of another system reached through
	// this hub, "name@host" (MAMP renders them agent://host/name): only
	// the hub's remote-agent registration or the operator binds them.
	NamespaceRemote
	// NamespaceInternal ids name the hub's own helper agents (A2A push
	// targets, MAMP callbacks, the MCP operator identity): they start with
	// "_", which no caller's id may (ValidAgentID), are made unguessable
	// by InternalID, are bound only by the hub, receive only from the hub
	// and are hidden from every listing.
	NamespaceInternal
)

// InternalPrefix starts every internal id.
const InternalPrefix = "_"

// NamespaceOf tells the namespace of agent id.
func NamespaceOf(id string) Namespace {
	switch {
	case strings.HasPrefix(id, InternalPrefix):
		return NamespaceInternal
	case strings.Contains(id, "@"):
		return NamespaceRemote
	}
	return NamespaceLocal
}

// Hidden reports whether agent id stays out of listings, directories and
// non-admin views: the internal ids.
func Hidden(id string) bool { return NamespaceOf(id) == NamespaceInternal }

// ValidAgentID reports whether a caller may name an agent id: 1 to 128
// characters of letters, digits and ._:@-, starting with a letter or digit
// (so never an internal id).
func ValidAgentID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != ':' && c != '@' && c != '-')) {
			return false
		}
	}
	return true
}

// validInternalID reports whether id is an internal id as InternalID makes
// them: "_", a kind of letters, digits and -, ".", and hex digits.
func validInternalID(id string) bool {
	rest, ok := strings.CutPrefix(id, InternalPrefix)
	kind, key, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || kind == "" || len(key) < 32 || len(id) > 128 {
		return false
	}
	for _, c := range kind {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	_, err := hex.DecodeString(key)
	return err == nil
}

// InternalID returns the internal id of the hub's helper of kind (letters,
// digits and -) for the given parts, say a push config's task, id and URL:
// "_kind." and 32 hex digits of an HMAC-SHA256 of the parts under the
// relay's id key (Config.IDKey). The same parts give the same id on every
// instance sharing the key, and nobody without the key can tell it in
// advance.
func (r *Relay) InternalID(kind string, parts ...string) string {
	mac := hmac.New(sha256.New, r.cfg.IDKey)
	mac.Write([]byte(kind))
	for _, p := range parts {
		mac.Write([]byte{0})
		mac.Write([]byte(p))
	}
	return InternalPrefix + kind + "." + hex.EncodeToString(mac.Sum(nil)[:16])
}

// NewID returns a new message id: 32 hex digits of a UUIDv7 (RFC 9562,
// package msgid), the Unix time in milliseconds followed by 74 random
// bits. Ids that grow with time go in at the end of the stores' message-id
// index, so a commit of many new messages writes a page or two of it
// instead of a page each (BENCHMARKS.md).
func NewID() string { return msgid.New() }
