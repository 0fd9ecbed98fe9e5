package bench_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bench"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// entrance is a reverse proxy in front of a real hub that counts the
// sends and registrations passing through it, standing for one of several
// hub instances behind a load balancer.
type entrance struct {
	srv             *httptest.Server
	sends, register atomic.Int64
	mu              sync.Mutex
	sendTokens      map[string]bool // Authorization headers of the sends
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
			e.mu.Lock()
			if e.sendTokens == nil {
				e.sendTokens = map[string]bool{}
			}
			e.sendTokens[r.Header.Get("Authorization")] = true
			e.mu.Unlock()
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
	// The receiver, and the first sender (a --dev hub issues no
	// credential, so the other senders do not register).
	if a.register.Load() != 2 || b.register.Load() != 0 {
		t.Errorf("registrations: first hub %d, second %d; want 2, 0", a.register.Load(), b.register.Load())
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

// With auth on, each sender registers as an agent and sends with the
// credential the hub issued it.
func TestRunSendersUseTheirOwnCredentials(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	e := newEntrance(t, base)
	res, err := bench.Run(context.Background(), bench.Config{Hub: e.srv.URL, Token: h.AdminToken, Senders: 4, Messages: 40,
		Duration: 10 * time.Second, Drain: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 40 || res.Delivered != 40 || res.Errors != 0 {
		t.Fatalf("accepted %d, delivered %d, errors %d; want 40, 40, 0", res.Accepted, res.Delivered, res.Errors)
	}
	if res.SenderCredentials != 4 || !strings.Contains(res.String(), "(own credentials)") {
		t.Errorf("sender credentials %d, want 4 (%s)", res.SenderCredentials, res)
	}
	if got := e.register.Load(); got != 5 {
		t.Errorf("%d registrations, want 5 (the receiver and four senders)", got)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.sendTokens) != 4 || e.sendTokens["Bearer "+h.AdminToken] {
		t.Errorf("sends carried %d distinct tokens (admin's among them: %v), want the four senders' own", len(e.sendTokens), e.sendTokens["Bearer "+h.AdminToken])
	}
}

// TestRunWaitsWhenRateLimited sends faster than the hub lets one agent:
// the refusals are counted apart from errors, and the sender waits as the
// answer's Retry-After tells it instead of hammering the hub.
func TestRunWaitsWhenRateLimited(t *testing.T) {
	if testing.Short() {
		t.Skip("runs against a rate-limited hub for two seconds: a load, full lane, not with -short")
	}
	h, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}, RateLimit: 20, RateBurst: 20})
	res, err := bench.Run(context.Background(), bench.Config{Hub: base, Token: h.AdminToken, Senders: 1,
		Duration: 2 * time.Second, Drain: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// 20 at once, then 20 a second: at most about 60 in two seconds.
	if res.Errors != 0 || res.Accepted < 20 || res.Accepted > 70 || res.Delivered != res.Accepted {
		t.Errorf("errors %d, accepted %d, delivered %d; want 0, 20..70, all", res.Errors, res.Accepted, res.Delivered)
	}
	// A one-second Retry-After each time: a handful of refusals, not thousands.
	if res.RateLimited < 1 || res.RateLimited > 4 {
		t.Errorf("%d sends rate-limited, want 1..4 (one per Retry-After)", res.RateLimited)
	}
	if !strings.Contains(res.String(), "rate-limited") {
		t.Errorf("the report does not mention the rate limiting: %s", res)
	}
}

func TestRunRefusesBadHubURLs(t *testing.T) {
	for _, c := range []struct {
		hubs []string
		want string
	}{
		{[]string{"http://127.0.0.1:1", " "}, "hub 2"},
		{[]string{"ftp://127.0.0.1:1"}, "want http:// or https://"},
	} {
		_, err := bench.Run(context.Background(), bench.Config{Hubs: c.hubs})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("hubs %q: err = %v, want one saying %q", c.hubs, err, c.want)
		}
	}
}

func TestRunOpenLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs open-loop loads for seconds: a load, full lane, not with -short")
	}
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	t.Run("sends on schedule", func(t *testing.T) {
		// 4 senders at 200/s for 1s: each sends every 20ms, 50 in all.
		res, err := bench.Run(context.Background(), bench.Config{Hub: base, Senders: 4, Rate: 200, Duration: time.Second, Drain: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sent != 200 || res.Accepted != 200 || res.Delivered != 200 {
			t.Fatalf("sent %d, accepted %d, delivered %d; want 200 each", res.Sent, res.Accepted, res.Delivered)
		}
		if res.Rate != 200 || !strings.Contains(res.String(), "at 200/s open-loop") {
			t.Fatalf("result does not report the rate: %v / %s", res.Rate, res)
		}
	})
	t.Run("latency counts from the schedule", func(t *testing.T) {
		// Every send takes at least 30ms behind this entrance, but one
		// sender is asked for one every 10ms: it falls further behind with
		// each message, and the percentiles must show that (the 20th is
		// sent about 400ms late), not the 30ms each answer took.
		u, _ := url.Parse(base)
		proxy := httputil.NewSingleHostReverseProxy(u)
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/atp/send" {
				time.Sleep(30 * time.Millisecond) // the scenario: a slow entrance, not a wait
			}
			proxy.ServeHTTP(w, r)
		}))
		defer slow.Close()
		res, err := bench.Run(context.Background(), bench.Config{Hub: slow.URL, Senders: 1, Rate: 100, Messages: 20, Duration: 10 * time.Second, Drain: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Accepted != 20 {
			t.Fatalf("accepted %d, want 20", res.Accepted)
		}
		if res.SendMax < 300*time.Millisecond {
			t.Fatalf("max send latency %v: the backlog behind slow answers is not counted", res.SendMax)
		}
	})
	t.Run("bad rate", func(t *testing.T) {
		if _, err := bench.Run(context.Background(), bench.Config{Hub: base, Rate: -1}); err == nil || !strings.Contains(err.Error(), "rate") {
			t.Fatalf("err = %v, want a rate error", err)
		}
	})
}

func TestRunReportsCPUPerMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 400 messages from 8 senders per hub kind: a load, full lane, not with -short")
	}
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	u, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(u)
	// A relay that does not publish Switchboard's /metrics.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer bare.Close()
	cases := []struct {
		name    string
		hub     string
		wantHub bool
	}{
		{"switchboard", base, true},
		{"relay without metrics", bare.URL, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := bench.Run(context.Background(), bench.Config{Hub: c.hub, Senders: 8, Messages: 400, Duration: 30 * time.Second, Drain: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Delivered != 400 {
				t.Fatalf("delivered %d, want 400", res.Delivered)
			}
			// The hub runs in this test's process, so both figures are
			// this process's CPU: at least some, and under a second a
			// message.
			if res.LoadCPU <= 0 || res.LoadCPU > time.Second {
				t.Errorf("load generator CPU per message %v", res.LoadCPU)
			}
			if got := res.HubCPU > 0 && res.HubCPU < time.Second; got != c.wantHub {
				t.Errorf("hub CPU per message %v, want reported: %v", res.HubCPU, c.wantHub)
			}
			if got := strings.Contains(res.String(), "CPU per message: hub "); got != c.wantHub {
				t.Errorf("summary %q names the hub's CPU: %v, want %v", res.String(), got, c.wantHub)
			}
		})
	}
}

func TestRunSeveralReceivers(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	u, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(u)
	for _, mode := range []string{bench.ReceivePush, bench.ReceiveStream} {
		t.Run(mode, func(t *testing.T) {
			var mu sync.Mutex
			perReceiver := map[string]int{}
			var streams atomic.Int64
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/atp/send":
					b, _ := io.ReadAll(r.Body)
					var env struct {
						Receiver string `json:"receiver"`
					}
					_ = json.Unmarshal(b, &env)
					mu.Lock()
					perReceiver[env.Receiver]++
					mu.Unlock()
					r.Body = io.NopCloser(bytes.NewReader(b))
				case strings.HasPrefix(r.URL.Path, "/atp/stream/"):
					streams.Add(1)
				}
				proxy.ServeHTTP(w, r)
			}))
			defer front.Close()
			res, err := bench.Run(context.Background(), bench.Config{Hub: front.URL, Senders: 4, Receivers: 3, Messages: 90,
				Receive: mode, Duration: 30 * time.Second, Drain: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Accepted != 90 || res.Delivered != 90 || res.Duplicates != 0 || res.Receivers != 3 {
				t.Fatalf("accepted %d, delivered %d, duplicates %d, receivers %d; want 90, 90, 0, 3", res.Accepted, res.Delivered, res.Duplicates, res.Receivers)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(perReceiver) != 3 {
				t.Fatalf("sends went to %d receivers, want 3: %v", len(perReceiver), perReceiver)
			}
			for id, n := range perReceiver {
				if n < 20 || n > 40 {
					t.Errorf("receiver %s got %d of 90 sends: not taken in turn", id, n)
				}
			}
			wantStreams := int64(0)
			if mode == bench.ReceiveStream {
				wantStreams = 3
			}
			if streams.Load() != wantStreams {
				t.Errorf("%d streams opened, want %d", streams.Load(), wantStreams)
			}
			if !strings.Contains(res.String(), "3 receiver(s) by "+mode) {
				t.Errorf("summary %q does not name the receivers", res.String())
			}
		})
	}
}

func TestRunMessageIDs(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{Dev: true})
	u, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	var ids []string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/atp/send" {
			body, _ := io.ReadAll(r.Body)
			var env struct {
				MessageID string `json:"message_id"`
			}
			_ = json.Unmarshal(body, &env)
			mu.Lock()
			ids = append(ids, env.MessageID)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	now := time.Now().UnixMilli()
	recent := func(id string) bool { // a UUIDv7 of the last minute
		ms, err := strconv.ParseInt(id[:12], 16, 64)
		return err == nil && len(id) == 32 && id[12] == '7' && ms > now-60000 && ms <= time.Now().UnixMilli()
	}
	cases := []struct {
		ids  string
		want func(id string) bool
	}{
		{"", recent},
		{bench.IDsOrdered, recent},
		{bench.IDsRandom, func(id string) bool {
			_, err := hex.DecodeString(id)
			return err == nil && len(id) == 32 && !recent(id)
		}},
		{bench.IDsSender, regexp.MustCompile(`^[0-9a-f]+-[0-9]+-[0-9]+$`).MatchString},
	}
	for _, tc := range cases {
		t.Run("ids "+tc.ids, func(t *testing.T) {
			mu.Lock()
			ids = nil
			mu.Unlock()
			res, err := bench.Run(context.Background(), bench.Config{Hub: front.URL, Senders: 2, Messages: 20, IDs: tc.ids, Drain: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(ids) != 20 || res.Delivered != 20 {
				t.Fatalf("%d sends seen, %d delivered; want 20", len(ids), res.Delivered)
			}
			for _, id := range ids {
				if !tc.want(id) {
					t.Fatalf("id %q is not a %q id", id, res.IDs)
				}
			}
			if want := cmp.Or(tc.ids, bench.IDsOrdered); res.IDs != want || !strings.Contains(res.String(), want+" ids") {
				t.Fatalf("result says ids %q (%s), want %q", res.IDs, res.String(), want)
			}
		})
	}
	if _, err := bench.Run(context.Background(), bench.Config{Hub: base, IDs: "uuid9"}); err == nil || !strings.Contains(err.Error(), "uuid9") {
		t.Fatalf("ids uuid9: err = %v", err)
	}
}

// TestRunLeavesNoAgentsBehind: every agent a run registers, receivers and
// senders, is deregistered when it ends, with auth on (each with its own
// credential) and off.
func TestRunLeavesNoAgentsBehind(t *testing.T) {
	tests := []struct {
		name string
		opt  hub.Options
		regs int
	}{
		{"auth on", hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}}, 5},
		// Without credentials only the first sender registers (the rest
		// send with the run's token).
		{"dev", hub.Options{Dev: true}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, base := hubtest.Start(t, tt.opt)
			res, err := bench.Run(context.Background(), bench.Config{Hub: base, Token: h.AdminToken, Senders: 3, Receivers: 2,
				Messages: 30, Duration: 10 * time.Second, Drain: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Delivered != 30 || res.Registered != tt.regs || res.Deregistered != tt.regs {
				t.Fatalf("delivered %d, registered %d, deregistered %d; want 30, %d, %d", res.Delivered, res.Registered, res.Deregistered, tt.regs, tt.regs)
			}
			left, err := h.Store.ListAgents(context.Background(), core.AgentFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range left {
				if strings.HasPrefix(a.ID, "bench-") {
					t.Errorf("agent %s left behind", a.ID)
				}
			}
		})
	}
}
