//go:build unix

package sqlite

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestOneProcessPerDataDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := Open(ctx, dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// A second open takes a lock of its own (flock is per open file, so
	// this is what another process meets) and is refused at once.
	_, err = Open(ctx, dir, Options{NoSync: true})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Open: %v, want ErrInUse naming process %d", err, os.Getpid())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, dir, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	b.Close()
}

func TestFailedOpenReleasesTheLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Open(ctx, dir, Options{Sync: "sometimes"}); err == nil {
		t.Fatal("Open with a bad sync mode succeeded")
	}
	s, err := Open(ctx, dir, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open after a failed Open: %v", err)
	}
	s.Close()
}
