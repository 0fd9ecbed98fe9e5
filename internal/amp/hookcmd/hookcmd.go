// Package hookcmd is the command line of the AMP host hooks, shared by
// "switchboard hook" and the switchboard-hook binary.
package hookcmd

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

// Exit codes, as the switchboard command's.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Stdio is the process's standard streams.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

const hookUsage = `Usage:
  switchboard hook <event> [flags] < host-payload.json
  switchboard hook install --host claude-code [--write] [flags]
  switchboard hook inbox <event> --hub URL --agent ID   (see switchboard hook inbox --help)

Runs the AMP 0.1 motivation engine for one host hook event. The host's hook
JSON is read on stdin (Claude Code's contract) and the reply JSON is written
on stdout. Nothing triggered → {} and exit 0; an internal fault never breaks
the host (answers {}), except pre-tool-use, whose guard fails closed (deny).

Events:
  session-start          restore pressure, arena and the compaction checkpoint
  user-prompt            detect giving-up and frustration phrases
  pre-tool-use           guard: deny answer/grading files, destructive commands
                         (parsed as bash runs them) and skipped verification
  post-tool-use          count real failures (exit code, error, interrupted),
                         raise the pressure ladder, detect breakthroughs
  post-tool-use-failure  Claude Code's failed-tool event (always a failure)
  pre-compact            checkpoint the state and the reasoning summary
  stop                   confidence gate on an unverified completion claim

Flags (for every event):
  --state-dir DIR        state directory (default $SWITCHBOARD_AMP_HOME)
  --guard-mode MODE      dev or eval (default $PUAX_GUARD_MODE, else dev)
  --phrases FILE         phrase file overriding the built-in lists
  --amp                  also write the AMP envelope as one JSON line on stderr
  --no-stop-gate         never block Stop on an unverified completion claim
The reference hook's flags override the payload: --session-id, --message
(the prompt, or Stop's last assistant text), --tool, --tool-args JSON,
--result JSON-or-text, --error; --harness and --metadata are accepted and
ignored. Unknown flags are skipped (reported on stderr); the event is still
handled. With no event at all the hook answers {} and exits 0.

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

// valueFlags and boolFlags are the flags of an event run: ours and the
// reference hook's (--session-id, --message, --tool, --tool-args,
// --result, --error, --harness, --metadata).
var (
	valueFlags = map[string]bool{"state-dir": true, "guard-mode": true, "phrases": true, "session-id": true, "message": true,
		"tool": true, "tool-args": true, "result": true, "error": true, "harness": true, "metadata": true}
	boolFlags = map[string]bool{"amp": true, "no-stop-gate": true}
)

// parseEventFlags reads an event's flags. Like the reference it never
// refuses a command line: an unknown flag is skipped (with the next word,
// if that is not a flag, as its value) and reported on stderr, and the
// event is still handled.
func parseEventFlags(args []string, errw io.Writer) (vals map[string]string, help bool) {
	vals = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "--help" || a == "-help" {
			return vals, true
		}
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			fmt.Fprintf(errw, "switchboard hook: ignoring argument %q\n", a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case valueFlags[name]:
			if !hasVal {
				if i+1 >= len(args) {
					fmt.Fprintf(errw, "switchboard hook: flag --%s needs a value; ignored\n", name)
					continue
				}
				i++
				val = args[i]
			}
			vals[name] = val
		case boolFlags[name]:
			if !hasVal {
				val = "true"
			}
			vals[name] = val
		default:
			fmt.Fprintf(errw, "switchboard hook: ignoring unknown flag %q\n", a)
			if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
		}
	}
	return vals, false
}

// Main runs "switchboard hook ARGS…": one hook event, or install. It
// returns the process exit code. Both the switchboard binary and the small
// switchboard-hook binary (which starts faster: it links nothing but the
// engine) call it.
func Main(ctx context.Context, args []string, s Stdio) int {
	if len(args) == 0 {
		// A host reads a non-zero exit as "block": with no event, answer
		// {} and exit 0 as AMP asks, and explain on stderr.
		fmt.Fprint(s.Err, hookUsage)
		fmt.Fprintln(s.Out, "{}")
		return ExitOK
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(s.Out, hookUsage)
		return ExitOK
	}
	if args[0] == "install" {
		if hasFlag(args[1:], "inbox") {
			return runInboxInstall(args[1:], s)
		}
		return runHookInstall(args[1:], s)
	}
	if args[0] == "inbox" {
		return runInbox(ctx, args[1:], s)
	}
	event := args[0]
	vals, help := parseEventFlags(args[1:], s.Err)
	if help {
		fmt.Fprint(s.Out, hookUsage)
		return ExitOK
	}
	if !hookEvents[event] {
		fmt.Fprintf(s.Err, "switchboard hook: unknown event %q (run \"switchboard hook --help\")\n", event)
		fmt.Fprintln(s.Out, "{}")
		return ExitOK
	}
	opts := hook.Options{StateDir: vals["state-dir"], PhrasesFile: vals["phrases"], Log: s.Err,
		NoStopGate: isTrue(vals["no-stop-gate"]),
		Flags: hook.Flags{SessionID: vals["session-id"], Message: vals["message"], Tool: vals["tool"],
			ToolArgs: vals["tool-args"], Result: vals["result"], Error: vals["error"]}}
	switch mode := vals["guard-mode"]; mode {
	case "":
	case string(guard.ModeEval):
		opts.GuardMode = guard.ModeEval
	case string(guard.ModeDev):
		opts.GuardMode = guard.ModeDev
	default:
		// The host must not break on it; say so and guard as dev does.
		fmt.Fprintf(s.Err, "switchboard hook: --guard-mode %q: want dev or eval; using dev\n", mode)
		opts.GuardMode = guard.ModeDev
	}
	if isTrue(vals["amp"]) {
		opts.Envelope = s.Err
	}
	return hook.Run(ctx, event, stdinOf(s.In), s.Out, opts)
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
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

func runHookInstall(args []string, s Stdio) int {
	fs := flag.NewFlagSet("hook install", flag.ContinueOnError)
	fs.SetOutput(s.Err)
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
		if err == flag.ErrHelp {
			return ExitOK
		}
		return ExitUsage
	}
	if *host == "" || fs.NArg() > 0 {
		fs.Usage()
		return ExitUsage
	}
	if !*write {
		cfg, err := hook.Config(*host, *command)
		if err != nil {
			fmt.Fprintf(s.Err, "switchboard hook install: %v\n", err)
			return ExitUsage
		}
		s.Out.Write(cfg)
		return ExitOK
	}
	path := *settings
	if path == "" {
		path = filepath.Join(*project, ".claude", "settings.json")
	}
	if err := hook.WriteSettings(path, *host, *command); err != nil {
		fmt.Fprintf(s.Err, "switchboard hook install: %v\n", err)
		if errors.Is(err, hook.ErrUnknownHost) {
			return ExitUsage
		}
		return ExitFailure
	}
	fmt.Fprintf(s.Out, "wrote the %s hooks to %s\n", *host, path)
	return ExitOK
}
