//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDir takes the data directory's lock (an flock on its lock file, which
// the kernel drops when the process ends, kill -9 included), so that one
// process at a time runs the store: its writer keeps state in memory (pull
// cursors, the message cache) that another process's writes would make
// wrong. It fails at once, with ErrInUse, when another process holds it.
func lockDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: lock data directory: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		holder, _ := os.ReadFile(path)
		f.Close()
		if pid := strings.TrimSpace(string(holder)); pid != "" {
			return nil, fmt.Errorf("%w: %s (process %s)", ErrInUse, dir, pid)
		}
		return nil, fmt.Errorf("%w: %s", ErrInUse, dir)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sqlite: lock data directory: %w", err)
	}
	// Name the holder for whoever is refused next.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
