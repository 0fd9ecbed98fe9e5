package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

func init() {
	register("completion", "print a shell completion script (completion bash | zsh | fish)", runCompletion)
	// __complete answers the completion scripts; it is not listed.
	hidden["__complete"] = true
	register("__complete", "", runComplete)
}

// hidden commands are left out of the usage.
var hidden = map[string]bool{}

// subcommands of the commands that have them, for completion.
var subcommands = map[string][]string{
	"agents":     {"list", "deregister"},
	"dlq":        {"list", "replay"},
	"token":      {"rotate", "revoke"},
	"context":    {"list", "use", "remove"},
	"completion": {"bash", "zsh", "fish"},
	"hook":       {"install", "session-start", "user-prompt-submit", "pre-tool-use", "post-tool-use", "stop"},
}

var completionScripts = map[string]string{
	"bash": `# bash completion for switchboard: source it, or put it in
# /etc/bash_completion.d/switchboard (or ~/.local/share/bash-completion/completions/switchboard).
_switchboard() {
	local IFS=$'\n'
	COMPREPLY=($(switchboard __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _switchboard switchboard
`,
	"zsh": `#compdef switchboard
# zsh completion for switchboard: put it in a directory of $fpath as _switchboard,
# or source it after compinit.
_switchboard() {
	local -a candidates
	candidates=("${(@f)$(switchboard __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	compadd -a candidates
}
if [ "$funcstack[1]" = "_switchboard" ]; then _switchboard "$@"; else compdef _switchboard switchboard; fi
`,
	"fish": `# fish completion for switchboard: put it in ~/.config/fish/completions/switchboard.fish
complete -c switchboard -f -a '(switchboard __complete (commandline -opc)[2..-1] (commandline -ct))'
`,
}

func runCompletion(_ context.Context, args []string, s stdio) int {
	usage := `Usage: switchboard completion bash|zsh|fish

Prints a completion script for the shell: commands, subcommands and every
command's flags complete with Tab. For example:
  source <(switchboard completion bash)                # this bash session
  switchboard completion zsh > "${fpath[1]}/_switchboard"
  switchboard completion fish > ~/.config/fish/completions/switchboard.fish`
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(s.err, usage)
		return exitOK
	}
	if len(args) != 1 || completionScripts[args[0]] == "" {
		fmt.Fprintln(s.err, usage)
		return exitUsage
	}
	fmt.Fprint(s.out, completionScripts[args[0]])
	return exitOK
}

// runComplete prints the candidates for the last of args (the word being
// completed, maybe empty), given the words before it, one a line.
func runComplete(ctx context.Context, args []string, s stdio) int {
	if len(args) == 0 {
		args = []string{""}
	}
	words, cur := args[:len(args)-1], args[len(args)-1]
	var cands []string
	switch {
	case len(words) == 0 || (len(words) == 1 && words[0] == "help"):
		for name := range commands {
			if !hidden[name] {
				cands = append(cands, name)
			}
		}
		if len(words) == 0 {
			cands = append(cands, "help")
		}
	case strings.HasPrefix(cur, "-"):
		path := []string{words[0]}
		if len(words) > 1 && contains(subcommands[words[0]], words[1]) {
			path = append(path, words[1])
		}
		cands = flagsOf(ctx, path)
	case len(words) == 1:
		cands = subcommands[words[0]]
	}
	sort.Strings(cands)
	for _, c := range cands {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(s.out, c)
		}
	}
	return exitOK
}

var flagLine = regexp.MustCompile(`^\s+-{1,2}([a-zA-Z0-9][a-zA-Z0-9-]*)`)

// flagsOf lists a command's flags as its --help prints them, so that
// completion can never disagree with the flags themselves.
func flagsOf(ctx context.Context, path []string) []string {
	c, ok := commands[path[0]]
	if !ok || hidden[path[0]] || path[0] == "completion" {
		return nil
	}
	var buf bytes.Buffer
	c.run(ctx, append(append([]string(nil), path[1:]...), "--help"), stdio{in: strings.NewReader(""), out: &buf, err: &buf})
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		if m := flagLine.FindStringSubmatch(sc.Text()); m != nil && !seen[m[1]] && m[1] != "h" && m[1] != "help" {
			seen[m[1]] = true
			out = append(out, "--"+m[1])
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
