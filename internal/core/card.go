package core

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// CheckCard enforces the receiver card's content rules on m: accepted part
// kinds and the maximum message size.
func CheckCard(recv *Agent, m *Message) error {
	if len(recv.Card.ContentTypes) > 0 {
		for _, p := range m.Parts {
			if !acceptsKind(recv.Card.ContentTypes, p.Kind) {
				return fmt.Errorf("receiver %q does not accept %q parts (accepts %s): %w",
					recv.ID, p.Kind, strings.Join(recv.Card.ContentTypes, ", "), ErrContentType)
			}
		}
	}
	if max := recv.Card.MaxMessageSize; max > 0 {
		if n := MessageSize(m); n > max {
			return fmt.Errorf("message is %d bytes, receiver %q accepts at most %d: %w", n, recv.ID, max, ErrTooLarge)
		}
	}
	return nil
}

func acceptsKind(kinds []string, k PartKind) bool {
	for _, x := range kinds {
		if x == string(k) || x == "*" {
			return true
		}
	}
	return false
}

// MessageSize is the size of a message's content as the hub stores it.
func MessageSize(m *Message) int64 {
	var n int64
	for _, p := range m.Parts {
		n += int64(len(p.Text) + len(p.Bytes) + len(p.Data) + len(p.URL) + len(p.Name) + len(p.MediaType) + len(p.Language))
	}
	if len(m.Metadata) > 0 {
		b, _ := json.Marshal(m.Metadata)
		n += int64(len(b))
	}
	return n
}

// CheckAccess enforces the receiver card's access policy for a sender
// identified by senderURI; authenticated tells whether the sender proved its
// identity with a credential.
func CheckAccess(recv *Agent, senderURI string, authenticated bool) error {
	acc := recv.Card.Access
	if acc == nil {
		return nil
	}
	if acc.RequireAuth && !authenticated {
		return fmt.Errorf("receiver %q requires an authenticated sender: %w", recv.ID, ErrForbidden)
	}
	if acc.Public {
		return nil
	}
	for _, g := range acc.AllowedAgents {
		if ok, _ := path.Match(g, senderURI); ok || g == senderURI {
			return nil
		}
	}
	return fmt.Errorf("receiver %q does not accept messages from %s: %w", recv.ID, senderURI, ErrForbidden)
}
