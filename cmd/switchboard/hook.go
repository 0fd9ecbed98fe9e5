package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/amp/guard"
	"github.com/switchboard-hub/switchboard/internal/amp/hook"
)

func init() {
	register("hook", "AMP host hook (session-start, pre-tool-use, …) and hook install", runHook)
}

const hookUsage = `Usage:
  switchboard hook <event> [flags] < host-payload.json
  switchboard hook install --host claude-code [--write] [flags]

Runs the AMP 0.1 motivation engine for one host hook event. The host's hook
JSON is read on stdin (Claude Code's contract) and the reply JSON is written
on stdout. Nothing triggered → {} and exit 0; an internal fault never breaks
the host (answers {}), except pre-tool-use, whose guard fails closed (deny).

Events:
  session-start          restore pressure, arena and the compaction checkpoint
  user-prompt            detect giving-up and frustration phrases
  pre-tool-use           guard: deny answer/grading files and destructive git
  post-tool-use          count real failures (exit code, error, interrupted),
                         raise the pressure ladder, detect breakthroughs
  post-tool-use-failure  Claude Code's failed-tool event (always a failure)
  pre-compact            checkpoint the state and the reasoning summary
  stop                   confidence gate on an unverified completion claim

Environment:
  SWITCHBOARD_AMP_HOME     state directory (default ~/.switchboard/amp)
  SWITCHBOARD_AMP_PHRASES  phrase file (default <state dir>/phrases.json)
  PUAX_GUARD_MODE=eval     stricter guard (any git push, stash, fixtures)
`

var hookEvents = map[string]bool{
	"session-start": true, "user-prompt": true, "user-prompt-submit": true, "pre-tool-use": true,
	"post-tool-use": true, "post-tool-use-failure": true, "pre-compact": true, "stop": true,
	"SessionStart": true, "UserPromptSubmit": true, "PreToolUse": true, "PostToolUse": true,
	"PostToolUseFailure": true, "PreCompact": true, "Stop": true,
}

func runHook(ctx context.Context, args []string, s stdio) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(s.out, hookUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "install" {
		return runHookInstall(args[1:], s)
	}
	event := args[0]
	fs := flag.NewFlagSet("hook "+event, flag.ContinueOnError)
	fs.SetOutput(s.err)
	fs.Usage = func() { fmt.Fprint(fs.Output(), hookUsage, "\nFlags:\n"); fs.PrintDefaults() }
	stateDir := fs.String("state-dir", "", "state directory (default $SWITCHBOARD_AMP_HOME or ~/.switchboard/amp)")
	mode := fs.String("guard-mode", "", "guard mode: dev or eval (default $PUAX_GUARD_MODE, else dev)")
	phrases := fs.String("phrases", "", "phrase file overriding the built-in lists")
	ampOut := fs.Bool("amp", false, "also write the AMP envelope as one JSON line on stderr")
	noStopGate := fs.Bool("no-stop-gate", false, "never block Stop on an unverified completion claim")
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		// A host must never break on our flags: answer {} like any fault,
		// except for the guard, which fails closed.
		if event == "pre-tool-use" || event == "PreToolUse" {
			return hook.Run(ctx, event, strings.NewReader("not json"), s.out, hook.Options{Log: s.err})
		}
		fmt.Fprintln(s.out, "{}")
		return exitOK
	}
	if !hookEvents[event] {
		fmt.Fprintf(s.err, "switchboard hook: unknown event %q (run \"switchboard hook --help\")\n", event)
		fmt.Fprintln(s.out, "{}")
		return exitOK
	}
	opts := hook.Options{StateDir: *stateDir, PhrasesFile: *phrases, NoStopGate: *noStopGate, Log: s.err}
	switch *mode {
	case "":
	case string(guard.ModeEval):
		opts.GuardMode = guard.ModeEval
	default:
		opts.GuardMode = guard.ModeDev
	}
	if *ampOut {
		opts.Envelope = s.err
	}
	return hook.Run(ctx, event, stdinOf(s.in), s.out, opts)
}

// stdinOf returns in, or an empty reader when in is an interactive
// terminal (a person running the command by hand gets {} at once).
func stdinOf(in io.Reader) io.Reader {
	if f, ok := in.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return strings.NewReader("")
		}
	}
	return in
}

func runHookInstall(args []string, s stdio) int {
	fs := flag.NewFlagSet("hook install", flag.ContinueOnError)
	fs.SetOutput(s.err)
	host := fs.String("host", "", "host to configure (claude-code)")
	write := fs.Bool("write", false, "merge the hooks into the project's settings file instead of printing them")
	project := fs.String("project", ".", "project directory (for --write)")
	settings := fs.String("settings", "", "settings file to write (default <project>/.claude/settings.json)")
	command := fs.String("command", "switchboard", "command that runs switchboard in the hooks")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: switchboard hook install --host claude-code [--write] [flags]\n\n"+
			"Prints the Claude Code hooks configuration, or with --write merges it into\n"+
			"<project>/.claude/settings.json (other settings and hooks are kept; hooks\n"+
			"installed before by switchboard are replaced).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if *host == "" || fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	if !*write {
		cfg, err := hook.Config(*host, *command)
		if err != nil {
			fmt.Fprintf(s.err, "switchboard hook install: %v\n", err)
			return exitUsage
		}
		s.out.Write(cfg)
		return exitOK
	}
	path := *settings
	if path == "" {
		path = filepath.Join(*project, ".claude", "settings.json")
	}
	if err := hook.WriteSettings(path, *host, *command); err != nil {
		fmt.Fprintf(s.err, "switchboard hook install: %v\n", err)
		if errors.Is(err, hook.ErrUnknownHost) {
			return exitUsage
		}
		return exitFailure
	}
	fmt.Fprintf(s.out, "wrote the %s hooks to %s\n", *host, path)
	return exitOK
}
