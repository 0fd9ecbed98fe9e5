package auth

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/store/sqlite"
)

// countingStore is the real store, counting the credential reads and able
// to hold one read after it has read, until released.
type countingStore struct {
	core.RecordStore
	reads atomic.Int32
	hold  chan chan struct{} // a read sends a channel here, then waits for it to be closed
}

func (s *countingStore) GetRecord(ctx context.Context, kind, id string) (core.Record, error) {
	s.reads.Add(1)
	r, err := s.RecordStore.GetRecord(ctx, kind, id)
	if s.hold != nil {
		release := make(chan struct{})
		s.hold <- release
		<-release
	}
	return r, err
}

func openStore(t *testing.T) *countingStore {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &countingStore{RecordStore: st}
}

func TestVerifyCachesTokens(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		ttl       time.Duration
		wantReads int32 // for three verifications in a row
	}{
		{"default: one read", 0, 1},
		{"no cache: a read each", -1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			c := &Credentials{Store: st, Clock: core.SystemClock{}, CacheTTL: tt.ttl}
			tok, err := c.Issue(ctx, "worker", "g1")
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if id, err := c.Verify(ctx, tok); err != nil || id != "worker" {
					t.Fatalf("Verify: %q, %v", id, err)
				}
			}
			if got := st.reads.Load(); got != tt.wantReads {
				t.Errorf("%d store reads, want %d", got, tt.wantReads)
			}
			// Unknown tokens are refused every time, and not cached.
			for range 2 {
				if _, err := c.Verify(ctx, NewToken()); !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("unknown token: %v, want ErrUnauthenticated", err)
				}
			}
			if got := st.reads.Load(); got != tt.wantReads+2 {
				t.Errorf("%d store reads after two unknown tokens, want %d", got, tt.wantReads+2)
			}
		})
	}
}

// Revoke takes effect at once on the instance that revoked, and within
// CacheTTL on another instance on the same store. It runs in a synctest
// bubble (the store is the embedded one, files only), so the cache's TTL
// passes on the bubble's clock: exactly, and without waiting.
func TestRevokeEndsCachedTokens(t *testing.T) {
	synctest.Test(t, testRevokeEndsCachedTokens)
}

func testRevokeEndsCachedTokens(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	a := &Credentials{Store: st, Clock: core.SystemClock{}}
	b := &Credentials{Store: st, Clock: core.SystemClock{}, CacheTTL: 200 * time.Millisecond}
	tok, err := a.Issue(ctx, "worker", "g1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.Issue(ctx, "planner", "g1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Credentials{a, b} {
		for _, tk := range []string{tok, other} {
			if _, err := c.Verify(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.Revoke(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("revoking instance: revoked token gives %v, want ErrUnauthenticated", err)
	}
	if id, err := a.Verify(ctx, other); err != nil || id != "planner" {
		t.Errorf("revoking instance: another agent's token gives %q, %v", id, err)
	}
	// The other instance answers from its cache until CacheTTL has passed
	// since it read the token, and from the store after.
	time.Sleep(199 * time.Millisecond) // on the bubble's clock
	if id, err := b.Verify(ctx, tok); err != nil || id != "worker" {
		t.Errorf("other instance within CacheTTL: %q, %v; want the cached answer", id, err)
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := b.Verify(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("other instance after CacheTTL (200ms) still accepts the revoked token: %v", err)
	}
}

// A verification that read the store before a Revoke answers from that read
// but does not cache it.
func TestRevokeDuringVerify(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	c := &Credentials{Store: st, Clock: core.SystemClock{}}
	tok, err := c.Issue(ctx, "worker", "g1")
	if err != nil {
		t.Fatal(err)
	}
	st.hold = make(chan chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Verify(ctx, tok)
		done <- err
	}()
	release := <-st.hold // the read has happened; the token still existed
	st.hold = nil
	if err := c.Revoke(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the verification in flight: %v (it read the token before the revocation)", err)
	}
	if _, err := c.Verify(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("after the revocation: %v, want ErrUnauthenticated (the read in flight must not have been cached)", err)
	}
}
