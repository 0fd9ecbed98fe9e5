package ssrf

import (
	"cmp"
	"net/netip"
	"slices"
)

// class is what the policy does with an address range.
type class int

const (
	// classGlobal is globally reachable: allowed. Listed only where it
	// is an exception inside a wider special-purpose block.
	classGlobal class = iota
	// classNever is never allowed, whatever the policy: link-local (cloud
	// metadata), "this network", unspecified, multicast and broadcast.
	classNever
	// classLoopback is allowed with Policy.AllowLoopback.
	classLoopback
	// classPrivate is allowed with Policy.AllowPrivate.
	classPrivate
	// classSpecial is not globally reachable (documentation,
	// benchmarking, reserved, discard-only, identifiers that are not
	// locators, …): refused unless listed in Policy.Allow.
	classSpecial
	// classEmbedded carries an IPv4 address (translation and tunnelling
	// prefixes): the embedded address is checked in its place.
	classEmbedded
)

// special is one entry of the special-purpose address registries.
type special struct {
	prefix netip.Prefix
	name   string // what the registry calls it, with its RFC
	class  class
	// v4 extracts the embedded IPv4 address (classEmbedded, and private
	// ranges that also embed one).
	v4 func(a [16]byte) netip.Addr
}

// last32 is the IPv4 address in the last 32 bits (RFC 6052 /96 prefixes,
// SIIT).
func last32(a [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(a[12:16])) }

// sixToFour is the IPv4 address in bits 16–47 of a 6to4 address (RFC 3056).
func sixToFour(a [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(a[2:6])) }

// registry holds the IANA IPv4 and IPv6 Special-Purpose Address Registries
// (iana-ipv4-special-registry, iana-ipv6-special-registry; as of 2025), plus
// the multicast blocks, the deprecated IPv6 site-local block, and
// IPv4-compatible IPv6 addresses. An entry whose registry row says
// "Globally Reachable: True" inside a wider block that is not is listed as
// classGlobal. The most specific entry matching an address decides.
var registry = sortedRegistry([]special{
	// IPv4 (RFC 6890 and updates).
	{pfx("0.0.0.0/8"), `"this network" (RFC 791)`, classNever, nil},
	{pfx("0.0.0.0/32"), `"this host on this network" (RFC 1122)`, classNever, nil},
	{pfx("10.0.0.0/8"), "private-use (RFC 1918)", classPrivate, nil},
	{pfx("100.64.0.0/10"), "shared address space (RFC 6598)", classPrivate, nil},
	{pfx("127.0.0.0/8"), "loopback (RFC 1122)", classLoopback, nil},
	{pfx("169.254.0.0/16"), "link-local (RFC 3927; cloud metadata lives there)", classNever, nil},
	{pfx("172.16.0.0/12"), "private-use (RFC 1918)", classPrivate, nil},
	{pfx("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)", classSpecial, nil},
	{pfx("192.0.0.0/29"), "IPv4 service continuity prefix (RFC 7335)", classSpecial, nil},
	{pfx("192.0.0.8/32"), "IPv4 dummy address (RFC 7600)", classSpecial, nil},
	{pfx("192.0.0.9/32"), "port control protocol anycast (RFC 7723)", classGlobal, nil},
	{pfx("192.0.0.10/32"), "traversal using relays around NAT anycast (RFC 8155)", classGlobal, nil},
	{pfx("192.0.0.170/32"), "NAT64/DNS64 discovery (RFC 8880)", classSpecial, nil},
	{pfx("192.0.0.171/32"), "NAT64/DNS64 discovery (RFC 8880)", classSpecial, nil},
	{pfx("192.0.2.0/24"), "documentation TEST-NET-1 (RFC 5737)", classSpecial, nil},
	{pfx("192.31.196.0/24"), "AS112-v4 (RFC 7535)", classGlobal, nil},
	{pfx("192.52.193.0/24"), "AMT (RFC 7450)", classGlobal, nil},
	{pfx("192.88.99.0/24"), "deprecated 6to4 relay anycast (RFC 7526)", classSpecial, nil},
	{pfx("192.168.0.0/16"), "private-use (RFC 1918)", classPrivate, nil},
	{pfx("192.175.48.0/24"), "direct delegation AS112 service (RFC 7534)", classGlobal, nil},
	{pfx("198.18.0.0/15"), "benchmarking (RFC 2544)", classSpecial, nil},
	{pfx("198.51.100.0/24"), "documentation TEST-NET-2 (RFC 5737)", classSpecial, nil},
	{pfx("203.0.113.0/24"), "documentation TEST-NET-3 (RFC 5737)", classSpecial, nil},
	{pfx("224.0.0.0/4"), "multicast (RFC 5771)", classNever, nil},
	{pfx("240.0.0.0/4"), "reserved (RFC 1112)", classSpecial, nil},
	{pfx("255.255.255.255/32"), "limited broadcast (RFC 919)", classNever, nil},

	// IPv6 (RFC 6890 and updates).
	{pfx("::/128"), "unspecified address (RFC 4291)", classNever, nil},
	{pfx("::1/128"), "loopback address (RFC 4291)", classLoopback, nil},
	{pfx("::/96"), "deprecated IPv4-compatible address (RFC 4291)", classSpecial, nil},
	{pfx("::ffff:0:0/96"), "IPv4-mapped address (RFC 4291)", classEmbedded, last32},
	{pfx("::ffff:0:0:0/96"), "IPv4-translated address (RFC 2765)", classEmbedded, last32},
	{pfx("64:ff9b::/96"), "IPv4-IPv6 translation (RFC 6052)", classEmbedded, last32},
	{pfx("64:ff9b:1::/48"), "local-use IPv4/IPv6 translation (RFC 8215)", classPrivate, last32},
	{pfx("100::/64"), "discard-only address block (RFC 6666)", classSpecial, nil},
	{pfx("100:0:0:1::/64"), "dummy IPv6 prefix (RFC 9780)", classSpecial, nil},
	{pfx("2001::/23"), "IETF protocol assignments (RFC 2928)", classSpecial, nil},
	{pfx("2001::/32"), "TEREDO (RFC 4380; tunnels to an embedded IPv4 address)", classSpecial, nil},
	{pfx("2001:1::1/128"), "port control protocol anycast (RFC 7723)", classGlobal, nil},
	{pfx("2001:1::2/128"), "traversal using relays around NAT anycast (RFC 8155)", classGlobal, nil},
	{pfx("2001:1::3/128"), "DNS-SD service registration protocol anycast (RFC 9665)", classGlobal, nil},
	{pfx("2001:2::/48"), "benchmarking (RFC 5180)", classSpecial, nil},
	{pfx("2001:3::/32"), "AMT (RFC 7450)", classGlobal, nil},
	{pfx("2001:4:112::/48"), "AS112-v6 (RFC 7535)", classGlobal, nil},
	{pfx("2001:10::/28"), "deprecated ORCHID (RFC 4843)", classSpecial, nil},
	// ORCHIDv2 and DRIP entity tags are identifiers, not locators (the
	// registry marks them globally reachable, but nothing routes to them).
	{pfx("2001:20::/28"), "ORCHIDv2 (RFC 7343; identifiers, not routable)", classSpecial, nil},
	{pfx("2001:30::/28"), "drone remote ID protocol entity tags (RFC 9374; identifiers, not routable)", classSpecial, nil},
	{pfx("2001:db8::/32"), "documentation (RFC 3849)", classSpecial, nil},
	{pfx("2002::/16"), "6to4 (RFC 3056)", classEmbedded, sixToFour},
	{pfx("2620:4f:8000::/48"), "direct delegation AS112 service (RFC 7534)", classGlobal, nil},
	{pfx("3fff::/20"), "documentation (RFC 9637)", classSpecial, nil},
	{pfx("5f00::/16"), "segment routing (SRv6) SIDs (RFC 9602)", classSpecial, nil},
	{pfx("fc00::/7"), "unique-local (RFC 4193)", classPrivate, nil},
	{pfx("fe80::/10"), "link-local unicast (RFC 4291)", classNever, nil},
	{pfx("fec0::/10"), "deprecated site-local (RFC 3879)", classPrivate, nil},
	{pfx("ff00::/8"), "multicast (RFC 4291)", classNever, nil},
})

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// sortedRegistry orders the entries most specific first, so the first
// match is the one that decides.
func sortedRegistry(r []special) []special {
	slices.SortStableFunc(r, func(a, b special) int { return cmp.Compare(b.prefix.Bits(), a.prefix.Bits()) })
	return r
}

// lookup returns the registry entry that decides addr, if any.
func lookup(addr netip.Addr) (special, bool) {
	for _, s := range registry {
		if s.prefix.Contains(addr) {
			return s, true
		}
	}
	return special{}, false
}
