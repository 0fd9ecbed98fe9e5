package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
)

// What the flaky entrance does with a request.
type fate int

const (
	forward      fate = iota // pass it to the hub and its answer back
	drop                     // close the connection without passing it on
	loseAnswer               // pass it to the hub, then close the connection unanswered
	unavailable              // answer 503 with Retry-After: 1
	unavailable9             // answer 503 with Retry-After: 9
	badRequest               // answer 400
)

// flaky is an entrance in front of a real hub that decides, request by
// request, what happens to /atp/send.
type flaky struct {
	srv   *httptest.Server
	sends atomic.Int32
}

func newFlaky(t *testing.T, hubURL string, fates ...fate) *flaky {
	t.Helper()
	u, err := url.Parse(hubURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	f := &flaky{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/atp/send" {
			proxy.ServeHTTP(w, r)
			return
		}
		n := int(f.sends.Add(1))
		what := forward
		if n <= len(fates) {
			what = fates[n-1]
		}
		switch what {
		case forward:
			proxy.ServeHTTP(w, r)
		case drop:
			hangUp(w)
		case loseAnswer:
			body, _ := io.ReadAll(r.Body)
			req, _ := http.NewRequest(http.MethodPost, hubURL+r.URL.RequestURI(), bytes.NewReader(body))
			req.Header = r.Header.Clone()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			hangUp(w)
		case unavailable, unavailable9:
			w.Header().Set("Retry-After", map[fate]string{unavailable: "1", unavailable9: "9"}[what])
			http.Error(w, `{"error":"unavailable","message":"draining","status_code":503}`, http.StatusServiceUnavailable)
		case badRequest:
			http.Error(w, `{"error":"invalid_envelope","message":"no","status_code":400}`, http.StatusBadRequest)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func hangUp(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}

func TestSendRetries(t *testing.T) {
	tests := []struct {
		name         string
		fates        []fate
		opts         []client.Option
		timeout      time.Duration
		wantErr      func(error) bool // nil: Send must succeed
		wantAttempts int              // on success
		wantDup      bool
		wantSends    int // requests the entrance saw
		wantStored   bool
		minElapsed   time.Duration
	}{
		{name: "connection dropped before the hub saw it: sent again", fates: []fate{drop},
			wantAttempts: 2, wantSends: 2, wantStored: true},
		{name: "answer lost after the hub stored it: the retry is a duplicate, stored once", fates: []fate{loseAnswer},
			wantAttempts: 2, wantDup: true, wantSends: 2, wantStored: true},
		{name: "503 with Retry-After is retried after it", fates: []fate{unavailable},
			wantAttempts: 2, wantSends: 2, wantStored: true, minElapsed: time.Second},
		{name: "two failures, then through", fates: []fate{drop, drop},
			wantAttempts: 3, wantSends: 3, wantStored: true},
		{name: "400 is not retried", fates: []fate{badRequest},
			wantErr: func(err error) bool { var e *client.Error; return errors.As(err, &e) && e.StatusCode == 400 }, wantSends: 1},
		{name: "retries off", fates: []fate{drop}, opts: []client.Option{client.WithRetries(0)},
			wantErr: func(err error) bool { return errors.Is(err, client.ErrUnavailable) }, wantSends: 1},
		{name: "gives up after the default retries", fates: []fate{drop, drop, drop, drop, drop},
			wantErr: func(err error) bool {
				return errors.Is(err, client.ErrUnavailable) && strings.Contains(err.Error(), "gave up after 4 attempts")
			}, wantSends: client.DefaultRetries + 1},
		{name: "a Retry-After past the caller's deadline ends the Send at once", fates: []fate{unavailable9}, timeout: 3 * time.Second,
			wantErr: func(err error) bool {
				var e *client.Error
				return errors.As(err, &e) && e.StatusCode == 503 && e.RetryAfter == 9*time.Second
			}, wantSends: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case has its own hub and entrance; most wait out backoffs
			_, base := hubtest.Start(t, hub.Options{Dev: true})
			ctx := context.Background()
			admin := client.New(base)
			if _, err := admin.Register(ctx, client.Registration{AgentID: "worker"}); err != nil {
				t.Fatal(err)
			}
			f := newFlaky(t, base, tt.fates...)
			c := client.New(f.srv.URL, tt.opts...)
			sctx := ctx
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				sctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			start := time.Now()
			res, err := c.Send(sctx, client.Message{MessageID: "m1", Sender: "planner", Receiver: "worker", Type: "task.request", Payload: map[string]any{"n": 1}})
			elapsed := time.Since(start)
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("Send: %+v, %v; want the listed error", res, err)
				}
				if sctx.Err() != nil {
					t.Errorf("Send returned only when its context had ended (%v)", elapsed)
				}
			} else {
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				if res.Attempts != tt.wantAttempts || res.Duplicate != tt.wantDup || res.Status != "queued" {
					t.Errorf("Send: %+v; want status queued, %d attempts, duplicate %v", res, tt.wantAttempts, tt.wantDup)
				}
			}
			if got := int(f.sends.Load()); got != tt.wantSends {
				t.Errorf("the entrance saw %d sends, want %d", got, tt.wantSends)
			}
			if elapsed < tt.minElapsed {
				t.Errorf("Send took %v, want at least %v (Retry-After)", elapsed, tt.minElapsed)
			}
			// Stored once (or not at all), whatever the retries did.
			pending, err := admin.Pull(ctx, "worker", 10, false, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if tt.wantStored {
				want = 1
			}
			if len(pending) != want {
				t.Errorf("worker has %d messages pending, want %d", len(pending), want)
			}
		})
	}
}
