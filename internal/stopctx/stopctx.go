// Package stopctx makes contexts that end when a channel is closed: the
// way an owner of background work (the relay, an adapter) ends that work
// at shutdown without keeping a context in a struct.
package stopctx

import "context"

// Until returns a context, with no deadline and no values, that is done
// (context.Canceled) once stop is closed.
func Until(stop <-chan struct{}) context.Context {
	return untilClosed{Context: context.Background(), stop: stop}
}

type untilClosed struct {
	context.Context
	stop <-chan struct{}
}

func (c untilClosed) Done() <-chan struct{} { return c.stop }

func (c untilClosed) Err() error {
	select {
	case <-c.stop:
		return context.Canceled
	default:
		return nil
	}
}
