package sqlite_test

import (
	"context"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func open(tb testing.TB) core.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), tb.TempDir(), sqlite.Options{})
	if err != nil {
		tb.Fatalf("sqlite.Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store { return open(t) })
}

func TestReadBytes(t *testing.T) {
	storetest.RunReadBytes(t, func(t *testing.T) core.Store {
		s, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{ReadBytes: storetest.ReadBytes})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) core.Store { return open(b) })
}
