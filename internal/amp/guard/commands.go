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
