package core_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// announcing is a store shared between instances as far as record
// announcements go: it keeps what it was asked to carry.
type announcing struct {
	core.Store
	mu  sync.Mutex
	got []core.RecordEvent
}

func (a *announcing) AnnounceRecord(ev core.RecordEvent) {
	a.mu.Lock()
	a.got = append(a.got, ev)
	a.mu.Unlock()
}

// TestRecordEvents: AnnounceRecord reaches a store that carries
// announcements and is a no-op on one that does not; NotifyRecord calls
// the callbacks of the event's kind only, each of them, and none once
// stopped.
func TestRecordEvents(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ev := core.RecordEvent{Kind: "task", ID: "t1", Index: "owner", Version: 2}

	t.Run("announce", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			store core.Store
			want  int
		}{
			{"shared store", &announcing{Store: st}, 1},
			{"store of one instance", st, 0},
		} {
			t.Run(c.name, func(t *testing.T) {
				core.NewRelay(c.store, nil, core.Config{}, nil).AnnounceRecord(ev)
				if a, ok := c.store.(*announcing); ok && (len(a.got) != c.want || a.got[0] != ev) {
					t.Fatalf("announced %v, want %v once", a.got, ev)
				}
			})
		}
	})

	t.Run("notify", func(t *testing.T) {
		r := core.NewRelay(st, nil, core.Config{}, nil)
		var mu sync.Mutex
		calls := map[string][]core.RecordEvent{}
		hook := func(name string) func(core.RecordEvent) {
			return func(ev core.RecordEvent) {
				mu.Lock()
				calls[name] = append(calls[name], ev)
				mu.Unlock()
			}
		}
		stopA := r.OnRecordEvent("task", hook("a"))
		stopB := r.OnRecordEvent("task", hook("b"))
		defer stopB()
		stopOther := r.OnRecordEvent("session", hook("other"))
		defer stopOther()
		r.NotifyRecord(ev)
		stopA()
		stopA() // twice: no harm
		ev2 := ev
		ev2.Version = 3
		r.NotifyRecord(ev2)
		for name, want := range map[string][]core.RecordEvent{"a": {ev}, "b": {ev, ev2}, "other": nil} {
			if !slices.Equal(calls[name], want) {
				t.Errorf("callback %s got %v, want %v", name, calls[name], want)
			}
		}
	})
}
