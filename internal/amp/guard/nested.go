package guard

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
)

// Commands that run other text as shell: eval, sh -c, bash -c, and the
// commands the guard cannot see into (blind).

// eval checks a string run as shell code.
func (a *analyzer) eval(s *shState, src string) {
	if isUnknown(src) {
		if strings.TrimSpace(strings.ReplaceAll(src, unknown, "")) == "" {
			a.deny(CodeBlind, "it evaluates shell code the guard cannot see")
			return
		}
		// Known parts around an unknown value: check them, and deny if
		// they hold anything destructive once the value is filled in.
		a.blindScript(s, src)
		return
	}
	sub := s.clone()
	sub.depth++
	a.script(sub, src)
	s.cwd = sub.cwd
	for k, v := range sub.vars {
		s.vars[k] = v
	}
}

// blindScript checks shell code with unknown parts: each unknown part is
// replaced by a marker word; a command whose name is unknown is then
// checked by blind.
func (a *analyzer) blindScript(s *shState, src string) {
	sub := s.clone()
	sub.depth++
	sub.vars["__amp_unknown"] = unknownVar
	a.script(sub, strings.ReplaceAll(src, unknown, "${__amp_unknown}"))
	if a.found == nil && risky(strings.ReplaceAll(src, unknown, " ")) {
		a.deny(CodeBlind, "it runs shell code built from values the guard cannot know ("+clip(printable(src))+")")
	}
}

// shellInput checks code a shell reads from a pipe, a here-document or a
// process substitution.
func (a *analyzer) shellInput(s *shState, in input, what string) {
	switch {
	case !in.present:
	case in.known:
		a.eval(s, in.text)
	case in.file != "":
		a.scriptFile(s, in.file, nil, what, what == "source" || what == ".")
	default:
		from := in.from
		if from == "" {
			from = "a program's output"
		}
		a.deny(CodeBlind, what+" runs shell code it reads from "+from+", which the guard cannot see")
	}
}

// shell checks sh/bash/zsh … invocations: -c strings, scripts on stdin.
func (a *analyzer) shell(s *shState, name string, args []string, in input, env map[string]string) {
	if name == "busybox" {
		if len(args) > 0 {
			a.run(s, args, in, nil)
		}
		return
	}
	// Files the shell sources before the command: $BASH_ENV (and $ENV)
	// for a non-interactive bash, --rcfile for an interactive one.
	for _, k := range []string{"BASH_ENV", "ENV"} {
		f, ok := env[k]
		if !ok {
			if v, set := s.vars[k]; set && v.Kind == expand.String {
				f, ok = v.Str, true
			}
		}
		if ok && f != "" {
			a.scriptFile(s.clone(), f, nil, name+" (through $"+k+")", false)
		}
	}
	cmd, noexec := false, false
	var ops []string
	for i := 0; i < len(args); i++ {
		x := args[i]
		if x == "--" || x == "-" {
			ops = append(ops, args[i+1:]...)
			break
		}
		if strings.HasPrefix(x, "--") {
			if (x == "--rcfile" || x == "--init-file") && i+1 < len(args) {
				i++
				a.scriptFile(s.clone(), args[i], nil, name+" "+x, false)
			}
			continue
		}
		if (strings.HasPrefix(x, "-") || strings.HasPrefix(x, "+")) && len(x) > 1 {
			for _, c := range x[1:] {
				switch c {
				case 'c':
					cmd = true
				case 'n':
					if x[0] == '-' {
						noexec = true // bash -n: read commands, run none
					}
				case 'o', 'O':
					i++
				}
			}
			continue
		}
		ops = append(ops, args[i:]...)
		break
	}
	if noexec {
		return
	}
	sub := s.clone()
	sub.depth++
	if cmd {
		if len(ops) == 0 {
			return
		}
		sub.params, sub.paramsKnown = nil, true
		if len(ops) > 1 {
			sub.vars["0"] = strVar(ops[1]) // sh -c 'code' NAME args: $0 is NAME
		}
		if len(ops) > 2 {
			sub.params = append([]string(nil), ops[2:]...)
		}
		a.eval(sub, ops[0])
		return
	}
	if len(ops) == 0 || ops[0] == "/dev/stdin" {
		a.shellInput(sub, in, name)
		return
	}
	if p, ok := a.procs[ops[0]]; ok {
		a.shellInput(sub, p, name)
		return
	}
	a.scriptFile(s, ops[0], ops[1:], name, false)
}

// blind decides a command whose name is not known until it runs: deny
// when its arguments would be destructive for a command it could be.
func (a *analyzer) blind(s *shState, argv []string, in input) {
	args := argv[1:]
	if a.inBlind {
		a.deny(CodeBlind, "a command name built at run time runs another one the guard cannot know")
		return
	}
	for _, cand := range []string{"git", "rm", "find", "mv", "chmod", "dd", "shred", "truncate", "rsync", "sh", "python", "xargs"} {
		sub := &analyzer{paths: a.paths, lastFields: a.lastFields, inBlind: true, commands: a.commands, startCwd: a.startCwd}
		sub.run(s.clone(), append([]string{cand}, args...), in, nil)
		if sub.found != nil {
			a.deny(CodeBlind, "the command name is built at run time ("+clip(printable(argv[0]))+
				") and its arguments would be destructive if it were "+cand+": "+clip(printable(strings.Join(args, " "))))
			return
		}
	}
	for _, x := range args {
		if isUnknown(x) && len(args) == 1 {
			continue
		}
		switch strings.ToLower(x) {
		case "reset", "clean", "push", "--hard", "--force", "--mirror", "--delete", "-rf", "-fr", "-delete", "filter-branch":
			a.deny(CodeBlind, "the command name is built at run time ("+clip(printable(argv[0]))+") and its arguments look destructive")
			return
		}
	}
}
