package core

import "context"

type traceKey struct{}

// WithTraceParent returns ctx carrying a W3C traceparent; Relay.Send gives
// it to a message that has none, so every ingress protocol carries the
// caller's trace into the store and on to the delivery.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, tp)
}

// TraceParentFrom returns the traceparent in ctx, if any.
func TraceParentFrom(ctx context.Context) string {
	tp, _ := ctx.Value(traceKey{}).(string)
	return tp
}
