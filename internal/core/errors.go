package core

import (
	"errors"
	"fmt"
)

// Kind classifies an error for the protocols: each adapter maps a kind to
// its wire shape in one place (an HTTP status and code, a JSON-RPC code, an
// MCP tool error). Match an error's kind with KindOf, or a particular
// error with errors.Is against the sentinels below.
type Kind int

// Error kinds. KindInternal is the zero value: an error that carries no kind
// is internal, and its text is not shown to callers.
const (
	KindInternal        Kind = iota // a fault of the hub or its store
	KindInvalid                     // the request is malformed or out of range
	KindUnauthenticated             // the caller proved no identity, or a stale one
	KindForbidden                   // the caller's identity may not do this
	KindNotFound                    // no such thing, or none the caller may see
	KindConflict                    // the request contradicts what is stored
	KindTooLarge                    // past a size bound
	KindUnsupported                 // a content type or media type not accepted
	KindRateLimited                 // past a rate or queue bound: retry later
	KindUnavailable                 // the hub or a dependency cannot serve now
	KindStorageFull                 // the store has no room: nothing was written
)

var kindNames = [...]string{
	KindInternal:        "internal",
	KindInvalid:         "invalid",
	KindUnauthenticated: "unauthenticated",
	KindForbidden:       "forbidden",
	KindNotFound:        "not_found",
	KindConflict:        "conflict",
	KindTooLarge:        "too_large",
	KindUnsupported:     "unsupported",
	KindRateLimited:     "rate_limited",
	KindUnavailable:     "unavailable",
	KindStorageFull:     "storage_full",
}

// String names the kind (snake case, as the docs write it).
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// kinded is an error that carries a kind.
type kinded interface {
	error
	Kind() Kind
}

// KindOf returns the kind of the first error in err's chain that carries
// one, or KindInternal.
func KindOf(err error) Kind {
	var k kinded
	if errors.As(err, &k) {
		return k.Kind()
	}
	return KindInternal
}

// sentinel is a kinded error compared by identity (errors.Is).
type sentinel struct {
	kind Kind
	text string
}

func (e *sentinel) Error() string { return e.text }
func (e *sentinel) Kind() Kind    { return e.kind }

// NewError returns a new sentinel error of kind k with text: adapters and
// stores that need an error of their own which the protocols map by kind
// make one with it.
func NewError(k Kind, text string) error { return &sentinel{kind: k, text: text} }

// Errors of the core and the stores, matched with errors.Is; each carries
// its kind (KindOf).
var (
	// ErrInvalid is a malformed request.
	ErrInvalid = NewError(KindInvalid, "invalid")
	// ErrNotFound is something unknown, or that the caller may not see:
	// the two are answered alike, so a refusal tells nothing.
	ErrNotFound = NewError(KindNotFound, "not found")
	// ErrConflict is a write that contradicts what is stored.
	ErrConflict = NewError(KindConflict, "conflict")
	// ErrIDConflict means a message id is already used by another sender,
	// or by this sender for another receiver or other content: not a retry
	// of that message.
	ErrIDConflict = NewError(KindConflict, "message id already used")
	// ErrQueueFull means the receiver's queue is at its configured depth.
	ErrQueueFull = NewError(KindRateLimited, "receiver queue full")
	// ErrStorageFull means the store has no room left (disk full): nothing
	// was written.
	ErrStorageFull = NewError(KindStorageFull, "store full")
	// ErrUnknownReceiver is a send to an id that names no agent (or none
	// the caller may send to).
	ErrUnknownReceiver = NewError(KindNotFound, "unknown receiver")
	// ErrContentType is a part kind the receiver's card does not accept.
	ErrContentType = NewError(KindUnsupported, "content type not accepted by receiver")
	// ErrTooLarge is a message past the receiver's or the hub's size bound.
	ErrTooLarge = NewError(KindTooLarge, "message too large for receiver")
	// ErrForbidden is a sender the receiver's card refuses.
	ErrForbidden = NewError(KindForbidden, "sender not allowed by receiver")
	// ErrAgentLimit refuses the registration of a new agent id when the
	// hub holds Config.MaxAgents agents.
	ErrAgentLimit = NewError(KindStorageFull, "agent limit reached")

	// ErrUnauthenticated means the caller proved no identity (or one that
	// has ended) and the operation needs one.
	ErrUnauthenticated = NewError(KindUnauthenticated, "unauthenticated")
	// ErrNotPermitted means the caller's identity may not do this.
	ErrNotPermitted = NewError(KindForbidden, "not permitted")
	// ErrReservedID refuses an id of a namespace the caller may not claim:
	// a remote agent's (x@host) or the hub's own (internal ids).
	ErrReservedID = NewError(KindForbidden, "reserved agent id")
	// ErrNotAnswerable refuses a message whose correlation_id names a
	// message its sender did not receive.
	ErrNotAnswerable = NewError(KindForbidden, "only the receiver of a message may answer it")
	// ErrNoConversation answers every refused conversation operation:
	// an unknown conversation and one the caller is not a member of look
	// the same.
	ErrNoConversation = NewError(KindNotFound, "conversation not found")
	// ErrIdentityEnded refuses a credential issued to an earlier identity
	// of an id that has since been deregistered (and perhaps registered
	// again by someone else).
	ErrIdentityEnded = NewError(KindUnauthenticated, "credential of an ended identity")
)
