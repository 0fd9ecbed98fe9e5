package core

import "testing"

// TestAttemptSignalOrder: a watch keeps the first signal it got, except a
// look (LookNow), which a later signal of what happened replaces; a look
// never replaces one.
func TestAttemptSignalOrder(t *testing.T) {
	look := attemptSignal{look: true}
	done := attemptSignal{ok: true, o: Outcome{Kind: OutcomeDelivered}}
	ended := attemptSignal{rc: &Receipt{MessageID: "m1", Status: StatusRejected}}
	for _, c := range []struct {
		name string
		in   []attemptSignal
		want attemptSignal
	}{
		{"look alone", []attemptSignal{look}, look},
		{"look then outcome", []attemptSignal{look, done}, done},
		{"outcome then look", []attemptSignal{done, look}, done},
		{"outcome then ended elsewhere", []attemptSignal{done, ended}, done},
		{"look, ended elsewhere, look", []attemptSignal{look, ended, look}, ended},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w attemptWatchers
			ch := w.watch("m1")
			defer w.unwatch("m1", ch)
			for _, s := range c.in {
				if s.look {
					w.signalAll(s)
				} else {
					w.signal("m1", s)
				}
			}
			got := <-ch
			if got.look != c.want.look || got.ok != c.want.ok || got.rc != c.want.rc {
				t.Fatalf("watch got %+v, want %+v", got, c.want)
			}
			select {
			case s := <-ch:
				t.Fatalf("a second signal %+v", s)
			default:
			}
		})
	}
}
