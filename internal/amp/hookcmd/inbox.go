package hookcmd

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/amp/hook"
)

const inboxUsage = `Usage:
  switchboard hook inbox <session-start|user-prompt|stop> --hub URL --agent ID [--token-file FILE] < host-payload.json
  switchboard hook install --host claude-code --inbox --hub URL --agent ID [--token-file FILE] [--write]

A durable inbox on a Switchboard hub for a coding-agent host without
channels, through its hooks (Claude Code's hook contract):

  session-start, user-prompt  the agent's unread messages are added to the
                              next turn's context (hookSpecificOutput.
                              additionalContext) and acknowledged once shown
  stop                        while messages that ask for an answer are
                              unread, the session is kept going ({"decision":
                              "block", "reason": …} with the messages), at
                              most --max-stop-blocks Stops in a row

A failure (the hub away) answers {} and exit 0: the host is never broken.
The token is read from --token-file, else $SWITCHBOARD_TOKEN; the hub and
agent default to $SWITCHBOARD_HUB and $SWITCHBOARD_AGENT.

Flags:
`

func inboxFlags(name string, s Stdio) (*flag.FlagSet, *hook.InboxOptions, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(s.Err)
	o := &hook.InboxOptions{Log: s.Err}
	fs.StringVar(&o.Hub, "hub", os.Getenv("SWITCHBOARD_HUB"), "the hub's URL (env SWITCHBOARD_HUB)")
	fs.StringVar(&o.Agent, "agent", os.Getenv("SWITCHBOARD_AGENT"), "the agent whose inbox this is (env SWITCHBOARD_AGENT)")
	tokenFile := fs.String("token-file", "", "file holding the agent's token (default: env SWITCHBOARD_TOKEN)")
	fs.StringVar(&o.StateDir, "state-dir", "", "where the Stop counters are kept (default ~/.switchboard/inbox)")
	fs.IntVar(&o.MaxStopBlocks, "max-stop-blocks", 3, "Stops blocked in a row at most")
	fs.IntVar(&o.Max, "max", 10, "messages shown at once at most")
	fs.Usage = func() {
		fmt.Fprint(s.Err, inboxUsage)
		fs.PrintDefaults()
	}
	return fs, o, tokenFile
}

// runInbox runs "switchboard hook inbox EVENT [flags]".
func runInbox(ctx context.Context, args []string, s Stdio) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(s.Out, inboxUsage)
		return ExitOK
	}
	if len(args) == 0 {
		// A host reads a non-zero exit as "block": answer {} and explain.
		fmt.Fprint(s.Err, inboxUsage)
		fmt.Fprintln(s.Out, "{}")
		return ExitOK
	}
	event := args[0]
	fs, o, tokenFile := inboxFlags("hook inbox", s)
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintln(s.Out, "{}")
		return ExitUsage
	}
	o.Token = os.Getenv("SWITCHBOARD_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(s.Err, "switchboard hook inbox: %v\n", err)
			fmt.Fprintln(s.Out, "{}")
			return ExitOK
		}
		o.Token = strings.TrimSpace(string(b))
	}
	return hook.RunInbox(ctx, event, stdinOf(s.In), s.Out, *o)
}

// runInboxInstall runs "switchboard hook install --inbox …".
func runInboxInstall(args []string, s Stdio) int {
	fs, o, tokenFile := inboxFlags("hook install --inbox", s)
	host := fs.String("host", "claude-code", "host to configure (claude-code)")
	write := fs.Bool("write", false, "merge the hooks into the project's settings file instead of printing them")
	project := fs.String("project", ".", "project directory (for --write)")
	settings := fs.String("settings", "", "settings file to write (default <project>/.claude/settings.json)")
	command := fs.String("command", "switchboard", "command that runs switchboard in the hooks")
	fs.Bool("inbox", true, "install the inbox hooks")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if *host != hook.HostClaudeCode {
		fmt.Fprintf(s.Err, "switchboard hook install: %v %q\n", hook.ErrUnknownHost, *host)
		return ExitUsage
	}
	in := hook.InboxInstall{Command: *command, Hub: o.Hub, Agent: o.Agent, TokenFile: *tokenFile}
	if !*write {
		cfg, err := hook.InboxConfig(in)
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
	if err := hook.WriteInboxSettings(path, in); err != nil {
		fmt.Fprintf(s.Err, "switchboard hook install: %v\n", err)
		return ExitFailure
	}
	fmt.Fprintf(s.Out, "wrote the inbox hooks to %s\n", path)
	return ExitOK
}

// hasFlag reports whether args hold --name (or -name).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--"+name || a == "-"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}
