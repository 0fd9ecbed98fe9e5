package guard

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Commands that run another command: xargs, env, command, exec, nohup,
// time, nice, sudo and the like.

var xargsValue = "adEIiLlnPs"

func (a *analyzer) xargs(s *shState, args []string, in input, env map[string]string) {
	replace := ""
	i := 0
	for ; i < len(args); i++ {
		x := args[i]
		if x == "--" {
			i++
			break
		}
		if !strings.HasPrefix(x, "-") || x == "-" {
			break
		}
		if strings.HasPrefix(x, "--") {
			if strings.HasPrefix(x, "--replace") {
				replace = "{}"
				if _, v, ok := strings.Cut(x, "="); ok {
					replace = v
				}
			}
			continue
		}
		c := x[1]
		if strings.IndexByte(xargsValue, c) >= 0 {
			v := x[2:]
			if v == "" && c != 'i' && c != 'l' && i+1 < len(args) {
				i++
				v = args[i]
			}
			if c == 'I' {
				replace = v
			}
			if c == 'i' {
				replace = "{}"
				if v != "" {
					replace = v
				}
			}
		}
	}
	cmd := args[i:]
	if len(cmd) == 0 {
		cmd = []string{"echo"}
	}
	items := []string{unknown}
	if in.present && in.known {
		items = strings.Fields(in.text)
		if len(items) > maxLoopVals {
			items = []string{unknown}
		}
	}
	if len(items) == 0 {
		return
	}
	if replace != "" {
		for _, it := range items {
			argv := make([]string, len(cmd))
			for k, w := range cmd {
				argv[k] = strings.ReplaceAll(w, replace, it)
			}
			a.run(s.clone(), argv, stdinNone, env)
		}
		return
	}
	a.run(s.clone(), append(append([]string(nil), cmd...), items...), stdinNone, env)
}

// unwrap sees through commands that run another command: env, sudo,
// nohup, timeout …. It returns the wrapped command (nil if there is none)
// and whether name is a wrapper.
func (a *analyzer) unwrap(s *shState, name string, args []string, env map[string]string) ([]string, bool) {
	switch name {
	case "command":
		for _, x := range args {
			if x == "-v" || x == "-V" {
				return nil, true
			}
		}
		return skipOpts(args, "", nil), true
	case "builtin", "nohup", "setsid", "unbuffer", "catchsegv", "dbus-run-session", "fakeroot", "proxychains", "proxychains4",
		"torsocks", "tsocks", "xvfb-run", "caffeinate", "chronic", "ifne", "nocache", "eatmydata", "time", "exec", "noglob", "doas",
		"pkexec", "firejail", "valgrind", "ltrace", "unshare", "systemd-run", "sg", "scl":
		return skipOpts(args, "aCfFnNopuwsUgxe", []string{"user", "group", "output", "format", "chdir"}), true
	case "nice":
		return skipOpts(args, "n", []string{"adjustment"}), true
	case "ionice":
		return skipOpts(args, "cnp", []string{"class", "classdata", "pid"}), true
	case "stdbuf":
		return skipOpts(args, "ioe", []string{"input", "output", "error"}), true
	case "strace":
		return skipOpts(args, "abeEIoOpPsSuUX", []string{"output", "signal", "trace"}), true
	case "timeout":
		rest := skipOpts(args, "ks", []string{"kill-after", "signal"})
		if len(rest) > 1 {
			return rest[1:], true
		}
		return nil, true
	case "taskset":
		rest := skipOpts(args, "", nil)
		if len(rest) > 1 {
			return rest[1:], true
		}
		return nil, true
	case "chrt":
		rest := skipOpts(args, "T P D", nil)
		if len(rest) > 1 {
			return rest[1:], true
		}
		return nil, true
	case "chroot":
		rest := skipOpts(args, "", []string{"userspec", "groups"})
		if len(rest) > 1 {
			return rest[1:], true
		}
		return nil, true
	case "sudo":
		rest := skipOpts(args, "ughpCDrtUTR", []string{"user", "group", "host", "prompt", "close-from", "chdir", "role", "type", "other-user", "command-timeout"})
		for len(rest) > 0 && strings.Contains(rest[0], "=") && syntax.ValidName(strings.SplitN(rest[0], "=", 2)[0]) {
			rest = rest[1:]
		}
		return rest, true
	case "env":
		var out []string
		for i := 0; i < len(args); i++ {
			x := args[i]
			switch {
			case x == "-S" || x == "--split-string":
				if i+1 < len(args) {
					out = append(out, strings.Fields(args[i+1])...)
					out = append(out, args[i+2:]...)
				}
				return out, true
			case strings.HasPrefix(x, "-S"):
				return append(strings.Fields(x[2:]), args[i+1:]...), true
			case strings.HasPrefix(x, "--split-string="):
				return append(strings.Fields(strings.TrimPrefix(x, "--split-string=")), args[i+1:]...), true
			case x == "-u" || x == "-C" || x == "--unset" || x == "--chdir" || x == "-P":
				if x == "-C" || x == "--chdir" {
					if i+1 < len(args) {
						a.cd(s, args[i+1:i+2])
					}
				}
				i++
			case x == "--":
				continue
			case strings.HasPrefix(x, "-"):
			case strings.Contains(x, "=") && syntax.ValidName(strings.SplitN(x, "=", 2)[0]):
				k, v, _ := strings.Cut(x, "=")
				if env != nil {
					env[k] = v
				}
			default:
				return args[i:], true
			}
		}
		return nil, true
	case "su", "runuser":
		for i := 0; i < len(args); i++ {
			if (args[i] == "-c" || args[i] == "--command") && i+1 < len(args) {
				return []string{"sh", "-c", args[i+1]}, true
			}
			if strings.HasPrefix(args[i], "--command=") {
				return []string{"sh", "-c", strings.TrimPrefix(args[i], "--command=")}, true
			}
			if args[i] == "--" && name == "runuser" {
				return args[i+1:], true
			}
		}
		return nil, true
	case "script":
		for i := 0; i < len(args); i++ {
			if (args[i] == "-c" || args[i] == "--command") && i+1 < len(args) {
				return []string{"sh", "-c", args[i+1]}, true
			}
		}
		return nil, true
	case "flock":
		rest := skipOpts(args, "wEc", []string{"timeout", "conflict-exit-code", "command"})
		for i, x := range args {
			if (x == "-c" || x == "--command") && i+1 < len(args) {
				return []string{"sh", "-c", args[i+1]}, true
			}
		}
		if len(rest) > 1 {
			return rest[1:], true
		}
		return nil, true
	case "watch":
		rest := skipOpts(args, "nq", []string{"interval", "differences"})
		exec := false
		for _, x := range args {
			if x == "-x" || x == "--exec" {
				exec = true
			}
		}
		if len(rest) == 0 {
			return nil, true
		}
		if exec {
			return rest, true
		}
		return []string{"sh", "-c", strings.Join(rest, " ")}, true
	case "parallel":
		for i, x := range args {
			if x == ":::" || x == "::::" {
				cmd := skipOpts(args[:i], "jSP", nil)
				if len(cmd) == 0 {
					return nil, true
				}
				var out []string
				for _, v := range args[i+1:] {
					out = append(out, strings.Join(cmd, " ")+" "+v)
				}
				return []string{"sh", "-c", strings.Join(out, "\n")}, true
			}
		}
		return nil, false
	}
	return nil, false
}
