// Package ssrf guards the hub's outgoing requests (callbacks, remote agent
// cards, push notifications) against server-side request forgery: the
// address is checked at connect time, after resolution, so the hub connects
// only to the address it checked (no DNS rebinding window), and redirects
// are not followed.
package ssrf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is returned (wrapped) for a refused destination.
var ErrBlocked = errors.New("destination address not allowed")

// Policy says which destinations are allowed. Globally reachable unicast
// addresses are always allowed. The ranges of the IANA IPv4 and IPv6
// special-purpose address registries decide the rest (see registry):
// link-local (which holds cloud metadata at 169.254.169.254), "this
// network", unspecified, multicast and broadcast addresses are never
// allowed; loopback and private ranges only when the policy says so; the
// other special-purpose ranges (documentation, benchmarking, reserved,
// discard-only, Teredo, ORCHIDv2, …) only when listed in Allow. Addresses
// that embed an IPv4 address (IPv4-mapped and -translated, NAT64, 6to4)
// are judged by the address they embed.
type Policy struct {
	// AllowLoopback allows 127.0.0.0/8 and ::1 (development, tests).
	AllowLoopback bool
	// AllowPrivate allows RFC 1918, shared (100.64.0.0/10), unique-local
	// and site-local IPv6, and local-use NAT64 (64:ff9b:1::/48) ranges.
	AllowPrivate bool
	// Allow lists extra prefixes that are allowed even if otherwise blocked
	// (never link-local, multicast, broadcast or "this network", nor an
	// address embedding one).
	Allow []netip.Prefix
}

// Check returns nil if the policy allows addr; otherwise an error wrapping
// ErrBlocked that names the range addr is in.
func (p Policy) Check(addr netip.Addr) error {
	return p.check(addr.WithZone(""), true)
}

func (p Policy) check(addr netip.Addr, outer bool) error {
	if !addr.IsValid() {
		return fmt.Errorf("invalid address: %w", ErrBlocked)
	}
	s, special := lookup(addr)
	var inner netip.Addr
	if special && s.v4 != nil {
		inner = s.v4(addr.As16())
	}
	if special && s.class == classNever {
		return fmt.Errorf("%s is in %s, %s: %w", addr, s.prefix, s.name, ErrBlocked)
	}
	if inner.IsValid() {
		// An embedded address that no policy allows stays refused, even
		// inside a prefix the operator allows.
		if is, ok := lookup(inner); ok && is.class == classNever {
			return fmt.Errorf("%s (%s) embeds %s, in %s, %s: %w", addr, s.name, inner, is.prefix, is.name, ErrBlocked)
		}
	}
	for _, pfx := range p.Allow {
		if pfx.Contains(addr) {
			return nil
		}
	}
	if !special {
		return nil
	}
	blocked := func(why string) error {
		return fmt.Errorf("%s is in %s, %s%s: %w", addr, s.prefix, s.name, why, ErrBlocked)
	}
	switch s.class {
	case classGlobal:
		return nil
	case classLoopback:
		if !p.AllowLoopback {
			return blocked(" (loopback is allowed only with --allow-loopback-callbacks)")
		}
		return nil
	case classPrivate:
		if !p.AllowPrivate {
			return blocked(" (private ranges are allowed only with --allow-private-callbacks)")
		}
	case classSpecial:
		return blocked(", not globally reachable")
	case classEmbedded:
		if !outer {
			return blocked(", nested")
		}
	}
	if inner.IsValid() && outer {
		if err := p.check(inner, false); err != nil {
			return fmt.Errorf("%s (%s) embeds %w", addr, s.name, err)
		}
	}
	return nil
}

// Control is a net.Dialer Control function enforcing the policy on the
// address actually being connected to.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("address %q: %w", address, ErrBlocked)
	}
	return p.Check(ap.Addr())
}

// Client returns an HTTP client that enforces the policy, follows no
// redirects and gives up after timeout.
func (p Policy) Client(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: timeout,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return fmt.Errorf("redirects are not followed: %w", ErrBlocked)
		},
	}
}

// CheckURL refuses, before any connection, a URL whose host is an address
// (or "localhost") the policy blocks, in any form a client reads as an
// address (see legacyIPv4), and a host that reads as an IPv4 address but
// is none. Other names are checked when the hub connects.
func (p Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %w", ErrBlocked)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		host = "127.0.0.1"
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(a)
	}
	// 2130706433, 0177.0.0.1, 0x7f.1, 127.1: addresses to clients, names
	// to Go (see legacyIPv4).
	if a, isIPv4, err := legacyIPv4(host); isIPv4 {
		if err != nil {
			return fmt.Errorf("host %q: %w: %w", host, err, ErrBlocked)
		}
		return p.Check(a)
	}
	return nil
}

// CheckForm checks the form of a URL the hub will call: absolute http or
// https, with a host and no credentials. field names it in the error (for
// example "callback_url"). Where it may point is the policy's business.
func CheckForm(field, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%s is not a URL", field)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s must be http or https", field)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%s must name a host", field)
	case u.User != nil:
		return fmt.Errorf("%s must not carry credentials", field)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s has port %s: want 1 to 65535", field, p)
		}
	}
	return nil
}
