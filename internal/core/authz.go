package core

import (
	"fmt"
	"strings"
)

// Op is an operation the relay authorizes.
type Op int

// Operations. docs/security.md has the same table, rendered by
// AuthorizationTable; a test keeps the two equal.
const (
	OpRegisterNew        Op = iota + 1 // claim a free local id
	OpRegisterExisting                 // update or renew a registered id (register again, heartbeat)
	OpRegisterRemote                   // bind a remote id (x@host): the hub's remote-agent registration
	OpRegisterInternal                 // bind an internal id (_kind.…): the hub's own helpers
	OpDeregister                       // end an identity
	OpSendAs                           // send with sender = the agent
	OpSendToInternal                   // send to an internal id
	OpAnswerInternal                   // answer M, sent by an internal id, to that id
	OpAnswer                           // send with correlation_id = M
	OpReadReceipt                      // read M's receipt, wait for it or its results
	OpQueue                            // pull, acknowledge or stream the agent's queue
	OpCredentials                      // rotate or revoke the agent's tokens
	OpListAgents                       // list and look up agents (hidden ones left out)
	OpListHidden                       // see hidden (internal) agents in listings
	OpReadConversation                 // join, read, history, subscribe
	OpSendInConversation               // send in an existing conversation
	OpInvite                           // add an agent to a conversation
	OpListConversations                // list the conversations of an agent
	OpOperator                         // dead letters, replay, tail, remote MAMP domains
)

var opNames = map[Op]string{
	OpRegisterNew:        "register a free local id",
	OpRegisterExisting:   "re-register, heartbeat a registered id",
	OpRegisterRemote:     "register a remote id (x@host)",
	OpRegisterInternal:   "register an internal id (_…)",
	OpDeregister:         "deregister",
	OpSendAs:             "send as the agent",
	OpSendToInternal:     "send to an internal id",
	OpAnswerInternal:     "answer M from an internal id, to it",
	OpAnswer:             "answer M (correlation_id = M)",
	OpReadReceipt:        "read M, its receipt or results",
	OpQueue:              "pull, ack, stream the agent's queue",
	OpCredentials:        "rotate, revoke the agent's tokens",
	OpListAgents:         "list, look up agents",
	OpListHidden:         "see hidden agents",
	OpReadConversation:   "join, read, subscribe to a conversation",
	OpSendInConversation: "send in an existing conversation",
	OpInvite:             "invite to a conversation",
	OpListConversations:  "list the agent's conversations",
	OpOperator:           "dead letters, replay, tail",
}

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Relation is how an agent caller stands to what an operation is about.
type Relation int

// Relations. For operations on an agent id the caller is RelOwner (its own
// id, current identity) or RelNone; for a message M it is RelOwner as M's
// sender or receiver (RelReceiver for answers); for a conversation RelMember
// or RelNone.
const (
	RelNone   Relation = iota // another agent's, or not a member
	RelOwner                  // the caller's own (identity, message)
	RelMember                 // a member of the conversation
)

// Class is a caller as the authorization table's columns name it.
type Class int

// Caller classes, the columns of the table.
const (
	ClassOwner     Class = iota // an agent acting on its own
	ClassMember                 // an agent that is a member of the conversation
	ClassNonMember              // an agent that is not
	ClassOther                  // an agent acting on another agent's id or message
	ClassAdmin                  // the operator
	ClassAnonymous              // no credential
	ClassDev                    // auth off
	ClassInternal               // the hub's own actors
)

var classNames = [...]string{"owner", "member", "non-member", "other agent", "admin", "anonymous", "dev", "internal"}

func (c Class) String() string { return classNames[c] }

// verdict is a cell of the table: allowed, or refused with a kind.
type verdict struct {
	allow bool
	kind  Kind
	// na marks a cell whose class cannot occur for the operation (a member
	// of an agent id); it refuses like forbidden.
	na bool
}

var (
	yes     = verdict{allow: true}
	forbid  = verdict{kind: KindForbidden}
	unauth  = verdict{kind: KindUnauthenticated}
	hide    = verdict{kind: KindNotFound}
	na      = verdict{kind: KindForbidden, na: true}
	columns = []Class{ClassOwner, ClassMember, ClassNonMember, ClassOther, ClassAdmin, ClassAnonymous, ClassDev, ClassInternal}
)

// table is the trust model: operation × caller → verdict. Keep
// docs/security.md in step (TestAuthorizationTableDocumented).
var table = map[Op][8]verdict{
	//                      owner member  non-mem other   admin   anon    dev     internal
	OpRegisterNew:        {yes, na, na, forbid, yes, yes, yes, yes},
	OpRegisterExisting:   {yes, na, na, forbid, yes, unauth, yes, yes},
	OpRegisterRemote:     {forbid, na, na, forbid, yes, forbid, yes, yes},
	OpRegisterInternal:   {forbid, na, na, forbid, forbid, forbid, forbid, yes},
	OpDeregister:         {yes, na, na, forbid, yes, unauth, yes, yes},
	OpSendAs:             {yes, na, na, forbid, yes, unauth, yes, yes},
	OpSendToInternal:     {hide, na, na, hide, yes, unauth, yes, yes},
	OpAnswerInternal:     {yes, na, na, hide, yes, unauth, yes, yes},
	OpAnswer:             {yes, na, na, forbid, yes, unauth, yes, forbid},
	OpReadReceipt:        {yes, na, na, hide, yes, unauth, yes, yes},
	OpQueue:              {yes, na, na, forbid, yes, unauth, yes, yes},
	OpCredentials:        {yes, na, na, forbid, yes, unauth, yes, yes},
	OpListAgents:         {yes, na, na, yes, yes, unauth, yes, yes},
	OpListHidden:         {forbid, na, na, forbid, yes, unauth, yes, yes},
	OpReadConversation:   {na, yes, hide, na, yes, unauth, yes, hide},
	OpSendInConversation: {na, yes, hide, na, yes, unauth, yes, hide},
	OpInvite:             {na, yes, hide, na, yes, unauth, yes, hide},
	OpListConversations:  {yes, na, na, forbid, yes, unauth, yes, yes},
	OpOperator:           {forbid, na, na, forbid, yes, unauth, yes, yes},
}

// internalByRelation lists the operations where the hub's own actors act
// for the agent they name and are judged by that agent's relation (its
// membership, whether it received M), not as internal.
var internalByRelation = map[Op]bool{OpAnswer: true, OpReadConversation: true, OpSendInConversation: true, OpInvite: true}

// ClassOf is the column of the table for principal p standing in relation
// rel to what op is about.
func ClassOf(p Principal, op Op, rel Relation) Class {
	switch {
	case p.Dev:
		return ClassDev
	case p.Admin:
		return ClassAdmin
	case p.Internal != "" && !internalByRelation[op]:
		return ClassInternal
	case p.AgentID == "" && p.Internal == "":
		return ClassAnonymous
	}
	conv := op == OpReadConversation || op == OpSendInConversation || op == OpInvite
	switch {
	case conv && rel == RelMember:
		return ClassMember
	case conv:
		return ClassNonMember
	case rel == RelOwner:
		return ClassOwner
	}
	return ClassOther
}

// Authorize decides whether p may do op, standing in relation rel to what
// op is about. It returns nil or an error of the verdict's kind
// (ErrUnauthenticated, ErrNotPermitted, ErrNotFound or ErrNoConversation)
// wrapped with what was refused.
func Authorize(p Principal, op Op, rel Relation) error {
	row, ok := table[op]
	if !ok {
		return fmt.Errorf("authorize: unknown operation %d: %w", int(op), ErrNotPermitted)
	}
	c := ClassOf(p, op, rel)
	v := row[c]
	if v.allow {
		return nil
	}
	switch v.kind {
	case KindUnauthenticated:
		return fmt.Errorf("%s needs a credential: %w", op, ErrUnauthenticated)
	case KindNotFound:
		if op == OpReadConversation || op == OpSendInConversation || op == OpInvite {
			return ErrNoConversation
		}
		return ErrNotFound
	}
	return fmt.Errorf("%s: not for %s: %w", op, p, ErrNotPermitted)
}

// AuthorizationTable renders the table as Markdown, as docs/security.md
// shows it.
func AuthorizationTable() string {
	var b strings.Builder
	b.WriteString("| operation |")
	for _, c := range columns {
		b.WriteString(" " + c.String() + " |")
	}
	b.WriteString("\n|---|")
	for range columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for op := OpRegisterNew; op <= OpOperator; op++ {
		b.WriteString("| " + op.String() + " |")
		for _, c := range columns {
			v := table[op][c]
			cell := "yes"
			switch {
			case v.allow && c == ClassInternal && internalByRelation[op]:
				cell = "as its agent"
			case v.allow:
			case v.na:
				cell = "—"
			case v.kind == KindUnauthenticated:
				cell = "401"
			case v.kind == KindNotFound:
				cell = "404"
			default:
				cell = "403"
			}
			if c == ClassInternal && internalByRelation[op] {
				cell = "as its agent"
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}
