package mamp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// TestSweepsGoRoundEveryCallback: the sweeps reach every open callback,
// however many are open, and one that cannot be read does not stop them;
// an expired callback is dropped with its callback agent.
// Here the first page of callbacks (in id order) holds one unreadable
// record and sweepPage fresh ones; an expired callback sorts after all of
// them, and is the oldest (a sweep of the most recently updated would
// never see it).
func TestSweepsGoRoundEveryCallback(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	relay := core.NewRelay(st, nil, core.Config{}, nil)
	s := New(relay, Options{Records: st})
	now := relay.Clock().Now()
	put := func(id string, data []byte, updated time.Time) {
		if _, err := st.PutRecord(ctx, core.Record{Kind: callbackKind, ID: id, Index: "open", Data: data, UpdatedAt: updated}); err != nil {
			t.Error(err)
		}
	}
	cb := func(expires time.Time) []byte {
		b, _ := json.Marshal(callbackRecord{URL: "http://127.0.0.1:9/cb", Sender: "s", ExpiresAt: expires})
		return b
	}
	put("z-expired", cb(now.Add(-time.Minute)), now.Add(-time.Hour))
	// The expired callback's agent (registered when an answer was
	// forwarded) goes with it.
	if _, _, err := relay.RegisterAs(ctx, callbacksActor, &core.Agent{ID: CallbackAgentID(relay, "z-expired"), Endpoint: core.Endpoint{Kind: core.EndpointPull}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	put("a-unreadable", []byte("{"), now)
	var wg sync.WaitGroup
	for i := range sweepPage {
		wg.Go(func() { put(fmt.Sprintf("m-%04d", i), cb(now.Add(time.Hour)), now) })
	}
	wg.Wait()

	after, rounds := "", 0
	for {
		if after, err = s.sweepCallbacks(ctx, after); err != nil {
			t.Fatal(err)
		}
		rounds++
		if after == "" || rounds > 3 {
			break
		}
	}
	if rounds != 2 {
		t.Fatalf("a round of sweeps took %d sweeps, want 2 (%d callbacks, %d a sweep)", rounds, sweepPage+2, sweepPage)
	}
	if _, err := st.GetRecord(ctx, callbackKind, "z-expired"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("the expired callback is still open after a round of sweeps: %v", err)
	}
	if _, err := st.GetAgent(ctx, CallbackAgentID(relay, "z-expired")); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("the expired callback's agent is still registered: %v", err)
	}
	if _, err := st.GetRecord(ctx, callbackKind, "m-0000"); err != nil {
		t.Fatalf("a callback not expired was dropped: %v", err)
	}
}
