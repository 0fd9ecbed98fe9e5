package main

import (
	"context"

	"github.com/switchboard-hub/switchboard/internal/amp/hookcmd"
)

func init() {
	register("hook", "AMP host hook (session-start, pre-tool-use, …) and hook install", runHook)
}

func runHook(ctx context.Context, args []string, s stdio) int {
	return hookcmd.Main(ctx, args, hookcmd.Stdio{In: s.in, Out: s.out, Err: s.err})
}
