package ssrf

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	strict := Policy{}
	dev := Policy{AllowLoopback: true, AllowPrivate: true}
	extra := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("169.254.0.0/16")}}
	cases := []struct {
		addr   string
		policy Policy
		ok     bool
	}{
		{"93.184.216.34", strict, true},
		{"2606:4700::1111", strict, true},
		{"169.254.169.254", strict, false},
		{"169.254.169.254", dev, false},
		{"169.254.169.254", extra, false}, // never link-local, even if listed
		{"fe80::1", dev, false},
		{"fe80::1%eth0", dev, false},
		{"127.0.0.1", strict, false},
		{"127.0.0.1", dev, true},
		{"::1", strict, false},
		{"::ffff:127.0.0.1", strict, false},
		{"::ffff:127.0.0.1", dev, true},
		{"10.0.0.5", strict, false},
		{"10.0.0.5", dev, true},
		{"10.1.2.3", extra, true},
		{"10.2.2.3", extra, false},
		{"192.168.1.1", strict, false},
		{"172.16.0.1", strict, false},
		{"100.64.0.1", strict, false},
		{"fd00::1", strict, false},
		{"0.0.0.0", dev, false},
		{"224.0.0.1", dev, false},
		{"255.255.255.255", dev, false},
	}
	for _, c := range cases {
		err := c.policy.Check(netip.MustParseAddr(c.addr))
		if (err == nil) != c.ok {
			t.Errorf("%s with %+v: err=%v, want ok=%v", c.addr, c.policy, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: error not ErrBlocked: %v", c.addr, err)
		}
	}
}

// TestSpecialPurposeRanges checks an address at each end of every range of
// the IANA IPv4 and IPv6 special-purpose address registries (and the
// multicast, site-local and IPv4-compatible blocks) under the strict
// policy, the development policy (loopback and private allowed) and a
// policy that lists the range in Allow. The expectations are written out
// here, not derived from the registry table.
func TestSpecialPurposeRanges(t *testing.T) {
	type want int
	const (
		public   want = iota // allowed by every policy
		never                // refused by every policy, even when listed in Allow
		loopback             // allowed with AllowLoopback (and when listed)
		private              // allowed with AllowPrivate (and when listed)
		special              // refused unless listed in Allow
	)
	cases := []struct {
		name  string
		addrs []string
		want  want
		allow string // the prefix an operator would list to allow it
	}{
		// IPv4 special-purpose registry.
		{"this network", []string{"0.0.0.0", "0.1.2.3", "0.255.255.255"}, never, "0.0.0.0/8"},
		{"private 10/8", []string{"10.0.0.0", "10.255.255.255"}, private, "10.0.0.0/8"},
		{"shared address space", []string{"100.64.0.0", "100.100.100.200", "100.127.255.255"}, private, "100.64.0.0/10"},
		{"below shared", []string{"100.63.255.255"}, public, ""},
		{"above shared", []string{"100.128.0.0"}, public, ""},
		{"loopback", []string{"127.0.0.0", "127.0.0.1", "127.255.255.255"}, loopback, "127.0.0.0/8"},
		{"link-local", []string{"169.254.0.0", "169.254.169.254", "169.254.255.255"}, never, "169.254.0.0/16"},
		{"private 172.16/12", []string{"172.16.0.0", "172.31.255.255"}, private, "172.16.0.0/12"},
		{"outside 172.16/12", []string{"172.15.255.255", "172.32.0.0"}, public, ""},
		{"IETF protocol assignments", []string{"192.0.0.0", "192.0.0.7", "192.0.0.8", "192.0.0.11", "192.0.0.170", "192.0.0.171", "192.0.0.255"}, special, "192.0.0.0/24"},
		{"PCP and TURN anycast", []string{"192.0.0.9", "192.0.0.10"}, public, ""},
		{"TEST-NET-1", []string{"192.0.2.0", "192.0.2.255"}, special, "192.0.2.0/24"},
		{"AS112-v4", []string{"192.31.196.1"}, public, ""},
		{"AMT", []string{"192.52.193.1"}, public, ""},
		{"6to4 relay anycast", []string{"192.88.99.0", "192.88.99.255"}, special, "192.88.99.0/24"},
		{"private 192.168/16", []string{"192.168.0.0", "192.168.255.255"}, private, "192.168.0.0/16"},
		{"AS112 direct delegation", []string{"192.175.48.1"}, public, ""},
		{"benchmarking", []string{"198.18.0.0", "198.18.0.1", "198.19.255.255"}, special, "198.18.0.0/15"},
		{"around benchmarking", []string{"198.17.255.255", "198.20.0.0"}, public, ""},
		{"TEST-NET-2", []string{"198.51.100.0", "198.51.100.255"}, special, "198.51.100.0/24"},
		{"TEST-NET-3", []string{"203.0.113.0", "203.0.113.255"}, special, "203.0.113.0/24"},
		{"multicast", []string{"224.0.0.0", "239.255.255.255"}, never, "224.0.0.0/4"},
		{"reserved", []string{"240.0.0.0", "250.1.2.3", "255.255.255.254"}, special, "240.0.0.0/4"},
		{"broadcast", []string{"255.255.255.255"}, never, "255.255.255.255/32"},

		// IPv6 special-purpose registry.
		{"unspecified", []string{"::"}, never, "::/128"},
		{"loopback v6", []string{"::1"}, loopback, "::1/128"},
		{"IPv4-compatible", []string{"::2", "::808:808", "::a00:1"}, special, "::/96"},
		{"IPv4-mapped public", []string{"::ffff:8.8.8.8"}, public, ""},
		{"IPv4-mapped loopback", []string{"::ffff:127.0.0.1"}, loopback, "::ffff:0:0/96"},
		{"IPv4-mapped private", []string{"::ffff:10.0.0.1"}, private, "::ffff:0:0/96"},
		{"IPv4-mapped metadata", []string{"::ffff:169.254.169.254"}, never, "::ffff:0:0/96"},
		{"IPv4-mapped benchmarking", []string{"::ffff:198.18.0.1"}, special, "::ffff:0:0/96"},
		{"IPv4-translated public", []string{"::ffff:0:8.8.8.8"}, public, ""},
		{"IPv4-translated loopback", []string{"::ffff:0:127.0.0.1"}, loopback, "::ffff:0:0:0/96"},
		{"IPv4-translated metadata", []string{"::ffff:0:169.254.169.254"}, never, "::ffff:0:0:0/96"},
		{"NAT64 public", []string{"64:ff9b::8.8.8.8", "64:ff9b::1.1.1.1"}, public, ""},
		{"NAT64 loopback", []string{"64:ff9b::127.0.0.1", "64:ff9b::7f00:1"}, loopback, "64:ff9b::/96"},
		{"NAT64 private", []string{"64:ff9b::10.0.0.1", "64:ff9b::192.168.1.1", "64:ff9b::100.64.0.1"}, private, "64:ff9b::/96"},
		{"NAT64 metadata", []string{"64:ff9b::169.254.169.254", "64:ff9b::a9fe:a9fe"}, never, "64:ff9b::/96"},
		{"NAT64 reserved and benchmarking", []string{"64:ff9b::240.0.0.1", "64:ff9b::198.18.0.1"}, special, "64:ff9b::/96"},
		{"local-use NAT64", []string{"64:ff9b:1::808:808", "64:ff9b:1::8.8.8.8", "64:ff9b:1:ffff:ffff:ffff:808:404"}, private, "64:ff9b:1::/48"},
		{"local-use NAT64 metadata", []string{"64:ff9b:1::169.254.169.254"}, never, "64:ff9b:1::/48"},
		{"discard-only", []string{"100::", "100::ffff:ffff:ffff:ffff"}, special, "100::/64"},
		{"dummy prefix", []string{"100:0:0:1::", "100:0:0:1:ffff:ffff:ffff:ffff"}, special, "100:0:0:1::/64"},
		{"IETF protocol assignments v6", []string{"2001:5::1", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff"}, special, "2001::/23"},
		{"Teredo", []string{"2001::", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff"}, special, "2001::/32"},
		{"v6 PCP, TURN and DNS-SD anycast", []string{"2001:1::1", "2001:1::2", "2001:1::3"}, public, ""},
		{"around the anycast addresses", []string{"2001:1::4", "2001:1::"}, special, "2001::/23"},
		{"benchmarking v6", []string{"2001:2::", "2001:2:0:ffff:ffff:ffff:ffff:ffff"}, special, "2001:2::/48"},
		{"AMT v6", []string{"2001:3::1", "2001:3:ffff::1"}, public, ""},
		{"AS112-v6", []string{"2001:4:112::1"}, public, ""},
		{"ORCHID", []string{"2001:10::1", "2001:1f:ffff::1"}, special, "2001:10::/28"},
		{"ORCHIDv2", []string{"2001:20::", "2001:2f:ffff:ffff:ffff:ffff:ffff:ffff"}, special, "2001:20::/28"},
		{"DRIP entity tags", []string{"2001:30::1", "2001:3f::1"}, special, "2001:30::/28"},
		{"documentation v6", []string{"2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"}, special, "2001:db8::/32"},
		{"documentation 3fff::/20", []string{"3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff"}, special, "3fff::/20"},
		{"above 3fff::/20", []string{"3fff:1000::1"}, public, ""},
		{"6to4 public", []string{"2002:808:808::1", "2002:101:101:1::1"}, public, ""},
		{"6to4 loopback", []string{"2002:7f00:1::1"}, loopback, "2002::/16"},
		{"6to4 private", []string{"2002:c0a8:101::1", "2002:a00:1::", "2002:6440:1::1"}, private, "2002::/16"},
		{"6to4 metadata", []string{"2002:a9fe:a9fe::1"}, never, "2002::/16"},
		{"6to4 reserved and documentation", []string{"2002:f000:1::1", "2002:c000:201::1"}, special, "2002::/16"},
		{"AS112 v6 direct delegation", []string{"2620:4f:8000::1"}, public, ""},
		{"SRv6 SIDs", []string{"5f00::", "5f00:ffff::1"}, special, "5f00::/16"},
		{"unique-local", []string{"fc00::", "fd12:3456::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, private, "fc00::/7"},
		{"link-local v6", []string{"fe80::", "fe80::1", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, never, "fe80::/10"},
		{"site-local", []string{"fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, private, "fec0::/10"},
		{"multicast v6", []string{"ff00::", "ff02::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, never, "ff00::/8"},
		{"global unicast v6", []string{"2001:4860:4860::8888", "2400:cb00::1", "2a00:1450::1"}, public, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			policies := []struct {
				name string
				p    Policy
				ok   bool
			}{
				{"strict", Policy{}, c.want == public},
				{"loopback allowed", Policy{AllowLoopback: true}, c.want == public || c.want == loopback},
				{"private allowed", Policy{AllowPrivate: true}, c.want == public || c.want == private},
				{"dev", Policy{AllowLoopback: true, AllowPrivate: true}, c.want == public || c.want == loopback || c.want == private},
			}
			if c.allow != "" {
				policies = append(policies, struct {
					name string
					p    Policy
					ok   bool
				}{"listed", Policy{Allow: []netip.Prefix{netip.MustParsePrefix(c.allow)}}, c.want != never})
			}
			for _, a := range c.addrs {
				addr := netip.MustParseAddr(a)
				for _, p := range policies {
					err := p.p.Check(addr)
					if (err == nil) != p.ok {
						t.Errorf("%s, %s policy: err=%v, want allowed=%v", a, p.name, err, p.ok)
					}
					if err != nil && !errors.Is(err, ErrBlocked) {
						t.Errorf("%s: error does not wrap ErrBlocked: %v", a, err)
					}
				}
				// A URL naming the address is refused before any
				// connection exactly when the strict policy refuses it.
				host := a
				if addr.Is6() && !addr.Is4In6() || addr.Is4In6() {
					host = "[" + a + "]"
				}
				if err := (Policy{}).CheckURL("http://" + host + ":8080/x"); (err == nil) != (c.want == public) {
					t.Errorf("CheckURL(%s): %v", host, err)
				}
			}
		})
	}
}

// TestBlockedNamesTheRange: a refusal says which range the address is in.
func TestBlockedNamesTheRange(t *testing.T) {
	cases := map[string]string{
		"198.18.0.1":               "198.18.0.0/15, benchmarking",
		"64:ff9b::169.254.169.254": "embeds 169.254.169.254",
		"2002:c0a8:101::1":         "embeds 192.168.1.1",
		"2001:0:4136:e378:8000::1": "TEREDO",
		"240.0.0.1":                "reserved",
		"2001:20::1":               "ORCHIDv2",
		"::ffff:169.254.169.254":   "IPv4-mapped address",
		"64:ff9b:1::a9fe:a9fe":     "local-use IPv4/IPv6 translation",
		"100.64.0.1":               "shared address space",
		"2001:2::1":                "benchmarking",
		"100::1":                   "discard-only",
		"::ffff:0:169.254.169.254": "IPv4-translated",
		"ff02::1":                  "multicast",
		"0.1.2.3":                  "this network",
		"192.0.0.170":              "NAT64/DNS64 discovery",
		"fec0::1":                  "site-local",
		"::a00:1":                  "IPv4-compatible",
		"2001:db8::1":              "documentation",
		"3fff::1":                  "documentation",
		"192.88.99.1":              "6to4 relay anycast",
		"203.0.113.9":              "TEST-NET-3",
		"5f00::1":                  "SRv6",
		"64:ff9b::7f00:1":          "embeds 127.0.0.1",
		"2002:7f00:1::1":           "embeds 127.0.0.1",
		"100:0:0:1::1":             "dummy IPv6 prefix",
		"2001:10::1":               "ORCHID",
		"2001:30::1":               "drone remote ID",
		"2001:1::4":                "IETF protocol assignments",
		"192.0.2.1":                "TEST-NET-1",
		"198.51.100.1":             "TEST-NET-2",
		"255.255.255.255":          "broadcast",
		"64:ff9b::c612:1":          "embeds 198.18.0.1",
		"2002:f000::1":             "embeds 240.0.0.0",
		"::":                       "unspecified",
		"fe80::1":                  "link-local",
		"fc00::1":                  "unique-local",
		"2001:0:ffff::1":           "TEREDO",
		"192.0.0.8":                "dummy address",
		"192.0.0.1":                "service continuity",
		"169.254.169.254":          "cloud metadata",
		"127.0.0.1":                "--allow-loopback-callbacks",
		"10.0.0.1":                 "--allow-private-callbacks",
		"64:ff9b::a00:1":           "embeds 10.0.0.1",
		"::ffff:0:7f00:1":          "embeds 127.0.0.1",
		"2002:a9fe:a9fe::":         "embeds 169.254.169.254",
		"2001:2:0:ffff::":          "RFC 5180",
		"64:ff9b::f000:1":          "reserved",
		"2001:1ff::1":              "RFC 2928",
		"100:0:0:1:ffff::1":        "RFC 9780",
		"::ffff:100.64.0.1":        "shared address space",
		"2002:6440:1::":            "shared address space",
		"2001:0:4136:e378::":       "RFC 4380",
		"fdff::1":                  "RFC 4193",
		"240.255.255.255":          "RFC 1112",
		"198.19.255.255":           "RFC 2544",
		"2001:2f:ffff::1":          "RFC 7343",
		"64:ff9b:1:ffff::1":        "RFC 8215",
		"64:ff9b::c000:201":        "TEST-NET-1",
		"2002:c633:6401::1":        "TEST-NET-2",
		"64:ff9b::cb00:7101":       "TEST-NET-3",
		"::ffff:0:a00:1":           "private-use",
		"::ffff:10.1.1.1":          "private-use",
		"2002:ac10:1::":            "private-use",
		"64:ff9b::ac1f:ffff":       "private-use",
	}
	for a, want := range cases {
		err := (Policy{}).Check(netip.MustParseAddr(a))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s) = %v, want an error naming %q", a, err, want)
		}
	}
}

// TestRegistryEntriesDecide: no registry entry is shadowed by a more
// specific one over its whole range, and each prefix is in canonical form.
func TestRegistryEntriesDecide(t *testing.T) {
	for _, s := range registry {
		if s.prefix != s.prefix.Masked() {
			t.Errorf("%s is not masked", s.prefix)
		}
		got, ok := lookup(s.prefix.Addr())
		if !ok {
			t.Errorf("%s: lookup of its first address found nothing", s.prefix)
			continue
		}
		if got.prefix != s.prefix && got.prefix.Bits() <= s.prefix.Bits() {
			t.Errorf("%s: its first address is decided by %s, which is not more specific", s.prefix, got.prefix)
		}
		if (s.class == classEmbedded) != (s.v4 != nil && s.class == classEmbedded) {
			t.Errorf("%s: an embedding entry needs an extractor", s.prefix)
		}
	}
}

func TestClientRefusesAtConnectTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/ok", http.StatusFound)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	ctx := context.Background()
	get := func(c *http.Client, path string) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(Policy{}.Client(time.Second), "/ok"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("loopback with strict policy: %v", err)
	}
	// "localhost" resolves to loopback: the name is no way around the check.
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://localhost:1/", nil)
	if _, err := (Policy{}).Client(time.Second).Do(req); !errors.Is(err, ErrBlocked) {
		t.Fatalf("localhost by name: %v", err)
	}
	dev := Policy{AllowLoopback: true}.Client(time.Second)
	if err := get(dev, "/ok"); err != nil {
		t.Fatalf("allowed loopback: %v", err)
	}
	if err := get(dev, "/redirect"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("redirect followed: %v", err)
	}
}

func TestCheckURL(t *testing.T) {
	cases := []struct {
		url string
		ok  bool
	}{
		{"http://169.254.169.254/latest/meta-data", false},
		{"http://127.0.0.1:8002/inbox", false},
		{"http://localhost:8002/inbox", false},
		{"http://api.localhost/x", false},
		{"http://[::1]/x", false},
		{"http://10.0.0.1/x", false},
		{"https://agents.example.com/inbox", true}, // checked at connect time
		{"http://93.184.216.34/x", true},
		// A blocked address written in a form clients read as it
		// (legacyIPv4) is blocked too, before any connection.
		{"http://2130706433:9/x", false},
		{"http://0177.0.0.1/x", false},
		{"http://0x7f.1/x", false},
		{"http://127.1/x", false},
		{"http://169.254.43518/latest/meta-data", false},
		{"http://0xa.1/x", false},         // 10.0.0.1
		{"http://0/x", false},             // 0.0.0.0
		{"http://1.2.3.4.5/x", false},     // no address
		{"http://4294967296/x", false},    // no address
		{"http://16843009/x", true},       // 1.1.1.1
		{"http://agent.example./x", true}, // a name with its root dot
	}
	for _, c := range cases {
		if err := (Policy{}).CheckURL(c.url); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.url, err)
		}
	}
}

func TestCheckForm(t *testing.T) {
	cases := map[string]bool{
		"http://agent.example/inbox":   true,
		"https://agent.example:8443/":  true,
		"ftp://agent.example/x":        false,
		"/relative/path":               false,
		"http:///nohost":               false,
		"http://user:pw@agent.example": false,
		"::not a url":                  false,
		"http://agent.example:65535/":  true,
		"http://agent.example:99999/":  false,
		"http://agent.example:0/":      false,
	}
	for raw, ok := range cases {
		if err := CheckForm("callback_url", raw); (err == nil) != ok {
			t.Errorf("%q: %v", raw, err)
		}
	}
}

// TestLegacyIPv4 reads hosts as the URL Standard's IPv4 parser (and so
// browsers, curl and inet_aton) does.
func TestLegacyIPv4(t *testing.T) {
	cases := []struct {
		host   string
		want   string // "" with isIPv4: not a valid address
		isIPv4 bool
	}{
		{"2130706433", "127.0.0.1", true},
		{"0177.0.0.1", "127.0.0.1", true},
		{"0x7f.1", "127.0.0.1", true},
		{"0X7F.0.0.1", "127.0.0.1", true},
		{"127.1", "127.0.0.1", true},
		{"0x7f000001", "127.0.0.1", true},
		{"017700000001", "127.0.0.1", true},
		{"10.0.1", "10.0.0.1", true},
		{"10.1.", "10.0.0.1", true},
		{"169.254.43518", "169.254.169.254", true},
		{"0x", "0.0.0.0", true},
		{"0", "0.0.0.0", true},
		{"1.2.3.4", "1.2.3.4", true},
		{"4294967295", "255.255.255.255", true},
		{"4294967296", "", true},
		{"256.0.0.1", "", true},
		{"1.2.3.4.5", "", true},
		{"1.2.3.0x1g", "", false}, // last part not a number: a name
		{"1.2.08.4", "", true},    // 08 is not octal
		{"1..2", "", true},
		{"example.com", "", false},
		{"0x7f.example", "", false},
		{"agents.example.123x", "", false},
		{"localhost", "", false},
	}
	for _, c := range cases {
		a, isIPv4, err := legacyIPv4(c.host)
		if isIPv4 != c.isIPv4 {
			t.Errorf("%q: isIPv4 %v, want %v", c.host, isIPv4, c.isIPv4)
			continue
		}
		switch {
		case !isIPv4:
		case c.want == "" && err == nil:
			t.Errorf("%q: %v, want an error", c.host, a)
		case c.want != "" && (err != nil || a.String() != c.want):
			t.Errorf("%q: %v, %v; want %s", c.host, a, err, c.want)
		}
	}
}

func FuzzLegacyIPv4(f *testing.F) {
	for _, s := range []string{"2130706433", "0177.0.0.1", "0x7f.1", "127.1", "1.2.3.4.", "a.b", "0x", ".", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		a, isIPv4, err := legacyIPv4(host)
		if !isIPv4 && (err != nil || a.IsValid()) {
			t.Fatalf("%q: a name, yet %v, %v", host, a, err)
		}
		if isIPv4 && err == nil {
			if !a.Is4() {
				t.Fatalf("%q: %v is not IPv4", host, a)
			}
			// A canonical dotted quad reads as itself.
			if b, err2 := netip.ParseAddr(host); err2 == nil && b != a {
				t.Fatalf("%q: %v, netip says %v", host, a, b)
			}
		}
	})
}
