package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func init() { register("version", "print the version", runVersion) }

func runVersion(_ context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(s.err)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "Usage: switchboard version\n\nPrints the version (set at build time, else the module's).")
	}
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	fmt.Fprintf(s.out, "switchboard %s\n", v)
	return exitOK
}
