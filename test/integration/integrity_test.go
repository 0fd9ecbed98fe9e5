package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// serveExpectingRefusal runs `switchboard serve` on data and wants it to
// exit 1 at once with a message naming file and the ways out.
func serveExpectingRefusal(t *testing.T, data, file string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, proctest.Binary(t), "serve", "--dev", "--addr", proctest.FreeAddr(t), "--data", data)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve on a damaged store: %v, want exit status 1; output:\n%s", err, out)
	}
	for _, want := range []string{filepath.Join(data, file), "--recover salvage", "--recover fresh", "Restore"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	return string(out)
}

// loadAndKill starts a hub on data, has 8 senders send to a worker that
// never pulls for a while, kills the hub with SIGKILL and returns the ids
// it acknowledged.
func loadAndKill(t *testing.T, data string) []string {
	t.Helper()
	addr := proctest.FreeAddr(t)
	hub := proctest.StartHub(t, addr, "--dev", "--data", data)
	c := client.New("http://"+addr, client.WithRetries(0))
	ctx := context.Background()
	if _, err := c.Register(ctx, client.Registration{AgentID: "worker", LeaseSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	acked := make(chan string, 100000)
	done := make(chan struct{})
	var senders sync.WaitGroup
	for s := range 8 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				id := fmt.Sprintf("s%d-%05d", s, i)
				if _, err := c.Send(ctx, client.Message{MessageID: id, Sender: fmt.Sprintf("p%d", s), Receiver: "worker", Type: "t", TTL: time.Hour,
					Payload: map[string]any{"pad": strings.Repeat("x", 500)}}); err == nil {
					acked <- id
				}
			}
		}()
	}
	waitfor.True(t, "800 sends to be acknowledged", func() bool { return len(acked) >= 800 })
	hub.Kill()
	close(done)
	senders.Wait() // each sees the dead hub (no retries) and stops
	close(acked)
	var ids []string
	for id := range acked {
		ids = append(ids, id)
	}
	return ids
}

// TestDamagedDataDirectory runs the real binary on data directories
// damaged in each way the hub must notice — deleted, emptied or
// overwritten database, a damaged page, a damaged or truncated or deleted
// write-ahead log after a kill -9 — and wants each start refused with a
// message naming the file and the ways out; then --recover salvage starts
// on what can be read, and --recover fresh starts empty, keeping the
// damaged files.
func TestDamagedDataDirectory(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, data string)
		file   string
	}{
		{"database deleted", func(t *testing.T, data string) {
			mustDo(t, os.Remove(filepath.Join(data, "switchboard.db")))
			_ = os.Remove(filepath.Join(data, "switchboard.db-wal"))
			_ = os.Remove(filepath.Join(data, "switchboard.db-shm"))
		}, "switchboard.db"},
		{"database emptied", func(t *testing.T, data string) {
			mustDo(t, os.Truncate(filepath.Join(data, "switchboard.db"), 0))
		}, "switchboard.db"},
		{"damaged page", func(t *testing.T, data string) {
			db := filepath.Join(data, "switchboard.db")
			b, err := os.ReadFile(db)
			mustDo(t, err)
			ps := int(binary.BigEndian.Uint16(b[16:]))
			for p := 1; p*ps < len(b); p++ { // the first b-tree page after the schema
				if b[p*ps] == 0x0d || b[p*ps] == 0x05 {
					copy(b[p*ps:], bytes.Repeat([]byte{0xA5}, 64))
					break
				}
			}
			mustDo(t, os.WriteFile(db, b, 0o600))
		}, "switchboard.db"},
		{"WAL damaged", func(t *testing.T, data string) {
			// Damage the first frame the index says is committed but not
			// yet copied into the database: SQLite would drop it and every
			// transaction after it.
			w := pendingWAL(t, data)
			f, err := os.OpenFile(w.path, os.O_WRONLY, 0)
			mustDo(t, err)
			_, err = f.WriteAt(bytes.Repeat([]byte{0x5A}, 200), w.frameOffset(w.backfill)+64)
			f.Close()
			mustDo(t, err)
		}, "switchboard.db-wal"},
		{"WAL truncated", func(t *testing.T, data string) {
			// Cut the log in the middle of the last committed frame.
			w := pendingWAL(t, data)
			mustDo(t, os.Truncate(w.path, w.frameOffset(w.committed-1)+w.frameSize/2))
		}, "switchboard.db-wal"},
		{"WAL deleted", func(t *testing.T, data string) {
			mustDo(t, os.Remove(filepath.Join(data, "switchboard.db-wal")))
		}, "switchboard.db-wal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			acked := loadAndKillPending(t, data)
			c.damage(t, data)
			out := serveExpectingRefusal(t, data, c.file)
			t.Logf("refused: %s", strings.TrimSpace(out))

			// --recover salvage starts; what it saved is served.
			addr := proctest.FreeAddr(t)
			hub := proctest.StartHub(t, addr, "--dev", "--data", data, "--recover", "salvage")
			cl := client.New("http://" + addr)
			saved := 0
			for _, id := range acked {
				if _, err := cl.Receipt(context.Background(), id); err == nil {
					saved++
				}
			}
			t.Logf("salvaged: %d of %d acknowledged messages", saved, len(acked))
			if aside, _ := filepath.Glob(filepath.Join(data, "damaged-*")); len(aside) != 1 {
				t.Errorf("damaged files not kept aside: %v", aside)
			}
			hub.Stop()
			// The salvaged store starts without a flag from now on.
			hub = proctest.StartHub(t, addr, "--dev", "--data", data)
			hub.Stop()
		})
	}

	t.Run("recover fresh", func(t *testing.T) {
		data := t.TempDir()
		loadAndKill(t, data)
		mustDo(t, os.Truncate(filepath.Join(data, "switchboard.db"), 0))
		serveExpectingRefusal(t, data, "switchboard.db")
		addr := proctest.FreeAddr(t)
		hub := proctest.StartHub(t, addr, "--dev", "--data", data, "--recover", "fresh")
		defer hub.Stop()
		if aside, _ := filepath.Glob(filepath.Join(data, "damaged-*", "switchboard.db-wal")); len(aside) != 1 {
			t.Errorf("damaged files not kept aside: %v", aside)
		}
	})
}

// TestReadyzSeesTheStoreGo: deleting the database file under a running hub
// makes /readyz answer 503 (the hub would write to a file no one can open
// again).
func TestReadyzSeesTheStoreGo(t *testing.T) {
	data := t.TempDir()
	addr := proctest.FreeAddr(t)
	proctest.StartHub(t, addr, "--dev", "--data", data)
	code, _ := get(t, "http://"+addr+"/readyz")
	if code != 200 {
		t.Fatalf("/readyz %d before", code)
	}
	mustDo(t, os.Remove(filepath.Join(data, "switchboard.db")))
	code, body := get(t, "http://"+addr+"/readyz")
	if code != 503 || !strings.Contains(body, "gone") {
		t.Errorf("/readyz after the database was deleted: %d %s", code, body)
	}
}

// walState is where a killed hub left its write-ahead log, read from the
// WAL header and its index (the -shm file, which a kill -9 leaves as the
// process last wrote it).
type walState struct {
	path      string
	frameSize int64
	committed int // frames of committed transactions (the index's mxFrame)
	backfill  int // frames of them already copied into the database
}

// frameOffset is the byte offset of frame i (from 0) in the WAL.
func (w walState) frameOffset(i int) int64 { return 32 + int64(i)*w.frameSize }

// readWALState reads the WAL's page size and the index's counters.
func readWALState(t *testing.T, data string) walState {
	t.Helper()
	w := walState{path: filepath.Join(data, "switchboard.db-wal")}
	hdr := make([]byte, 32)
	f, err := os.Open(w.path)
	if err != nil {
		t.Fatalf("no WAL after kill -9: %v", err)
	}
	_, err = io.ReadFull(f, hdr)
	f.Close()
	mustDo(t, err)
	w.frameSize = 24 + int64(binary.BigEndian.Uint32(hdr[8:]))
	shm, err := os.ReadFile(filepath.Join(data, "switchboard.db-shm"))
	mustDo(t, err)
	if len(shm) < 136 {
		t.Fatalf("WAL index of %d bytes", len(shm))
	}
	w.committed = int(binary.NativeEndian.Uint32(shm[16:]))
	w.backfill = int(binary.NativeEndian.Uint32(shm[96:]))
	return w
}

// pendingWAL is readWALState for a log known to hold committed frames
// not yet copied into the database.
func pendingWAL(t *testing.T, data string) walState {
	t.Helper()
	w := readWALState(t, data)
	if w.committed <= w.backfill {
		t.Fatalf("the WAL holds no pending frames: %+v", w)
	}
	return w
}

// loadAndKillPending is loadAndKill until the kill leaves committed
// transactions in the WAL that are not yet in the database: the state in
// which damage to the log loses acknowledged messages. A kill that lands
// just after a checkpoint copied everything leaves none, so the scenario
// is set up again on the same data (at most five times).
func loadAndKillPending(t *testing.T, data string) []string {
	t.Helper()
	var acked []string
	for range 5 {
		acked = append(acked, loadAndKill(t, data)...)
		if w := readWALState(t, data); w.committed > w.backfill {
			return acked
		}
	}
	t.Fatalf("five kills under load left no pending WAL frames")
	return nil
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
