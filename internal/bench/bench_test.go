package bench_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bench"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// entrance is a reverse proxy in front of a real hub that counts the
// sends and registrations passing through it, standing for one of several
// hub instances behind a load balancer.
type entrance struct {
	srv             *httptest.Server
	sends, register atomic.Int64
}

func newEntrance(t *testing.T, target string) *entrance {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	e := &entrance{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/atp/send":
			e.sends.Add(1)
		case "/atp/register":
			e.register.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func TestRunSpreadsSendersAcrossHubs(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	a, b := newEntrance(t, base), newEntrance(t, base)
	hubs := []string{a.srv.URL + "/", b.srv.URL}
	res, err := bench.Run(context.Background(), bench.Config{Hubs: hubs, Senders: 4, Messages: 40, Duration: 10 * time.Second, Drain: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 40 || res.Errors != 0 {
		t.Fatalf("accepted %d, errors %d; want 40, 0", res.Accepted, res.Errors)
	}
	if res.Delivered != 40 {
		t.Fatalf("delivered %d, want 40", res.Delivered)
	}
	if a.register.Load() != 1 || b.register.Load() != 0 {
		t.Errorf("registrations: first hub %d, second %d; want 1, 0", a.register.Load(), b.register.Load())
	}
	if a.sends.Load() == 0 || b.sends.Load() == 0 || a.sends.Load()+b.sends.Load() != 40 {
		t.Errorf("sends: first hub %d, second %d; want both used, 40 in all", a.sends.Load(), b.sends.Load())
	}
	if len(res.Hubs) != 2 || strings.HasSuffix(res.Hubs[0], "/") {
		t.Errorf("result hubs %q, want the two URLs without trailing slash", res.Hubs)
	}
	if hubs[0] != a.srv.URL+"/" {
		t.Errorf("Run changed the caller's Hubs slice: %q", hubs)
	}
}

func TestRunRefusesEmptyHubURL(t *testing.T) {
	_, err := bench.Run(context.Background(), bench.Config{Hubs: []string{"http://127.0.0.1:1", " "}})
	if err == nil || !strings.Contains(err.Error(), "hub 2") {
		t.Fatalf("err = %v, want an error naming hub 2", err)
	}
}
