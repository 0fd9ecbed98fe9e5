package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/switchboard-hub/switchboard/client"
)

const delivery = `{"atp_version":"1.0","message_id":"m-1","sender":"planner","receiver":"worker","type":"task.request","payload":{}}`

// deliver hands one delivery of message m-1 to h, as the hub's push would,
// and returns the answer. A panic in h is recovered and reported as
// panicked (net/http recovers it the same way for a real server).
func deliver(ctx context.Context, h http.Handler) (rec *httptest.ResponseRecorder, panicked bool) {
	rec = httptest.NewRecorder()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/callback", strings.NewReader(delivery))
	defer func() { panicked = recover() != nil }()
	h.ServeHTTP(rec, req)
	return rec, false
}

// TestCallbackDedupConcurrentDuplicate delivers one message twice at the
// same time, as the hub does when its first attempt timed out while the
// handler was still running. The handler must run once: the second
// delivery waits for the first and answers with the first one's outcome.
// A failed first handling (error or panic) is not remembered, so a later
// redelivery runs the handler again.
//
// The test runs in a synctest bubble on an in-memory recorder, so
// synctest.Wait tells exactly when both deliveries are blocked: no
// sleeps, no timing assumptions.
func TestCallbackDedupConcurrentDuplicate(t *testing.T) {
	tests := []struct {
		name       string
		first      func() (client.Reply, error) // the first handling's outcome
		wantStatus int                          // what both concurrent deliveries answer
		wantBody   string                       // a part of that answer
		wantCalls  int                          // handler runs after one more, later delivery
	}{
		{name: "accepted", first: func() (client.Reply, error) { return client.Reply{Result: "done"}, nil },
			wantStatus: http.StatusOK, wantBody: `"result":"done"`, wantCalls: 1},
		{name: "rejected", first: func() (client.Reply, error) { return client.Reject(422, "no"), nil },
			wantStatus: http.StatusOK, wantBody: `"status":"rejected"`, wantCalls: 1},
		{name: "handler error", first: func() (client.Reply, error) { return client.Reply{}, errors.New("busy") },
			wantStatus: http.StatusServiceUnavailable, wantBody: `"detail":"busy"`, wantCalls: 2},
		{name: "handler panic", first: func() (client.Reply, error) { panic("boom") },
			wantStatus: http.StatusServiceUnavailable, wantBody: `"status":"error"`, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls, dups atomic.Int32
				release := make(chan struct{})
				releaseOnce := sync.OnceFunc(func() { close(release) })
				defer releaseOnce() // lets a blocked handler end if the test fails early
				h := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
					if calls.Add(1) == 1 {
						<-release
						return tt.first()
					}
					return client.Reply{Result: "again"}, nil
				}, client.CallbackOptions{OnDuplicate: func(string) { dups.Add(1) }})

				var wg sync.WaitGroup
				var first, second *httptest.ResponseRecorder
				var firstPanicked bool
				wg.Go(func() { first, firstPanicked = deliver(context.Background(), h) })
				synctest.Wait() // the first delivery is inside the handler
				wg.Go(func() { second, _ = deliver(context.Background(), h) })
				synctest.Wait() // the duplicate is waiting (or, wrongly, inside the handler too)
				if n := calls.Load(); n != 1 {
					t.Errorf("handler ran %d times for one message id while the first run was in progress, want 1", n)
				}
				releaseOnce()
				wg.Wait()

				if tt.name == "handler panic" {
					if !firstPanicked {
						t.Errorf("the handler's panic did not reach the first delivery's server")
					}
				} else if first.Code != tt.wantStatus || !strings.Contains(first.Body.String(), tt.wantBody) {
					t.Errorf("first delivery answered %d %s, want %d with %s", first.Code, first.Body, tt.wantStatus, tt.wantBody)
				}
				if second.Code != tt.wantStatus || !strings.Contains(second.Body.String(), tt.wantBody) {
					t.Errorf("concurrent duplicate answered %d %s, want the first outcome: %d with %s", second.Code, second.Body, tt.wantStatus, tt.wantBody)
				}
				if n := dups.Load(); n != 1 {
					t.Errorf("OnDuplicate called %d times, want 1", n)
				}

				later, _ := deliver(context.Background(), h)
				if n := calls.Load(); int(n) != tt.wantCalls {
					t.Errorf("after a later redelivery the handler ran %d times, want %d", n, tt.wantCalls)
				}
				if later.Code != http.StatusOK {
					t.Errorf("later redelivery answered %d %s, want 200", later.Code, later.Body)
				}
			})
		})
	}
}

// TestCallbackDedupWaiterGivesUp checks that a duplicate whose request
// ends (the hub hung up) while the first handling is still running
// answers 503 at once, without running the handler, and that the first
// handling's outcome is still remembered afterwards.
func TestCallbackDedupWaiterGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		release := make(chan struct{})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		defer releaseOnce() // lets a blocked handler end if the test fails early
		h := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
			calls.Add(1)
			<-release
			return client.Reply{Result: "done"}, nil
		}, client.CallbackOptions{})

		var wg sync.WaitGroup
		wg.Go(func() { deliver(context.Background(), h) })
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		var gaveUp *httptest.ResponseRecorder
		wg.Go(func() { gaveUp, _ = deliver(ctx, h) })
		synctest.Wait()
		cancel()
		synctest.Wait()
		if gaveUp == nil {
			t.Fatal("a duplicate whose request ended is still waiting for the first handling")
		}
		if gaveUp.Code != http.StatusServiceUnavailable {
			t.Errorf("duplicate whose request ended answered %d %s, want 503", gaveUp.Code, gaveUp.Body)
		}
		releaseOnce()
		wg.Wait()
		later, _ := deliver(context.Background(), h)
		if n := calls.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
		if !strings.Contains(later.Body.String(), `"result":"done"`) {
			t.Errorf("later redelivery answered %d %s, want the remembered reply", later.Code, later.Body)
		}
	})
}
