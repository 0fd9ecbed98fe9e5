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

// Policy says which destinations are allowed. Public unicast addresses are
// always allowed; link-local (which holds cloud metadata at
// 169.254.169.254), unspecified, multicast and broadcast addresses never
// are.
type Policy struct {
	// AllowLoopback allows 127.0.0.0/8 and ::1 (development, tests).
	AllowLoopback bool
	// AllowPrivate allows RFC 1918, RFC 4193 and carrier-grade NAT ranges.
	AllowPrivate bool
	// Allow lists extra prefixes that are allowed even if otherwise blocked
	// (never link-local).
	Allow []netip.Prefix
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Check returns nil if the policy allows addr.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid():
		return fmt.Errorf("invalid address: %w", ErrBlocked)
	case addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast():
		return fmt.Errorf("%s is link-local (cloud metadata lives there): %w", addr, ErrBlocked)
	case addr.IsUnspecified() || addr.IsMulticast() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s is not a unicast address: %w", addr, ErrBlocked)
	}
	for _, pfx := range p.Allow {
		if pfx.Contains(addr) {
			return nil
		}
	}
	switch {
	case addr.IsLoopback():
		if p.AllowLoopback {
			return nil
		}
		return fmt.Errorf("%s is loopback: %w", addr, ErrBlocked)
	case addr.IsPrivate() || cgnat.Contains(addr):
		if p.AllowPrivate {
			return nil
		}
		return fmt.Errorf("%s is a private address: %w", addr, ErrBlocked)
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
// (or "localhost") the policy blocks. Other names are checked when the hub
// connects.
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
