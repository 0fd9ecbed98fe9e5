package ssrf

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
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
		{"127.0.0.1", strict, false},
		{"127.0.0.1", dev, true},
		{"::1", strict, false},
		{"::ffff:127.0.0.1", strict, false},
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
