package amp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFileStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	fs := NewFileStore(filepath.Join(t.TempDir(), "amp"))
	if _, ok, err := fs.Load(ctx, "s1"); ok || err != nil {
		t.Fatalf("Load of a missing session: ok=%v err=%v", ok, err)
	}
	at := time.Date(2026, 9, 12, 10, 0, 0, 0, time.UTC)
	err := fs.Update(ctx, "s1", func(st *State) error {
		if st.SessionID != "s1" {
			t.Errorf("fresh state session %q", st.SessionID)
		}
		st.Pressure, st.Arena, st.Role = 3, true, "military-warrior"
		st.Checkpoint = &Checkpoint{At: at, Summary: "why"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, ok, err := fs.Load(ctx, "s1")
	if err != nil || !ok || st.Pressure != 3 || !st.Arena || st.Role != "military-warrior" || !st.Checkpoint.At.Equal(at) {
		t.Fatalf("Load = %+v %v %v", st, ok, err)
	}
	// An error from fn writes nothing.
	boom := errors.New("boom")
	if err := fs.Update(ctx, "s1", func(st *State) error { st.Pressure = 0; return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update error = %v", err)
	}
	if st, _, _ := fs.Load(ctx, "s1"); st.Pressure != 3 {
		t.Fatalf("failed update was written: %+v", st)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(fs.Dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("left over %s", e.Name())
		}
	}
}

func TestFileStoreSessionNames(t *testing.T) {
	for _, id := range []string{"abc-123_x.y", "../../etc/passwd", ".hidden", "a/b", strings.Repeat("x", 200), "会话"} {
		name := fileName(id)
		if strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
			t.Errorf("fileName(%q) = %q is unsafe", id, name)
		}
	}
	if fileName("a/b") == fileName("a_b") {
		t.Error("distinct ids collide")
	}
	ctx := context.Background()
	fs := NewFileStore(t.TempDir())
	if err := fs.Update(ctx, "../../escape", func(st *State) error { st.Pressure = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	if st, ok, err := fs.Load(ctx, "../../escape"); err != nil || !ok || st.Pressure != 1 || st.SessionID != "../../escape" {
		t.Fatalf("%+v %v %v", st, ok, err)
	}
	if _, _, err := fs.Load(ctx, ""); !errors.Is(err, ErrEmptySession) {
		t.Fatalf("empty id: %v", err)
	}
}

func TestFileStoreCorruptFile(t *testing.T) {
	dir := t.TempDir()
	fs := NewFileStore(dir)
	if err := os.WriteFile(filepath.Join(dir, fileName("s")+".json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fs.Load(context.Background(), "s"); err == nil {
		t.Fatal("corrupt state loaded without error")
	}
}

// TestFileStoreConcurrentUpdates runs many read-modify-write updates from
// separate FileStore values (separate lock file descriptions, as separate
// processes would have); none may be lost.
func TestFileStoreConcurrentUpdates(t *testing.T) {
	dir := t.TempDir()
	const workers, per = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fs := NewFileStore(dir)
			for range per {
				err := fs.Update(context.Background(), "shared", func(st *State) error {
					st.TotalFailures++
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, _, err := NewFileStore(dir).Load(context.Background(), "shared")
	if err != nil || st.TotalFailures != workers*per {
		t.Fatalf("TotalFailures = %d (err %v), want %d", st.TotalFailures, err, workers*per)
	}
}

func TestMemoryStoreIsolation(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore()
	m.Update(ctx, "s", func(st *State) error { st.Checkpoint = &Checkpoint{Summary: "a"}; return nil })
	st, _, _ := m.Load(ctx, "s")
	st.Checkpoint.Summary = "mutated"
	again, _, _ := m.Load(ctx, "s")
	if again.Checkpoint.Summary != "a" {
		t.Fatal("Load returned shared memory")
	}
}

func TestEngineOnFileStore(t *testing.T) {
	c := newFakeClock()
	e := New(NewFileStore(t.TempDir()), WithClock(c))
	ctx := context.Background()
	for i := range 3 {
		r, err := e.Step(ctx, TickInput{SessionID: "f", Event: HostPostToolUseFailure, ToolName: "Bash"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Envelope.State.Pressure != LadderLevel(i+1) {
			t.Fatalf("failure %d: pressure %d", i+1, r.Envelope.State.Pressure)
		}
	}
}
