// Command switchboard-hook runs the AMP host hooks like "switchboard hook",
// in a binary that links only the motivation engine, so it starts in a
// fraction of the time: hosts run a hook on every tool call.
//
//	switchboard-hook pre-tool-use < payload.json
//	switchboard-hook hook pre-tool-use < payload.json   (same)
//	switchboard-hook install --host claude-code --command switchboard-hook
package main

import (
	"context"
	"os"

	"github.com/switchboard-hub/switchboard/internal/amp/hookcmd"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "hook" {
		args = args[1:]
	}
	os.Exit(hookcmd.Main(context.Background(), args, hookcmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
