package guard

import (
	"os"
	"path"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// call checks one simple command.
func (a *analyzer) call(s *shState, c *syntax.CallExpr, in input) {
	for _, as := range c.Assigns {
		a.nested(s, as.Value)
		a.nested(s, as.Array)
	}
	for _, w := range c.Args {
		a.nested(s, w)
	}
	if a.found != nil {
		return
	}
	if len(c.Args) == 0 {
		for _, as := range c.Assigns {
			a.assign(s, as)
		}
		return
	}
	// Assignments before a command apply to that command only.
	env := map[string]string{}
	for _, as := range c.Assigns {
		if as.Name != nil {
			env[as.Name.Value] = a.literal(s, as.Value)
		}
	}
	a.procs = nil
	argv := a.fields(s, c.Args)
	if len(argv) == 0 {
		return
	}
	a.lastFields = make(map[string]bool, len(argv))
	for _, f := range argv {
		a.lastFields[f] = true
	}
	if isUnknown(argv[0]) && unquotedExpansion(c.Args[0]) && len(argv) == 1 {
		a.deny(CodeBlind, "the command is a variable or command substitution the guard cannot know ("+
			clip(printable(argv[0]))+"): it could run anything")
		return
	}
	if argv[0] == "eval" && envGenerator(c.Args[1:]) {
		return // eval "$(ssh-agent -s)" and the like set environment variables
	}
	if alias, ok := s.aliases[argv[0]]; ok && s.depth < maxDepth && unquotedLit(c.Args[0]) {
		sub := s.clone()
		sub.depth++
		a.script(sub, alias+" "+quoteWords(argv[1:]))
		return
	}
	a.run(s, argv, in, env)
}

// unquotedExpansion reports whether w has a parameter expansion or a
// command substitution outside quotes (its value is split into words).
func unquotedExpansion(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp:
			return true
		}
	}
	return false
}

func unquotedLit(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	return ok && !strings.Contains(l.Value, `\`)
}

// envGenerators print shell code that sets up the environment; eval of
// their output is a common and harmless idiom.
var envGenerators = map[string]bool{
	"ssh-agent": true, "pyenv": true, "rbenv": true, "nodenv": true, "goenv": true, "jenv": true, "direnv": true,
	"dircolors": true, "keychain": true, "conda": true, "brew": true, "opam": true, "starship": true, "zoxide": true,
	"fnm": true, "mise": true, "rtx": true, "asdf": true, "thefuck": true, "gpg-agent": true, "luarocks": true,
	"register-python-argcomplete": true, "kubectl": true, "minikube": true, "docker-machine": true, "pdm": true,
	"poetry": true, "uv": true, "rustup": true, "nvm": true, "hub": true, "gh": true,
}

func envGenerator(words []*syntax.Word) bool {
	if len(words) == 0 {
		return false
	}
	for _, w := range words {
		var cs *syntax.CmdSubst
		for _, p := range w.Parts {
			switch p := p.(type) {
			case *syntax.CmdSubst:
				cs = p
			case *syntax.DblQuoted:
				if len(p.Parts) == 1 {
					cs, _ = p.Parts[0].(*syntax.CmdSubst)
				}
			}
		}
		if cs == nil || len(cs.Stmts) != 1 {
			return false
		}
		call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 || !unquotedLit(call.Args[0]) {
			return false
		}
		if !envGenerators[path.Base(call.Args[0].Lit())] {
			return false
		}
	}
	return true
}

// quoteWords quotes words for a shell script.
func quoteWords(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		q, err := syntax.Quote(w, syntax.LangBash)
		if err != nil {
			q = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		b.WriteString(q)
	}
	return b.String()
}

// textCommands print or test their arguments and never read them as
// files.
var textCommands = map[string]bool{
	"echo": true, "printf": true, ":": true, "true": true, "false": true, "test": true, "[": true, "[[": true,
	"exit": true, "return": true, "export": true, "local": true, "declare": true, "readonly": true, "typeset": true,
	"let": true, "shift": true, "set": true, "unset": true, "which": true, "type": true, "hash": true, "help": true,
	"command_not_found_handle": true, "sleep": true, "expr": true, "seq": true, "date": true, "logger": true,
	"notify-send": true, "say": true, "wait": true, "kill": true, "trap": true, "read": true, "mapfile": true,
	"readarray": true, "getopts": true, "exec": true, "cd": true, "pushd": true, "popd": true, "dirs": true,
	"alias": true, "unalias": true, "shopt": true, "ulimit": true, "umask": true, "jobs": true, "fg": true, "bg": true,
	"disown": true, "source": true, ".": true, "history": true, "fc": true, "enable": true, "caller": true,
	"compgen": true, "complete": true, "basename": true, "dirname": true, "mktemp": true, "yes": true,
}

// searchCommands take a pattern as their first operand.
var searchCommands = map[string]bool{"grep": true, "egrep": true, "fgrep": true, "rg": true, "ag": true, "ack": true, "git-grep": true}

// run checks a command given as expanded words. env holds the
// assignments written before it.
func (a *analyzer) run(s *shState, argv []string, in input, env map[string]string) {
	if a.found != nil || len(argv) == 0 {
		return
	}
	a.commands++
	if a.commands > maxCommands {
		a.deny(CodeBlind, errBudget.Error())
		return
	}
	name := argv[0]
	args := argv[1:]
	if isUnknown(name) {
		a.blind(s, argv, in)
		return
	}
	if f, ok := s.funcs[name]; ok {
		if s.depth >= maxDepth {
			a.deny(CodeBlind, "functions call each other too deeply to check")
			return
		}
		sub := s.clone()
		sub.depth++
		sub.params, sub.paramsKnown = append([]string(nil), args...), true
		a.stmt(sub, f, in)
		// a function runs in the caller's shell: its cd and variables stay
		s.cwd = sub.cwd
		for k, v := range sub.vars {
			s.vars[k] = v
		}
		return
	}
	base := path.Base(name)
	if strings.HasPrefix(name, "\\") {
		base = strings.TrimPrefix(base, "\\")
	}
	if wrapped, ok := a.unwrap(s, base, args, env); ok {
		if len(wrapped) > 0 {
			a.run(s, wrapped, in, env)
		}
		return
	}
	defer a.mention(s, base, args)
	// Reads of answer files, by any command that takes paths.
	if !textCommands[base] && base != "git" {
		skip := -1
		if searchCommands[base] {
			skip = firstOperand(args)
			for _, x := range args {
				if x == "-e" || x == "-f" || strings.HasPrefix(x, "--regexp") || strings.HasPrefix(x, "--file") {
					skip = -1
				}
			}
		}
		for i, x := range args {
			if i == skip {
				continue
			}
			if a.pathArg(s, x) {
				return
			}
		}
		if searchCommands[base] && a.recursiveSearch(s, base, args, skip) {
			return
		}
	}
	switch base {
	case "cd", "pushd", "chdir":
		a.cd(s, args)
	case "popd":
		s.cwd = ""
	case "set":
		for i, x := range args {
			if x == "--" {
				s.params, s.paramsKnown = append([]string(nil), args[i+1:]...), true
				break
			}
		}
	case "shift":
		n := 1
		if len(args) > 0 {
			n, _ = strconv.Atoi(args[0])
		}
		if s.paramsKnown && n <= len(s.params) && n >= 0 {
			s.params = s.params[n:]
		} else {
			s.paramsKnown = false
		}
	case "unset":
		for _, x := range args {
			if !strings.HasPrefix(x, "-") {
				delete(s.vars, x)
				s.vars[x] = strVar("")
			}
		}
	case "read", "mapfile", "readarray", "getopts", "printf":
		for _, x := range args {
			if syntax.ValidName(x) {
				s.vars[x] = unknownVar
			}
		}
	case "alias":
		for _, x := range args {
			if k, v, ok := strings.Cut(x, "="); ok {
				s.aliases[k] = v
			}
		}
	case "unalias":
		for _, x := range args {
			delete(s.aliases, x)
		}
	case "export", "declare", "typeset", "local", "readonly":
		for _, x := range args {
			if k, v, ok := strings.Cut(x, "="); ok && syntax.ValidName(k) {
				s.vars[k] = strVar(v)
			}
		}
	case "eval":
		a.eval(s, strings.Join(args, " "))
	case "trap":
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			a.eval(s, args[0])
		}
	case "source", ".":
		if len(args) > 0 {
			if p, ok := a.procs[args[0]]; ok {
				a.shellInput(s, p, "source")
			} else if args[0] != "/dev/stdin" {
				a.scriptFile(s, args[0], args[1:], base, true)
			} else {
				a.shellInput(s, in, base)
			}
		}
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "rbash", "yash", "posh", "busybox":
		a.shell(s, base, args, in, env)
	case "git":
		a.git(s, args, env)
	case "rm", "trash", "trash-put", "rmtrash", "srm", "wipe", "rimraf", "del", "del-cli", "unlink", "rmdir":
		a.rm(s, base, args, in)
	case "find":
		a.find(s, args)
	case "xargs":
		a.xargs(s, args, in, env)
	case "dd":
		for _, x := range args {
			if v, ok := strings.CutPrefix(x, "of="); ok {
				a.writeTo(s, v, "dd")
			}
			if v, ok := strings.CutPrefix(x, "if="); ok {
				a.anti(s, v)
			}
		}
	case "shred", "truncate", "tee", "fallocate":
		sp := gnuSpec{value: "sonr", long: []string{"size", "reference", "iterations", "random-source", "output-error"}}
		if base == "tee" {
			sp = gnuSpec{long: []string{"append", "ignore-interrupts", "output-error"}}
		}
		_, ops := sp.scan(args)
		for _, x := range ops {
			if a.writeTo(s, x, base) {
				return
			}
		}
	case "cp", "install", "ln", "link":
		a.copyLike(s, base, args)
	case "mv":
		a.mv(s, args)
	case "chmod", "chown", "chgrp", "chattr", "setfacl", "chcon":
		a.chmod(s, base, args)
	case "sed":
		a.sed(s, args)
	case "rsync":
		a.rsync(s, args)
	case "tar", "bsdtar", "zip", "7z", "7za":
		a.archiveMove(s, base, args)
	case "mkfs", "mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "parted", "blkdiscard", "mkntfs":
		a.deny(CodeDestructive, base+" formats or repartitions a disk")
	case "make", "gmake":
		a.makeRun(s, base, args, in, env)
	case "npx", "bunx", "pnpx":
		if ops := skipOpts(args, "p", []string{"package", "call"}); len(ops) > 0 {
			a.run(s, ops, in, env)
		}
	case "pnpm", "yarn", "npm":
		if len(args) > 1 && (args[0] == "dlx" || args[0] == "exec" || args[0] == "x") {
			a.run(s, args[1:], in, env)
			return
		}
		a.npmScript(s, base, args)
	default:
		if strings.HasPrefix(base, "mkfs.") {
			a.deny(CodeDestructive, base+" formats a disk")
			return
		}
		if strings.Contains(name, "/") {
			a.execFile(s, name, args)
		} else if p := a.lookPath(s, env, name); p != "" {
			a.execFile(s, p, args)
		}
		a.interpreter(s, base, args, in)
	}
	if a.found == nil && a.mode == ModeEval {
		for _, x := range args {
			lx := strings.ToLower(x)
			if strings.Contains(lx, "[skip ci]") || strings.Contains(lx, "[ci skip]") || strings.Contains(lx, "[skip-ci]") ||
				strings.Contains(lx, "skip_ci") {
				a.deny(CodeCIBypass, "skipping CI is not allowed in eval mode")
				return
			}
		}
	}
}

// recursiveSearch denies a recursive search (grep -r, rg …) rooted right
// above an existing hidden-test or grading directory, as for the Grep tool.
func (a *analyzer) recursiveSearch(s *shState, base string, args []string, pattern int) bool {
	recursive := base == "rg" || base == "ag" || base == "ack"
	var roots []string
	for i, x := range args {
		switch {
		case i == pattern:
		case x == "--recursive" || x == "--dereference-recursive" || x == "--directories=recurse":
			recursive = true
		case strings.HasPrefix(x, "-") && !strings.HasPrefix(x, "--") && strings.ContainsAny(x[1:], "rR"):
			recursive = true
		case strings.HasPrefix(x, "-"):
		case pattern >= 0 && i > pattern:
			roots = append(roots, x)
		case pattern < 0 && i > 0 && args[i-1] != "-e" && args[i-1] != "-f":
			roots = append(roots, x) // grep -e PATTERN dir
		}
	}
	if !recursive {
		return false
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	for _, r := range roots {
		if isUnknown(r) {
			continue
		}
		if d := searchRoot(a.paths, r, s.cwd); d.Deny {
			a.deny(CodeAntiCheat, strings.TrimPrefix(d.Reason, CodeAntiCheat+": "))
			return true
		}
	}
	return false
}

// archiveMove checks archivers that delete what they archive: tar
// --remove-files, zip -m/--move, 7z -sdel.
func (a *analyzer) archiveMove(s *shState, name string, args []string) {
	moves := false
	for _, x := range args {
		switch {
		case (name == "tar" || name == "bsdtar") && strings.HasPrefix(x, "--remove-f") && strings.HasPrefix("--remove-files", x):
			moves = true
		case name == "zip" && (x == "--move" || strings.HasPrefix(x, "-") && !strings.HasPrefix(x, "--") && strings.Contains(x, "m")):
			moves = true
		case strings.HasPrefix(name, "7z") && x == "-sdel":
			moves = true
		}
	}
	if !moves {
		return
	}
	for _, x := range args {
		if strings.HasPrefix(x, "-") {
			continue
		}
		if why := a.deletion(s.cwd, x, true); why != "" {
			a.deny(CodeDestructive, name+" deletes what it archives, and "+printable(x)+" is blocked: "+why)
			return
		}
	}
}

// lookPath finds a command in the directories the script itself put on
// PATH (PATH=./scripts:$PATH x.sh); "" when PATH is not set by the script
// or the command is not in one of its known directories.
func (a *analyzer) lookPath(s *shState, env map[string]string, name string) string {
	p, ok := env["PATH"]
	if !ok {
		v, set := s.vars["PATH"]
		if !set || v.Kind != expand.String {
			return ""
		}
		p = v.Str
	}
	for _, dir := range strings.Split(p, ":") {
		if isUnknown(dir) {
			continue
		}
		if dir == "" {
			dir = "."
		}
		cand, known := resolve(s.cwd, dir+"/"+name)
		if !known {
			continue
		}
		if a.fs.written[cand] {
			return cand
		}
		if fi, err := os.Stat(cand); err == nil && !fi.IsDir() {
			return cand
		}
	}
	return ""
}

// pathArg denies an argument that names an answer or grading file.
func (a *analyzer) pathArg(s *shState, x string) bool {
	cand := x
	if j := strings.IndexByte(x, '='); j >= 0 && strings.HasPrefix(x, "-") {
		cand = x[j+1:]
	}
	if !strings.ContainsAny(cand, "/.") {
		return false
	}
	return a.anti(s, cand)
}

func firstOperand(args []string) int {
	for i, x := range args {
		if x == "--" {
			if i+1 < len(args) {
				return i + 1
			}
			return -1
		}
		if !strings.HasPrefix(x, "-") || x == "-" {
			return i
		}
	}
	return -1
}

func (a *analyzer) cd(s *shState, args []string) {
	ops := skipOpts(args, "", nil)
	target := ""
	if len(ops) > 0 {
		target = ops[0]
	}
	switch {
	case target == "" || target == "~":
		s.cwd = a.home
	case target == "-" || isUnknown(target):
		s.cwd = ""
	default:
		abs, known := resolve(s.cwd, target)
		if known {
			s.cwd = abs
		} else {
			s.cwd = ""
		}
	}
}

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

// gnuSpec describes a GNU-style command's options: short letters that
// take a value, and long option names (for unique-prefix abbreviation).
type gnuSpec struct {
	value     string
	long      []string
	longValue map[string]bool
}

// scan returns the options given (short letters as "-x", long options by
// their full name as "--name") and the operands; options may follow
// operands, "--" ends them.
func (sp gnuSpec) scan(args []string) (map[string]string, []string) {
	opts := map[string]string{}
	var ops []string
	for i := 0; i < len(args); i++ {
		x := args[i]
		switch {
		case x == "--":
			ops = append(ops, args[i+1:]...)
			return opts, ops
		case strings.HasPrefix(x, "--"):
			n, v, hasV := strings.Cut(x[2:], "=")
			full := n
			var matches []string
			for _, l := range sp.long {
				if l == n {
					matches = []string{l}
					break
				}
				if strings.HasPrefix(l, n) {
					matches = append(matches, l)
				}
			}
			if len(matches) >= 1 {
				full = matches[0]
				if len(matches) > 1 {
					for _, m := range matches {
						opts["--"+m] = v // ambiguous: the program refuses; count all
					}
				}
			}
			if !hasV && sp.longValue[full] && i+1 < len(args) {
				i++
				v = args[i]
			}
			opts["--"+full] = v
		case strings.HasPrefix(x, "-") && len(x) > 1:
			for j := 1; j < len(x); j++ {
				c := x[j]
				if strings.IndexByte(sp.value, c) >= 0 {
					v := x[j+1:]
					if v == "" && i+1 < len(args) {
						i++
						v = args[i]
					}
					opts["-"+string(c)] = v
					break
				}
				opts["-"+string(c)] = ""
			}
		default:
			ops = append(ops, x)
		}
	}
	return opts, ops
}

func has(opts map[string]string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := opts[k]; ok {
			return true
		}
	}
	return false
}

// skipOpts drops leading options (value letters and long names take the
// next word) and returns the rest, starting at the first operand.
func skipOpts(args []string, value string, longValue []string) []string {
	for i := 0; i < len(args); i++ {
		x := args[i]
		if x == "--" {
			return args[i+1:]
		}
		if !strings.HasPrefix(x, "-") || x == "-" {
			return args[i:]
		}
		if strings.HasPrefix(x, "--") {
			n := strings.TrimPrefix(x, "--")
			if !strings.Contains(n, "=") {
				for _, l := range longValue {
					if l == n {
						i++
					}
				}
			}
			continue
		}
		for j := 1; j < len(x); j++ {
			if strings.IndexByte(value, x[j]) >= 0 {
				if j == len(x)-1 {
					i++
				}
				break
			}
		}
	}
	return nil
}

var rmSpec = gnuSpec{long: []string{"force", "interactive", "one-file-system", "no-preserve-root", "preserve-root",
	"recursive", "dir", "verbose", "help", "version"}}

func (a *analyzer) rm(s *shState, name string, args []string, in input) {
	opts, ops := rmSpec.scan(args)
	recursive := has(opts, "-r", "-R", "--recursive")
	switch name {
	case "trash", "trash-put", "rmtrash", "srm", "wipe", "rimraf", "del", "del-cli":
		recursive = true
	case "unlink", "rmdir":
		recursive = false
	}
	for _, x := range ops {
		if why := a.deletion(s.cwd, x, recursive); why != "" {
			a.deny(CodeDestructive, name+" "+printable(x)+" is blocked: "+why)
			return
		}
	}
}

// replaces are the writers that put a new file in place of the old one
// (rename or unlink first) rather than writing into it.
var replaces = map[string]bool{"mv": true, "ln": true, "link": true, "install": true, "rsync": true}

// writeTo denies a write onto a protected file.
func (a *analyzer) writeTo(s *shState, p, by string) bool {
	check := a.writeThrough
	if replaces[by] || strings.HasSuffix(by, " -i") {
		check = a.write // a new file renamed over p: a hard link is only dropped
	}
	if why := check(s.cwd, p); why != "" {
		a.deny(CodeDestructive, by+" onto "+printable(p)+" is blocked: "+why)
		return true
	}
	if a.anti(s, p) {
		return true
	}
	a.recordWrite(s, p)
	return false
}

// recordWrite remembers a file the script writes (by its logical and its
// physical path), so that running it later in the same command is seen.
func (a *analyzer) recordWrite(s *shState, p string) {
	if abs, ok := resolve(s.cwd, p); ok && !isUnknown(p) {
		a.fs.wrote(abs)
	}
	if r, ok := a.fs.real(s.cwd, p, true); ok {
		a.fs.wrote(r)
	}
}

var cpSpec = gnuSpec{value: "tSgmo", long: []string{"target-directory", "suffix", "backup", "force", "recursive",
	"no-target-directory", "symbolic", "link", "archive", "update", "parents", "preserve", "reflink", "mode", "owner", "group"},
	longValue: map[string]bool{"target-directory": true, "suffix": true, "mode": true, "owner": true, "group": true}}

func (a *analyzer) copyLike(s *shState, name string, args []string) {
	opts, ops := cpSpec.scan(args)
	dest := ""
	if t, ok := opts["-t"]; ok {
		dest = t
	} else if t, ok := opts["--target-directory"]; ok {
		dest = t
	} else if len(ops) > 0 {
		dest = ops[len(ops)-1]
		ops = ops[:len(ops)-1]
	}
	if name == "ln" && len(ops) == 0 && dest != "" {
		a.recordLinks(s, opts, ops, dest)
		return // ln -s target: the link is made in the current directory
	}
	if dest != "" && a.writeTo(s, dest, name) {
		return
	}
	if name == "cp" && dest != "" && !isUnknown(dest) {
		// into a directory: each copy lands on dest/NAME, and may write
		// through a hard link there
		if r, ok := a.fs.real(s.cwd, dest, true); ok {
			if fi, err := os.Stat(r); err == nil && fi.IsDir() {
				for _, src := range ops {
					if isUnknown(src) {
						continue
					}
					if why := a.hardLinkIntoGit(path.Join(r, path.Base(src))); why != "" {
						a.deny(CodeDestructive, "cp onto "+printable(path.Join(dest, path.Base(src)))+" is blocked: "+why)
						return
					}
				}
			}
		}
	}
	if name == "ln" || name == "link" {
		a.recordLinks(s, opts, ops, dest)
	}
	if name == "cp" && has(opts, "-s", "--symbolic-link", "-l", "--link") && len(ops) > 0 {
		// cp -s/-l makes links (or a tree of them) to the sources
		for _, src := range ops {
			abs, known := resolve(s.cwd, src)
			d, dknown := resolve(s.cwd, dest)
			if !known || !dknown || isUnknown(src) || isUnknown(dest) {
				continue
			}
			if len(ops) > 1 {
				d = path.Join(d, path.Base(abs))
			}
			a.fs.link(d, abs)
		}
	}
	for _, x := range ops {
		if a.anti(s, x) {
			return
		}
	}
}

// recordLinks remembers the links ln makes, so that later paths through
// them are resolved (ln -s .git g && rm -rf g/objects).
func (a *analyzer) recordLinks(s *shState, opts map[string]string, ops []string, dest string) {
	if dest == "" {
		return
	}
	symbolic := has(opts, "-s", "--symbolic")
	noDeref := has(opts, "-n", "-T", "--no-dereference", "--no-target-directory")
	_, toDir := opts["-t"]
	if _, ok := opts["--target-directory"]; ok {
		toDir = true
	}
	targets := ops
	if len(ops) == 0 { // ln -s TARGET: a link named like it, here
		targets, dest, toDir = []string{dest}, ".", true
	}
	destAbs, known := resolve(s.cwd, dest)
	if !known || isUnknown(dest) {
		// a link to .git, the project, home or / at a place the guard
		// cannot know: later paths through it could not be resolved
		for _, t := range targets {
			if why := a.linkTarget(s, t, symbolic); why != "" {
				a.deny(CodeBlind, "ln makes a link to "+why+" at a path the guard cannot know ("+clip(printable(dest))+")")
				return
			}
		}
		return
	}
	if !toDir && len(targets) > 1 {
		toDir = true
	}
	if !toDir && !noDeref {
		// an existing directory (or a link to one) as destination gets
		// the link inside it
		if r, ok := a.fs.real(s.cwd, dest, true); ok {
			if fi, err := os.Stat(r); err == nil && fi.IsDir() {
				toDir = true
			}
		}
		if _, ok := a.fs.links[destAbs]; ok {
			toDir = true
		}
	}
	for _, t := range targets {
		at := destAbs
		if toDir && isUnknown(t) {
			continue // a link named after a target the guard cannot know
		}
		if isUnknown(t) {
			a.fs.link(at, unknown) // deletions and writes through it are denied
			continue
		}
		if toDir {
			at = path.Join(destAbs, path.Base(t))
		}
		if symbolic && !has(opts, "-r", "--relative") {
			a.fs.link(at, t)
		} else if abs, ok := resolve(s.cwd, t); ok { // ln -sr: relative to here
			a.fs.link(at, abs) // a hard link: the same file
		}
	}
}

// linkTarget names what a link to t would reach when that is protected:
// .git, an answer file, or a directory protected from deletion.
func (a *analyzer) linkTarget(s *shState, t string, symbolic bool) string {
	if isUnknown(t) {
		return ""
	}
	abs, known := resolve(s.cwd, t)
	if symbolic && !strings.HasPrefix(t, "/") {
		return "" // relative to a directory the guard cannot know
	}
	if !known {
		return ""
	}
	if r, ok := a.fs.real(s.cwd, t, true); ok {
		abs = r
	}
	if isGit, inside := gitSegments(abs); isGit || inside {
		return abs
	}
	if a.antiCheatAbs(abs) {
		return abs
	}
	return a.protectedDir(abs)
}

func (a *analyzer) mv(s *shState, args []string) {
	opts, ops := cpSpec.scan(args)
	dest := ""
	if t, ok := opts["-t"]; ok {
		dest = t
	} else if t, ok := opts["--target-directory"]; ok {
		dest = t
	} else if len(ops) > 0 {
		dest = ops[len(ops)-1]
		ops = ops[:len(ops)-1]
	}
	for _, x := range ops {
		if why := a.deletion(s.cwd, x, true); why != "" {
			a.deny(CodeDestructive, "mv "+printable(x)+" is blocked: moving it away is as bad as deleting: "+why)
			return
		}
	}
	if dest != "" {
		a.writeTo(s, dest, "mv")
	}
}

func (a *analyzer) chmod(s *shState, name string, args []string) {
	sp := gnuSpec{long: []string{"recursive", "reference", "changes", "silent", "quiet", "verbose", "dereference",
		"no-dereference", "from", "preserve-root", "no-preserve-root"}}
	if name == "setfacl" {
		sp.value = "mMxX"
	}
	// chmod's modes such as -w look like options: treat them as operands
	var fixed []string
	modeGiven := false
	for _, x := range args {
		if name == "chmod" && len(x) > 1 && x[0] == '-' && strings.Trim(x[1:], "rwxXstugoa,+-=0123456789") == "" && x != "-R" {
			fixed = append(fixed, "--mode"+x)
			modeGiven = true // chmod -x FILE: the mode is this option
			continue
		}
		fixed = append(fixed, x)
	}
	opts, ops := sp.scan(fixed)
	recursive := has(opts, "-R", "--recursive")
	if len(ops) > 0 && !modeGiven && (name == "chmod" || name == "chown" || name == "chgrp" || name == "chattr" || name == "chcon") && !has(opts, "--reference") {
		ops = ops[1:]
	}
	for _, x := range ops {
		abs, known := resolve(s.cwd, x)
		if isGit, inside := gitSegments(abs); isGit || inside {
			a.deny(CodeDestructive, name+" "+printable(x)+" is blocked: it changes .git (the repository's history)")
			return
		}
		if recursive {
			if why := a.deletion(s.cwd, x, true); why != "" && (known || isUnknown(x)) {
				a.deny(CodeDestructive, name+" -R "+printable(x)+" is blocked: "+strings.Replace(why, "deletion", "change", 1))
				return
			}
		}
	}
}

func (a *analyzer) sed(s *shState, args []string) {
	sp := gnuSpec{value: "efl", long: []string{"expression", "file", "in-place", "quiet", "silent", "regexp-extended",
		"separate", "null-data", "zero-terminated", "debug", "posix", "sandbox", "unbuffered", "line-length", "follow-symlinks"},
		longValue: map[string]bool{"expression": true, "file": true, "line-length": true}}
	// -i takes an optional suffix attached to it: treat -i… as in-place
	var fixed []string
	inPlace := false
	for _, x := range args {
		if len(x) > 1 && x[0] == '-' && x[1] != '-' && strings.Contains(x, "i") {
			before, _, _ := strings.Cut(x[1:], "i")
			if strings.Trim(before, "nEsrzu") == "" {
				inPlace = true
				if before != "" {
					fixed = append(fixed, "-"+before)
				}
				continue
			}
		}
		fixed = append(fixed, x)
	}
	opts, ops := sp.scan(fixed)
	if has(opts, "--in-place") {
		inPlace = true
	}
	var scripts []string
	for i := 0; i < len(fixed); i++ {
		x := fixed[i]
		switch {
		case x == "--":
			i = len(fixed)
		case x == "--expression" && i+1 < len(fixed):
			scripts = append(scripts, fixed[i+1])
			i++
		case strings.HasPrefix(x, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(x, "--expression="))
		case len(x) > 1 && x[0] == '-' && x[1] != '-':
			if _, after, ok := strings.Cut(x[1:], "e"); ok && !strings.ContainsAny(x[1:strings.IndexByte(x, 'e')], "fl") {
				if after != "" {
					scripts = append(scripts, after)
				} else if i+1 < len(fixed) {
					scripts = append(scripts, fixed[i+1])
					i++
				}
			}
		}
	}
	if !has(opts, "-e", "-f", "--expression", "--file") && len(ops) > 0 {
		scripts = append(scripts, ops[0])
		ops = ops[1:]
	}
	for _, sc := range scripts {
		if a.sedScript(s, sc) {
			return
		}
	}
	for _, x := range ops {
		if inPlace {
			if a.writeTo(s, x, "sed -i") {
				return
			}
		} else if a.anti(s, x) {
			return
		}
	}
}

// sedScript checks GNU sed's commands that run programs or write files:
// "e command", the s///e flag, "w file" and the s///w flag. It returns
// true when it denied.
func (a *analyzer) sedScript(s *shState, script string) bool {
	if strings.TrimSpace(strings.ReplaceAll(script, unknown, "")) == "" && isUnknown(script) {
		a.deny(CodeBlind, "a sed script the guard cannot know could run a command (e) or write a file (w)")
		return true
	}
	// A value the guard cannot know, inside a known script, is text
	// (s/version = .*/version = "$V"/): read the script around it.
	script = strings.ReplaceAll(script, unknown, "X")
	for _, line := range strings.Split(script, "\n") {
		rest := line
		for rest != "" {
			cmd := strings.TrimLeft(skipSedAddress(strings.TrimLeft(rest, " \t;{}")), " \t!")
			if cmd == "" {
				break
			}
			switch cmd[0] {
			case 'e':
				c := strings.TrimSpace(cmd[1:])
				if c == "" {
					a.deny(CodeBlind, "sed's e command runs the text it reads as a shell command")
				} else {
					a.eval(s, c)
				}
				return a.found != nil
			case 'w', 'W':
				if f := strings.TrimSpace(cmd[1:]); f != "" {
					return a.writeTo(s, f, "sed w")
				}
				return false
			case 's', 'y':
				end, flags := sedSubst(cmd)
				if cmd[0] == 's' {
					if i := strings.IndexByte(flags, 'w'); i >= 0 {
						return a.writeTo(s, strings.TrimSpace(flags[i+1:]), "sed s///w")
					}
					if strings.ContainsRune(flags, 'e') {
						a.deny(CodeBlind, "sed's s///e runs the substituted text as a shell command")
						return true
					}
				}
				rest = cmd[end:]
				continue
			case 'a', 'i', 'c', 'r', 'R', 'b', 't', 'T', ':', '#':
				// text or a label to the end of the line
			default:
				if i := strings.IndexByte(cmd, ';'); i >= 0 {
					rest = cmd[i+1:]
					continue
				}
			}
			break
		}
	}
	return false
}

// skipSedAddress drops a sed address (number, $, /regex/, \cregexc, with
// an optional second address) from the front of a command.
func skipSedAddress(c string) string {
	for range 2 {
		switch {
		case c == "":
			return c
		case c[0] >= '0' && c[0] <= '9' || c[0] == '$':
			c = strings.TrimLeft(c, "0123456789$~+")
		case c[0] == '/' || c[0] == '\\' && len(c) > 1:
			d := c[0]
			start := 1
			if d == '\\' {
				d, start = c[1], 2
			}
			i := start
			for i < len(c) && c[i] != d {
				if c[i] == '\\' {
					i++
				}
				i++
			}
			c = strings.TrimLeft(c[min(i+1, len(c)):], "IM")
		default:
			return c
		}
		if !strings.HasPrefix(c, ",") {
			return c
		}
		c = c[1:]
	}
	return c
}

// sedSubst finds the end of an s or y command and its flags.
func sedSubst(c string) (end int, flags string) {
	if len(c) < 2 {
		return len(c), ""
	}
	d := c[1]
	i, parts := 2, 0
	for i < len(c) && parts < 2 {
		switch c[i] {
		case '\\':
			i++
		case d:
			parts++
		}
		i++
	}
	j := i
	for j < len(c) && c[j] != ';' && c[j] != '}' {
		j++
	}
	return j, c[min(i, len(c)):j]
}

func (a *analyzer) rsync(s *shState, args []string) {
	var ops []string
	del, removeSources := false, false
	for _, x := range args {
		if strings.HasPrefix(x, "--del") {
			del = true
		}
		if strings.HasPrefix(x, "--remove-sou") {
			removeSources = true
		}
		if !strings.HasPrefix(x, "-") {
			ops = append(ops, x)
		}
	}
	if len(ops) < 2 {
		return
	}
	dest := ops[len(ops)-1]
	if removeSources {
		// the sources are deleted once copied
		for _, src := range ops[:len(ops)-1] {
			if why := a.deletion(s.cwd, src, true); why != "" {
				a.deny(CodeDestructive, "rsync --remove-source-files of "+printable(src)+" is blocked: "+why)
				return
			}
		}
	}
	if strings.Contains(dest, ":") {
		return // remote
	}
	if del {
		if why := a.deletion(s.cwd, dest, true); why != "" {
			a.deny(CodeDestructive, "rsync --delete into "+printable(dest)+" is blocked: "+why)
			return
		}
		if abs, known := resolve(s.cwd, dest); known && a.project != "" && within(a.project, abs) {
			a.deny(CodeDestructive, "rsync --delete into "+printable(dest)+" is blocked: it deletes the project's files")
			return
		}
	}
	a.writeTo(s, dest, "rsync")
}

// findTests are find's expression words that take one argument.
var findTests = map[string]bool{
	"-name": true, "-iname": true, "-path": true, "-ipath": true, "-wholename": true, "-iwholename": true, "-regex": true,
	"-iregex": true, "-type": true, "-xtype": true, "-size": true, "-mtime": true, "-mmin": true, "-atime": true, "-amin": true,
	"-ctime": true, "-cmin": true, "-newer": true, "-perm": true, "-user": true, "-group": true, "-uid": true, "-gid": true,
	"-maxdepth": true, "-mindepth": true, "-links": true, "-inum": true, "-samefile": true, "-fstype": true, "-used": true,
	"-printf": true, "-fprint": true, "-fprint0": true, "-fls": true, "-lname": true, "-ilname": true, "-context": true,
	"-regextype": true, "-newermt": true, "-newerct": true, "-newerat": true, "-anewer": true, "-cnewer": true, "-files0-from": true,
}

func (a *analyzer) find(s *shState, args []string) {
	i := 0
	follow := false // find -L and -follow walk through symlinks
	for i < len(args) && (args[i] == "-H" || args[i] == "-L" || args[i] == "-P" || strings.HasPrefix(args[i], "-O") || args[i] == "-D") {
		if args[i] == "-L" || args[i] == "-H" {
			follow = true
		}
		if args[i] == "-D" {
			i++
		}
		i++
	}
	i = min(i, len(args)) // find -D with its value missing
	var roots []string
	for i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "(" && args[i] != "!" {
		roots = append(roots, args[i])
		i++
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	expr := args[i:]
	filtered, logic := false, false
	var sample string
	del := false
	type execCmd struct{ argv []string }
	var execs []execCmd
	for j := 0; j < len(expr); j++ {
		x := expr[j]
		switch {
		case x == "-o" || x == "-or" || x == "!" || x == "-not" || x == "," || x == "(" || x == ")":
			logic = true
		case x == "-name" || x == "-iname" || x == "-path" || x == "-ipath" || x == "-wholename" || x == "-regex" || x == "-iregex":
			if j+1 < len(expr) {
				pat := expr[j+1]
				if !matchesGit(pat, x) {
					filtered = true
					if !strings.ContainsAny(pat, "*?[") {
						sample = path.Base(pat)
					}
				}
				j++
			}
		case x == "-delete":
			del = true
		case x == "-follow":
			follow = true
		case x == "-exec" || x == "-execdir" || x == "-ok" || x == "-okdir":
			k := j + 1
			for k < len(expr) && expr[k] != ";" && expr[k] != "+" {
				k++
			}
			execs = append(execs, execCmd{argv: expr[j+1 : k]})
			j = k
		case findTests[x]:
			j++
		}
	}
	if logic {
		filtered = false
	}
	if sample == "" {
		sample = "item"
	}
	for _, r := range roots {
		if a.found != nil {
			return
		}
		// The items find visits: with a name filter, files below the root
		// with a harmless name; without one, the root itself and its .git.
		items := []string{strings.TrimSuffix(r, "/") + "/" + sample}
		if !filtered {
			items = []string{r}
		} else if _, inside := gitSegments(path.Clean(r)); inside || path.Base(path.Clean(r)) == ".git" {
			items = append(items, r)
		}
		if del {
			for _, it := range items {
				if follow && !strings.HasSuffix(it, "/") {
					it += "/"
				}
				if why := a.deletion(s.cwd, it, true); why != "" {
					a.deny(CodeDestructive, "find "+printable(r)+" -delete is blocked: "+why)
					return
				}
			}
		}
		for _, e := range execs {
			for _, it := range items {
				argv := make([]string, len(e.argv))
				for k, w := range e.argv {
					argv[k] = strings.ReplaceAll(w, "{}", it)
				}
				a.run(s.clone(), argv, stdinNone, nil)
				if a.found != nil {
					a.found.Reason += " (run by find -exec on " + printable(it) + ")"
					return
				}
			}
		}
	}
}

// matchesGit reports whether a find name/path pattern could match .git.
func matchesGit(pat, test string) bool {
	if test == "-regex" || test == "-iregex" {
		return true // the guard does not evaluate regular expressions
	}
	if ok, _ := path.Match(pat, ".git"); ok {
		return true
	}
	if test == "-path" || test == "-ipath" || test == "-wholename" {
		for _, p := range []string{"./.git", "./.git/x", ".git", "./x/.git"} {
			if ok, _ := path.Match(pat, p); ok {
				return true
			}
		}
		return strings.Contains(pat, "*") && !strings.Contains(pat, ".") // */x patterns can cross .git
	}
	return false
}

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
