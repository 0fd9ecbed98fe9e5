// Command integrity-bench measures the embedded store's check at start on
// a large database: it fills a store in DIR with messages until the file
// reaches -size MiB (unless it is already that large), then times
// switchboard's open with each integrity check (off, quick, full), each
// with the file evicted from the page cache first (as after a reboot) and
// warm. Linux only.
//
//	go run ./scripts/integrity-bench -dir /tmp/big -size 500
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

func main() {
	dir := flag.String("dir", "", "data directory (kept between runs)")
	sizeMiB := flag.Int64("size", 500, "database size to reach, in MiB")
	body := flag.Int("body", 2000, "bytes of text per message")
	flag.Parse()
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	ctx := context.Background()
	db := filepath.Join(*dir, "switchboard.db")
	size := func() int64 {
		var n int64
		for _, f := range []string{db, db + "-wal"} {
			if st, err := os.Stat(f); err == nil {
				n += st.Size()
			}
		}
		return n
	}
	if size() < *sizeMiB<<20 {
		s, err := sqlite.Open(ctx, *dir, sqlite.Options{NoSync: true, Check: sqlite.CheckOff})
		if err != nil {
			log.Fatal(err)
		}
		text := strings.Repeat("x", *body)
		var next atomic.Int64
		var wg sync.WaitGroup
		now := time.Now().UTC()
		for w := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for size() < *sizeMiB<<20 {
					for range 200 {
						i := next.Add(1)
						m := &core.Message{ID: core.NewID(), Sender: fmt.Sprintf("s%d", w), Receiver: fmt.Sprintf("r%d", i%64), Type: "t",
							Parts: []core.Part{{Kind: core.PartText, Text: text}}, ReceivedAt: now, ExpiresAt: now.Add(time.Hour), TTL: time.Hour}
						r := &core.Receipt{MessageID: m.ID, Sender: m.Sender, Receiver: m.Receiver, Status: core.StatusQueued,
							History: []core.ReceiptEvent{{At: now, Status: core.StatusQueued, Detail: "accepted"}}, CreatedAt: now, UpdatedAt: now, ExpiresAt: m.ExpiresAt}
						if _, err := s.Accept(ctx, m, r, 0); err != nil {
							log.Fatal(err)
						}
					}
				}
			}()
		}
		wg.Wait()
		if err := s.Close(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("filled: %d messages\n", next.Load())
	}
	fmt.Printf("database %s: %.0f MiB\n", db, float64(size())/(1<<20))
	for _, check := range []string{sqlite.CheckOff, sqlite.CheckQuick, sqlite.CheckFull} {
		for _, cold := range []bool{true, false} {
			if cold {
				evict(db)
			}
			start := time.Now()
			s, err := sqlite.Open(ctx, *dir, sqlite.Options{Check: check})
			if err != nil {
				log.Fatal(err)
			}
			took := time.Since(start)
			s.Close()
			state := "warm"
			if cold {
				state = "cold"
			}
			fmt.Printf("open with check %-5s, %s page cache: %v\n", check, state, took.Round(time.Millisecond))
		}
	}
}

// evict drops the file's pages from the page cache, as after a reboot.
func evict(path string) {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		log.Fatal(err)
	}
}
