package ssrf

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// errIPv4Host is the error for a host that reads as an IPv4 address in a
// form no address can have (a part out of range, more than four parts).
var errIPv4Host = errors.New("not a valid IPv4 address")

// legacyIPv4 reads host as the URL Standard's IPv4 parser does
// (https://url.spec.whatwg.org/#concept-ipv4-parser), as browsers, curl
// and the C library's inet_aton do: one to four dot-separated numbers,
// each decimal, octal (a leading 0) or hexadecimal (a leading 0x), the
// last filling the bytes left, so 2130706433, 0177.0.0.1, 0x7f.1 and
// 127.1 all name 127.0.0.1. Go's URL and address parsers take such hosts
// for names, so without this a policy would see a name where a client
// sees an address.
//
// isIPv4 is false when host is a name (its last part is not a number);
// otherwise err says whether the numbers make an address.
func legacyIPv4(host string) (addr netip.Addr, isIPv4 bool, err error) {
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1] // one trailing dot is allowed
	}
	if !endsInNumber(parts[len(parts)-1]) {
		return netip.Addr{}, false, nil
	}
	if len(parts) > 4 {
		return netip.Addr{}, true, errIPv4Host
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := ipv4Number(p)
		if !ok {
			return netip.Addr{}, true, errIPv4Host
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, true, errIPv4Host
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, true, errIPv4Host
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, nil
}

// endsInNumber reports whether the last part of a host makes it an IPv4
// address to the URL Standard: all decimal digits, or 0x and hex digits.
func endsInNumber(last string) bool {
	if last == "" {
		return false
	}
	if allIn(last, "0123456789") {
		return true
	}
	if len(last) >= 2 && (last[:2] == "0x" || last[:2] == "0X") {
		return allIn(last[2:], "0123456789abcdefABCDEF")
	}
	return false
}

func allIn(s, set string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(set, rune(s[i])) {
			return false
		}
	}
	return true
}

// ipv4Number parses one part of an IPv4 host: 0x… hexadecimal, 0…
// octal, else decimal; an empty number after its prefix is 0.
func ipv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
		base, p = 16, p[2:]
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	if p == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(p, base, 64)
	if err != nil || n > 1<<32 {
		return 0, false
	}
	return n, true
}
