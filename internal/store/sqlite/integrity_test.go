package sqlite_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fill accepts n queued messages from alice to bob, numbered from start.
func fill(t *testing.T, s core.Store, start, n int) {
	t.Helper()
	for i := start; i < start+n; i++ {
		m := &core.Message{ID: fmt.Sprintf("m%05d", i), Sender: "alice", Receiver: "bob", Type: "t",
			Parts:      []core.Part{{Kind: core.PartText, Text: strings.Repeat("x", 300)}},
			ReceivedAt: t0, ExpiresAt: t0.Add(time.Hour), TTL: time.Hour}
		r := &core.Receipt{MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Status: core.StatusQueued,
			History: []core.ReceiptEvent{{At: t0, Status: core.StatusQueued, Detail: "accepted"}}, CreatedAt: t0, UpdatedAt: t0, ExpiresAt: m.ExpiresAt}
		if _, err := s.Accept(context.Background(), m, r, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func openDir(t *testing.T, dir string, o sqlite.Options) (*sqlite.Store, error) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), dir, o)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// closedStore makes a data directory holding a cleanly closed store of n
// messages.
func closedStore(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := sqlite.Open(context.Background(), dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 0, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// crashedStore makes a data directory as a hub killed with -9 leaves it:
// the store's files are copied while it is open, after n messages were
// committed to the write-ahead log (and before any checkpoint copied them
// into the database).
func crashedStore(t *testing.T, before, n int) string {
	t.Helper()
	src := t.TempDir()
	s, err := sqlite.Open(context.Background(), src, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fill(t, s, 0, before)
	// Checkpoint what is there so far, so the WAL starts afresh.
	s.Close()
	s, err = sqlite.Open(context.Background(), src, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fill(t, s, before, n)
	dst := t.TempDir()
	for _, name := range []string{"switchboard.db", "switchboard.db-wal", "switchboard.db-shm", "switchboard.created"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func depth(t *testing.T, s core.Store) int {
	t.Helper()
	n, err := s.QueueDepth(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantDamage opens dir and wants a *DamageError naming file.
func wantDamage(t *testing.T, dir, file, problem string) {
	t.Helper()
	_, err := openDir(t, dir, sqlite.Options{})
	var de *sqlite.DamageError
	if !errors.As(err, &de) || !errors.Is(err, sqlite.ErrDamaged) {
		t.Fatalf("Open = %v, want a DamageError", err)
	}
	if de.File != filepath.Join(dir, file) {
		t.Errorf("the error names %s, want %s", de.File, filepath.Join(dir, file))
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{filepath.Join(dir, file), problem, "Restore", "--recover salvage", "--recover fresh"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}

// leafPage returns the offset of a table b-tree leaf page (type 0x0D) in
// the middle of the database file.
func leafPage(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int64(binary.BigEndian.Uint16(b[16:]))
	pages := int64(len(b)) / ps
	for p := pages / 2; p < pages; p++ {
		if b[p*ps] == 0x0d {
			return p * ps
		}
	}
	t.Fatal("no table leaf page in the second half of the file")
	return 0
}

func overwrite(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

// walFrame returns the offset of frame i (0-based) of a WAL, and its size.
func walFrame(t *testing.T, path string, i int) (int64, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [32]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		t.Fatal(err)
	}
	size := int64(24 + binary.BigEndian.Uint32(hdr[8:]))
	return 32 + int64(i)*size, size
}

func walFrames(t *testing.T, path string) int {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	_, size := walFrame(t, path, 0)
	return int((st.Size() - 32) / size)
}

func TestOpenRefusesDamage(t *testing.T) {
	cases := []struct {
		name    string
		make    func(t *testing.T) string
		file    string // the file the error must name
		problem string
	}{
		{"database deleted", func(t *testing.T) string {
			dir := closedStore(t, 10)
			os.Remove(filepath.Join(dir, "switchboard.db"))
			return dir
		}, "switchboard.db", "missing"},
		{"every file deleted by a pattern", func(t *testing.T) string {
			// rm data/* skips dot files: the hidden marker is left.
			// (filepath.Glob does not skip them: the shell does.)
			dir := closedStore(t, 10)
			names, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, n := range names {
				if strings.HasPrefix(filepath.Base(n), ".") {
					continue
				}
				if err := os.RemoveAll(n); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		}, "switchboard.db", ".switchboard.created"},
		{"database emptied", func(t *testing.T) string {
			dir := closedStore(t, 10)
			os.Truncate(filepath.Join(dir, "switchboard.db"), 0)
			return dir
		}, "switchboard.db", "empty"},
		{"database truncated", func(t *testing.T) string {
			dir := closedStore(t, 200)
			p := filepath.Join(dir, "switchboard.db")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()/2+100)
			return dir
		}, "switchboard.db", "truncated"},
		{"header overwritten", func(t *testing.T) string {
			dir := closedStore(t, 10)
			overwrite(t, filepath.Join(dir, "switchboard.db"), 0, bytes.Repeat([]byte{0}, 100))
			return dir
		}, "switchboard.db", "not an SQLite database"},
		{"corrupt page", func(t *testing.T) string {
			dir := closedStore(t, 200)
			p := filepath.Join(dir, "switchboard.db")
			overwrite(t, p, leafPage(t, p), bytes.Repeat([]byte{0xA5}, 512))
			return dir
		}, "switchboard.db", "damage"},
		{"database deleted after a crash", func(t *testing.T) string {
			dir := crashedStore(t, 5, 20)
			os.Remove(filepath.Join(dir, "switchboard.db"))
			os.Remove(filepath.Join(dir, "switchboard.created"))
			return dir
		}, "switchboard.db", "write-ahead log"},
		{"WAL frame damaged", func(t *testing.T) string {
			dir := crashedStore(t, 5, 40)
			w := filepath.Join(dir, "switchboard.db-wal")
			off, size := walFrame(t, w, walFrames(t, w)/3)
			overwrite(t, w, off+size/2, []byte("garbage in the middle of a committed page"))
			return dir
		}, "switchboard.db-wal", "frame"},
		{"WAL frame zeroed", func(t *testing.T) string {
			dir := crashedStore(t, 5, 40)
			w := filepath.Join(dir, "switchboard.db-wal")
			off, size := walFrame(t, w, 2)
			overwrite(t, w, off, make([]byte, 2*size))
			return dir
		}, "switchboard.db-wal", "frame"},
		{"WAL header damaged", func(t *testing.T) string {
			dir := crashedStore(t, 5, 40)
			overwrite(t, filepath.Join(dir, "switchboard.db-wal"), 0, []byte{0xde, 0xad, 0xbe, 0xef})
			return dir
		}, "switchboard.db-wal", "header"},
		{"WAL truncated", func(t *testing.T) string {
			dir := crashedStore(t, 5, 40)
			w := filepath.Join(dir, "switchboard.db-wal")
			off, _ := walFrame(t, w, walFrames(t, w)/2)
			os.Truncate(w, off)
			return dir
		}, "switchboard.db-wal", "committed"},
		{"WAL deleted", func(t *testing.T) string {
			dir := crashedStore(t, 5, 40)
			os.Remove(filepath.Join(dir, "switchboard.db-wal"))
			return dir
		}, "switchboard.db-wal", "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantDamage(t, c.make(t), c.file, c.problem) })
	}
}

func TestOpenAcceptsHealthyStores(t *testing.T) {
	t.Run("new directory", func(t *testing.T) {
		dir := t.TempDir()
		s, err := openDir(t, dir, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"switchboard.created", ".switchboard.created"} {
			if _, err := os.Stat(filepath.Join(dir, m)); err != nil {
				t.Errorf("no marker %s: %v", m, err)
			}
		}
		if d := depth(t, s); d != 0 {
			t.Errorf("depth %d", d)
		}
	})
	t.Run("store of an earlier version, without the hidden marker", func(t *testing.T) {
		dir := closedStore(t, 3)
		hidden := filepath.Join(dir, ".switchboard.created")
		if err := os.Remove(hidden); err != nil {
			t.Fatal(err)
		}
		if _, err := openDir(t, dir, sqlite.Options{}); err != nil {
			t.Fatal(err)
		}
		visible, _ := os.ReadFile(filepath.Join(dir, "switchboard.created"))
		got, err := os.ReadFile(hidden)
		if err != nil || string(got) != string(visible) {
			t.Errorf("hidden marker %q, %v; want the first start's record %q", got, err, visible)
		}
	})
	t.Run("reopened", func(t *testing.T) {
		s, err := openDir(t, closedStore(t, 30), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d := depth(t, s); d != 30 {
			t.Errorf("depth %d, want 30", d)
		}
	})
	t.Run("after a crash", func(t *testing.T) {
		s, err := openDir(t, crashedStore(t, 5, 40), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d := depth(t, s); d != 45 {
			t.Errorf("depth %d, want 45", d)
		}
	})
	t.Run("torn last frame", func(t *testing.T) {
		// A crash while a commit was being written leaves part of a frame
		// at the end: that transaction was never acknowledged.
		dir := crashedStore(t, 5, 40)
		f, err := os.OpenFile(filepath.Join(dir, "switchboard.db-wal"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(bytes.Repeat([]byte{7}, 1000))
		f.Close()
		s, err := openDir(t, dir, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d := depth(t, s); d != 45 {
			t.Errorf("depth %d, want 45", d)
		}
	})
	t.Run("recover on a healthy store changes nothing", func(t *testing.T) {
		dir := closedStore(t, 12)
		s, err := openDir(t, dir, sqlite.Options{Recover: sqlite.RecoverFresh})
		if err != nil {
			t.Fatal(err)
		}
		if d := depth(t, s); d != 12 {
			t.Errorf("depth %d, want 12", d)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "damaged-*")); len(m) != 0 {
			t.Errorf("moved aside: %v", m)
		}
	})
}

func TestRecover(t *testing.T) {
	t.Run("fresh", func(t *testing.T) {
		dir := closedStore(t, 10)
		os.Truncate(filepath.Join(dir, "switchboard.db"), 0)
		s, err := openDir(t, dir, sqlite.Options{Recover: sqlite.RecoverFresh})
		if err != nil {
			t.Fatal(err)
		}
		if d := depth(t, s); d != 0 {
			t.Errorf("depth %d", d)
		}
		aside, _ := filepath.Glob(filepath.Join(dir, "damaged-*", "switchboard.db"))
		if len(aside) != 1 {
			t.Errorf("damaged files not kept: %v", aside)
		}
	})
	t.Run("salvage a corrupt page", func(t *testing.T) {
		dir := closedStore(t, 300)
		p := filepath.Join(dir, "switchboard.db")
		overwrite(t, p, leafPage(t, p), bytes.Repeat([]byte{0xA5}, 512))
		s, err := openDir(t, dir, sqlite.Options{Recover: sqlite.RecoverSalvage})
		if err != nil {
			t.Fatal(err)
		}
		d := depth(t, s)
		if d < 250 || d >= 300 {
			t.Errorf("salvaged %d of 300 queued messages; want most but not all (one page is lost)", d)
		}
		// The lanes agree with the messages saved: they can all be claimed.
		cs, err := s.Claim(context.Background(), t0, t0.Add(time.Minute), "o", 10, 1000)
		if err != nil || len(cs) != 1 || len(cs[0].Messages) != d {
			t.Errorf("claim after salvage: %d lanes, %v", len(cs), err)
		}
		if _, err := s.GetMessage(context.Background(), "m00299"); err != nil {
			t.Errorf("the last message (after the damaged page) was not saved: %v", err)
		}
		report, _ := filepath.Glob(filepath.Join(dir, "damaged-*", "SALVAGE.txt"))
		if len(report) != 1 {
			t.Errorf("no salvage report")
		}
	})
	t.Run("salvage a damaged WAL", func(t *testing.T) {
		dir := crashedStore(t, 5, 40)
		w := filepath.Join(dir, "switchboard.db-wal")
		n := walFrames(t, w)
		off, size := walFrame(t, w, n-n/4)
		overwrite(t, w, off+size/2, []byte("damage"))
		s, err := openDir(t, dir, sqlite.Options{Recover: sqlite.RecoverSalvage})
		if err != nil {
			t.Fatal(err)
		}
		if d := depth(t, s); d < 5 || d >= 45 {
			t.Errorf("salvaged %d queued messages, want the checkpointed 5 and the WAL's up to the damage", d)
		}
	})
}

func TestPingSeesTheFileGo(t *testing.T) {
	dir := t.TempDir()
	s, err := openDir(t, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "switchboard.db"))
	if err := s.Ping(context.Background()); err == nil {
		t.Error("Ping is fine after the database file was deleted")
	}
}
