package mamp

import (
	"errors"
	"testing"
)

func TestParseURI(t *testing.T) {
	valid := []struct {
		in     string
		domain string
		id     string
	}{
		{"agent://your-domain.com/agent-123", "your-domain.com", "agent-123"},
		{"agent://Claude.AI/session-456", "claude.ai", "session-456"},
		{"agent://localhost:8080/bob", "localhost:8080", "bob"},
		{"agent://127.0.0.1/w1", "127.0.0.1", "w1"},
		{"agent://[::1]:9/w1", "[::1]:9", "w1"},
		{"agent://hub/a%2Bb", "hub", "a+b"},
		{"agent://hub/%E5%BC%A0", "hub", "张"},
		{"agent://hub/x@other.example", "hub", "x@other.example"},
	}
	for _, tt := range valid {
		u, err := ParseURI(tt.in)
		if err != nil {
			t.Errorf("ParseURI(%q): %v", tt.in, err)
			continue
		}
		if u.Domain != tt.domain || u.ID != tt.id {
			t.Errorf("ParseURI(%q) = %+v, want %s %s", tt.in, u, tt.domain, tt.id)
		}
	}
	invalid := []string{
		"", "bob", "http://host/bob", "agent:/host/bob", "agent://host", "agent://host/", "agent:///bob",
		"agent://host/a/b", "agent://user@host/bob", "agent://host/bob?x=1", "agent://host/bob#f",
		"agent://ho st/bob", "agent://-bad.com/bob", "agent://host:port/bob", "agent://host/%00", "agent://host/a%20b",
		"AGENT://host/bob", "agent://host/" + string(make([]byte, 600)),
	}
	for _, in := range invalid {
		if u, err := ParseURI(in); !errors.Is(err, ErrBadURI) {
			t.Errorf("ParseURI(%q) = %+v, %v; want ErrBadURI", in, u, err)
		}
	}
}

func TestAddressing(t *testing.T) {
	ad := Addressing{Host: "hub.test"}
	tests := []struct {
		uri    string
		id     string
		remote bool
	}{
		{"agent://hub.test/alice", "alice", false},
		{"agent://HUB.test/alice", "alice", false},
		{"agent://other.example/analyst", "analyst@other.example", true},
		{"agent://other.example:8443/analyst", "analyst@other.example:8443", true},
	}
	for _, tt := range tests {
		u, err := ParseURI(tt.uri)
		if err != nil {
			t.Fatal(err)
		}
		id, remote, err := ad.LocalID(u)
		if err != nil || id != tt.id || remote != tt.remote {
			t.Errorf("LocalID(%s) = %q %v %v, want %q %v", tt.uri, id, remote, err, tt.id, tt.remote)
		}
		// Rendering the id gives back an equivalent URI.
		back, err := ParseURI(ad.URIOf(id))
		if err != nil || back.Domain != lower(u.Domain) || back.ID != u.ID {
			t.Errorf("URIOf(%q) = %s (%v), want %s", id, ad.URIOf(id), err, tt.uri)
		}
	}
	// Local ids that are not valid agent ids are refused.
	for _, uri := range []string{"agent://hub.test/_x", "agent://hub.test/a+b", "agent://far.example/_x"} {
		u, err := ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := ad.LocalID(u); !errors.Is(err, ErrBadURI) {
			t.Errorf("LocalID(%s) err = %v, want ErrBadURI", uri, err)
		}
	}
	// An id with @ but no domain-like suffix stays local.
	if got := ad.URIOf("bob@"); got != "agent://hub.test/bob@" {
		t.Errorf("URIOf(bob@) = %s", got)
	}
	if got := ad.URIOf("x@hub.test"); got != "agent://hub.test/x@hub.test" {
		t.Errorf("URIOf(x@hub.test) = %s", got)
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}
