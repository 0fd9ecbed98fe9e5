package mamp

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// ErrBadURI is wrapped by every agent:// URI parse error.
var ErrBadURI = errors.New("invalid agent URI")

// URI is a parsed agent://domain/id address.
type URI struct {
	// Domain is the host part, lower-cased, with its port if any.
	Domain string
	// ID is the agent id within Domain, unescaped.
	ID string
}

// String renders the URI.
func (u URI) String() string { return "agent://" + u.Domain + "/" + url.PathEscape(u.ID) }

// maxURI bounds an agent URI's length.
const maxURI = 512

// ParseURI parses and validates an agent://domain/id URI: the scheme is
// agent, the domain is a host name or IP literal with an optional port, the
// id is one non-empty path segment of printable characters, and there is no
// user info, query or fragment.
func ParseURI(s string) (URI, error) {
	bad := func(why string) (URI, error) {
		return URI{}, fmt.Errorf("%q: %s: %w", trunc(s), why, ErrBadURI)
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > maxURI {
		return bad(fmt.Sprintf("longer than %d bytes", maxURI))
	}
	if !strings.HasPrefix(s, "agent://") {
		return bad("must start with agent://")
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad("not a URI")
	}
	switch {
	case u.User != nil:
		return bad("must not carry user info")
	case u.RawQuery != "" || u.ForceQuery:
		return bad("must not have a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return bad("must not have a fragment")
	case u.Host == "" || u.Hostname() == "":
		return bad("must name a domain")
	}
	if !validDomain(u.Hostname()) {
		return bad("domain is not a valid host name")
	}
	if p := u.Port(); p != "" && !allDigits(p) {
		return bad("port must be numeric")
	}
	id := strings.TrimPrefix(u.Path, "/")
	switch {
	case id == "":
		return bad("must name an agent id after the domain")
	case strings.Contains(id, "/"):
		return bad("agent id must be a single path segment")
	case !utf8.ValidString(id):
		return bad("agent id is not valid UTF-8")
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f {
			return bad("agent id must not contain spaces or control characters")
		}
	}
	return URI{Domain: strings.ToLower(u.Host), ID: id}, nil
}

func validDomain(h string) bool {
	if strings.Contains(h, ":") { // IPv6 literal (brackets already removed)
		for _, r := range h {
			if !(r == ':' || r == '.' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F')) {
				return false
			}
		}
		return true
	}
	return core.ValidDomain(h)
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Addressing maps agent URIs to the hub's local agent ids and back.
//
// A URI whose domain is the hub's own host names the local agent with that
// id. A URI with any other domain names a remote MAMP agent; its local id is
// "<id>@<domain>" (for example agent://other.example/analyst is the local
// agent analyst@other.example). Rendering is the reverse: an id of the form
// name@domain with a domain other than the hub's renders as
// agent://domain/name, every other id as agent://<hub host>/<id>.
type Addressing struct {
	// Host is the hub's own domain.
	Host string
}

// LocalID returns the local agent id a URI names and whether it is remote.
func (a Addressing) LocalID(u URI) (id string, remote bool, err error) {
	if strings.EqualFold(u.Domain, a.Host) {
		if !core.ValidAgentID(u.ID) {
			return "", false, fmt.Errorf("%q: agent id must be 1-128 letters, digits or ._:@- starting with a letter or digit: %w", u.String(), ErrBadURI)
		}
		return u.ID, false, nil
	}
	id = u.ID + "@" + u.Domain
	if !core.ValidAgentID(id) {
		return "", true, fmt.Errorf("%q: remote agent id %q is not addressable here (letters, digits, ._:@-, at most 128): %w", u.String(), id, ErrBadURI)
	}
	return id, true, nil
}

// URIOf renders a local agent id as its agent:// URI (core.AgentURI).
func (a Addressing) URIOf(id string) string { return core.AgentURI(a.Host, id) }
