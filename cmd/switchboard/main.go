// Command switchboard is the Switchboard hub and its command-line clients.
//
// Run "switchboard help" for the list of subcommands.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes that scripts can rely on.
const (
	exitOK       = 0 // success
	exitFailure  = 1 // the operation ran and failed (e.g. a message ended timeout)
	exitUsage    = 2 // bad flags or arguments, or a request the hub refused as malformed or unauthorised
	exitNotFound = 3 // the thing asked for does not exist
	exitUnavail  = 4 // the hub could not be reached
)

// stdio is the process's standard streams, passed to subcommands so that
// tests can run them in-process.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, s stdio) int
}

// commands is the subcommand table.
var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, s stdio) int) {
	commands[name] = command{summary: summary, run: run}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}

func runMain(ctx context.Context, args []string, s stdio) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			c, ok := commands[args[1]]
			if !ok {
				fmt.Fprintf(s.err, "switchboard: unknown command %q\n\n", args[1])
				usage(s.err)
				return exitUsage
			}
			return c.run(ctx, []string{"--help"}, stdio{in: s.in, out: s.out, err: s.out})
		}
		usage(s.out)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(s.err, "switchboard: unknown command %q\n\n", args[0])
		usage(s.err)
		return exitUsage
	}
	if helpAsked(args[1:]) {
		// Help that was asked for is the answer: it goes to standard
		// output (usage after a mistake goes to standard error).
		s.err = s.out
	}
	return c.run(ctx, args[1:], s)
}

// helpAsked reports whether args ask for help (-h, -help or --help before
// any "--").
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Switchboard: a hub where agents register, find each other and exchange messages durably.")
	fmt.Fprintln(w, "\nUsage: switchboard <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		if !hidden[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun \"switchboard <command> --help\" for a command's flags.")
	fmt.Fprintln(w, "Exit codes: 0 ok, 1 failed, 2 usage (also a request the hub refused as")
	fmt.Fprintln(w, "malformed or unauthorised), 3 not found, 4 hub unreachable.")
}

// parseArgs parses a command's flags wherever they stand among its
// arguments, as most command lines allow (`receipts m1 --json` as well as
// `receipts --json m1`; everything after "--" is an argument), and checks
// that exactly want arguments remain. When ok is false the command ends
// with code: 0 after --help, 2 (usage) otherwise.
func parseArgs(fs *flag.FlagSet, args []string, want int) (pos []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, flagExit(err), false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...) // all arguments after "--"
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) != want {
		if len(pos) > want {
			fmt.Fprintf(fs.Output(), "switchboard %s: unexpected argument %q\n\n", fs.Name(), pos[want])
		}
		fs.Usage()
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// flagExit maps a flag parsing error to an exit code: --help is success.
func flagExit(err error) int {
	if err == flag.ErrHelp {
		return exitOK
	}
	return exitUsage
}
