package stopctx

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	stop := make(chan struct{})
	ctx := Until(stop)
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err before stop: %v", err)
	}
	select {
	case <-ctx.Done():
		t.Fatal("done before stop")
	default:
	}
	if _, ok := ctx.Deadline(); ok {
		t.Error("a deadline, want none")
	}
	// A child context sees the end too (context propagates it through
	// Done, as it does for contexts of its own).
	child, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	close(stop)
	<-ctx.Done()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after stop: %v, want context.Canceled", err)
	}
	<-child.Done()
	if err := child.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("child's Err after stop: %v, want context.Canceled", err)
	}
}
