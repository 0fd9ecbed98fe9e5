package ampstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/amp/ampstore"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

func TestConcurrentUpdatesAreNotLost(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &ampstore.Store{Records: st, Clock: core.SystemClock{}}
	if _, ok, err := s.Load(ctx, "s1"); ok || err != nil {
		t.Fatalf("empty load: %v %v", ok, err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Update(ctx, "s1", func(st *amp.State) error { st.Failures++; return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, ok, err := s.Load(ctx, "s1")
	if err != nil || !ok || got.Failures != 20 || got.SessionID != "s1" {
		t.Fatalf("after 20 concurrent increments: %+v %v %v", got, ok, err)
	}
	if _, _, err := s.Load(ctx, ""); err == nil {
		t.Fatal("empty session id accepted")
	}
	list, err := s.Sessions(ctx, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("sessions: %v %v", list, err)
	}
}
