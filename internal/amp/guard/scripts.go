package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// maxScriptFile bounds the script files the guard reads: a larger script
// run by a shell is denied (fail closed).
const maxScriptFile = 64 << 10

// shellNames are the interpreters whose scripts the guard parses.
var shellNames = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "rbash": true,
	"yash": true, "posh": true, "busybox": true,
}

// readOnlyCommands do not write the files named in their arguments; an
// earlier mention of a script's name by any other command may have made
// or changed it.
var readOnlyCommands = map[string]bool{
	"cat": true, "ls": true, "head": true, "tail": true, "less": true, "more": true, "stat": true, "file": true,
	"wc": true, "chmod": true, "chown": true, "chgrp": true, "readlink": true, "realpath": true, "diff": true,
	"cmp": true, "md5sum": true, "sha1sum": true, "sha256sum": true, "sha512sum": true, "shellcheck": true,
	"bat": true, "nl": true, "od": true, "hexdump": true, "xxd": true, "du": true, "tree": true, "env": true,
}

// preciseWriters record every file they write themselves (writeTo), or
// write none (touch leaves a file's content alone, make's recipes are
// checked command by command): their other arguments are not mentions.
var preciseWriters = map[string]bool{"touch": true, "sed": true, "make": true, "gmake": true, "mkdir": true}

// recordCopies records the files cp, mv or install write when they copy
// files (not trees): the destination and, should it be a directory, each
// source's name inside it. It reports false when it cannot name them.
func (a *analyzer) recordCopies(s *shState, base string, args []string) bool {
	opts, ops, dest := cpTarget(args, 2)
	if dest == "" || isUnknown(dest) || len(ops) == 0 {
		return false
	}
	if base == "mv" || has(opts, "-r", "-R", "--recursive", "-a", "--archive") {
		// a tree copied or moved: its files are not named here
		d, _ := resolve(s.cwd, dest)
		if !isUnknown(dest) && s.cwd == "" && !strings.HasPrefix(dest, "/") {
			d = ""
		}
		a.fs.tree(d, base+" "+clip(printable(strings.Join(args, " "))))
		if base != "mv" {
			return false
		}
	}
	for _, src := range ops {
		if isUnknown(src) {
			return false
		}
	}
	a.recordWrite(s, dest)
	for _, src := range ops {
		a.recordWrite(s, path.Join(dest, path.Base(src)))
	}
	return true
}

// unnamedWrites returns the directory under which an extractor (tar x,
// unzip, 7z x, patch, cpio -i) writes files it does not name ("" for /).
func (a *analyzer) unnamedWrites(s *shState, base string, args []string) (string, bool) {
	at := func(d string) string {
		if d == "" {
			return s.cwd
		}
		if isUnknown(d) || (s.cwd == "" && !strings.HasPrefix(d, "/")) {
			return ""
		}
		abs, _ := resolve(s.cwd, d)
		return abs
	}
	value := func(short, long string) string {
		for i, x := range args {
			switch {
			case x == short || x == long:
				if i+1 < len(args) {
					return args[i+1]
				}
			case strings.HasPrefix(x, long+"="):
				return strings.TrimPrefix(x, long+"=")
			case short != "" && strings.HasPrefix(x, short) && len(x) > len(short) && !strings.HasPrefix(x, "--"):
				return x[len(short):]
			}
		}
		return ""
	}
	switch base {
	case "tar", "bsdtar", "gtar":
		extract, dirs := false, 0
		for i, x := range args {
			if x == "--extract" || x == "--get" || (i == 0 && !strings.HasPrefix(x, "-") && strings.Contains(x, "x")) ||
				(len(x) > 1 && x[0] == '-' && x[1] != '-' && strings.Contains(x, "x")) {
				extract = true
			}
			if x == "-P" || x == "--absolute-names" || (len(x) > 1 && x[0] == '-' && x[1] != '-' && strings.Contains(x, "P")) ||
				(i == 0 && !strings.HasPrefix(x, "-") && strings.Contains(x, "P")) {
				return "", true // absolute member names: anywhere
			}
			if x == "-C" || x == "--directory" || strings.HasPrefix(x, "--directory=") || strings.HasPrefix(x, "--dir") ||
				(strings.HasPrefix(x, "-C") && !strings.HasPrefix(x, "--")) {
				dirs++
			}
		}
		if !extract {
			return "", false
		}
		if dirs > 1 {
			return "", true // -C given again moves on from the last one
		}
		// GNU tar and bsdtar drop a leading / and refuse ".." in member
		// names, and do not extract through a symlink an archive made:
		// the files land under the -C directory.
		return at(value("-C", "--directory")), true
	case "unzip":
		for _, x := range args {
			if x == "-l" || x == "-t" || x == "-p" || x == "-Z" || x == "-v" {
				return "", false
			}
		}
		// unzip drops "../" and a leading /, and makes symlinks last
		return at(value("-d", "--exdir")), true
	case "7z", "7za", "7zr":
		if len(args) > 0 && (args[0] == "x" || args[0] == "e") {
			return "", true // 7-Zip has written through archived symlinks: anywhere
		}
	case "cpio":
		for _, x := range args {
			if x == "--extract" || (len(x) > 1 && x[0] == '-' && x[1] != '-' && strings.Contains(x, "i")) {
				return "", true // cpio keeps absolute and ".." names: anywhere
			}
		}
	case "patch":
		return at(value("-d", "--directory")), true
	}
	return "", false
}

// gitWritesFiles are git subcommands that write files of the work tree.
var gitWritesFiles = map[string]bool{
	"checkout": true, "restore": true, "reset": true, "stash": true, "merge": true, "pull": true, "apply": true,
	"am": true, "cherry-pick": true, "revert": true, "switch": true, "rebase": true, "show": true, "cat-file": true,
	"archive": true, "clone": true, "worktree": true, "read-tree": true, "checkout-index": true, "mv": true,
}

// mention records the arguments of a command that may write the files it
// names (a script run later by the same command may be one of them).
func (a *analyzer) mention(s *shState, base string, args []string) {
	quiet := a.quietRun
	a.quietRun = false
	if a.fs == nil || textCommands[base] || searchCommands[base] || readOnlyCommands[base] || shellNames[base] ||
		preciseWriters[base] || quiet {
		return
	}
	if (base == "cp" || base == "mv" || base == "install") && a.recordCopies(s, base, args) {
		return // the files written are recorded by name
	}
	if dir, ok := a.unnamedWrites(s, base, args); ok {
		a.fs.tree(dir, base+" "+clip(printable(strings.Join(args, " "))))
	}
	if base == "git" {
		kind, dir, vs := gitEffect(s, args)
		switch kind {
		case gitUnknown:
			a.fs.tree(dir, "git "+clip(printable(strings.Join(args, " "))))
		case gitVersions:
			for i, v := range vs {
				if start, ok := a.fs.newRefs[v.root+"\x00"+v.ref]; ok {
					vs[i].ref, vs[i].dwim = start, false
				}
			}
			a.fs.gitTrees[dir] = append(a.fs.gitTrees[dir], vs...)
		}
		if name, start := gitCreates(args); name != "" {
			root := gitRoot(s, args)
			if st, ok := a.fs.newRefs[root+"\x00"+start]; ok {
				start = st
			}
			a.fs.newRefs[root+"\x00"+name] = start
		}
		if kind == gitVersions {
			return // the versions are read; the arguments name refs
		}
		writes := false
		for _, x := range args {
			if gitWritesFiles[x] {
				writes = true
			}
		}
		if !writes {
			return
		}
	}
	a.fs.mentions = append(a.fs.mentions, args...)
}

// scriptFile checks the shell script at p, run by how ("bash", "source",
// an executable's path) with params as its positional parameters; a
// sourced script runs in the caller's shell.
func (a *analyzer) scriptFile(s *shState, p string, params []string, how string, sourced bool) {
	if a.found != nil {
		return
	}
	if isUnknown(p) {
		a.deny(CodeBlind, how+" runs a script whose path the guard cannot know ("+clip(printable(p))+")")
		return
	}
	data, ok := a.readScript(s, p, how)
	if !ok {
		return
	}
	a.shellScript(s, p, data, params, sourced)
}

// shellScript checks the text of a script file.
func (a *analyzer) shellScript(s *shState, name string, data []byte, params []string, sourced bool) {
	sub := s.clone()
	sub.depth++
	sub.params, sub.paramsKnown = append([]string(nil), params...), true
	if !sourced {
		sub.vars["0"] = strVar(name) // cd "$(dirname "$0")" moves where the script is
	}
	a.script(sub, string(data))
	if sourced {
		s.cwd = sub.cwd
		for k, v := range sub.vars {
			s.vars[k] = v
		}
		for k, v := range sub.funcs {
			s.funcs[k] = v
		}
		for k, v := range sub.aliases {
			s.aliases[k] = v
		}
	}
}

// readScript returns a script file's text. It denies (and returns false)
// when the file is written earlier by the same command, too large or
// unreadable; a file that does not exist runs nothing (false, no denial).
func (a *analyzer) readScript(s *shState, p, how string) ([]byte, bool) {
	r, ok := a.madeHere(s, p, how, true)
	if !ok {
		return nil, false
	}
	abs, _ := resolve(s.cwd, p)
	if data, use, ok := a.versionText(abs, r, how); !ok || use {
		return data, ok
	}
	fi, err := os.Stat(r)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false // the shell finds no script: nothing runs
	}
	if err == nil && fi.IsDir() {
		return nil, false
	}
	if err == nil && !fi.Mode().IsRegular() {
		// a FIFO or a device would block or feed the guard anything
		a.deny(CodeBlind, how+" runs "+clip(p)+", which is not a regular file the guard can read")
		return nil, false
	}
	f, err := os.OpenFile(r, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		a.deny(CodeBlind, how+" runs "+clip(p)+", which the guard cannot read: "+clip(err.Error()))
		return nil, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxScriptFile+1))
	if err != nil {
		a.deny(CodeBlind, how+" runs "+clip(p)+", which the guard cannot read: "+clip(err.Error()))
		return nil, false
	}
	if len(data) > maxScriptFile {
		a.deny(CodeBlind, how+" runs "+clip(p)+", a script larger than the guard reads (64 KiB)")
		return nil, false
	}
	return data, true
}

// execFile checks a program run by its path (./x.sh, scripts/build):
// a script for sh or bash, or a text file without #! (which bash runs as
// a shell script), is checked as if its commands were inline.
func (a *analyzer) execFile(s *shState, name string, args []string) {
	data, ok := a.readScript(s, name, "the command")
	if !ok {
		return
	}
	if bytes.HasPrefix(data, []byte("#!")) {
		line, _, _ := bytes.Cut(data[2:], []byte("\n"))
		f := strings.Fields(string(line))
		if len(f) > 0 && path.Base(f[0]) == "env" {
			f = f[1:]
			for len(f) > 0 && (strings.HasPrefix(f[0], "-") || strings.Contains(f[0], "=")) {
				if strings.HasPrefix(f[0], "-S") && len(f[0]) > 2 { // env -Sbash
					f[0] = f[0][2:]
					break
				}
				f = f[1:]
			}
		}
		if len(f) == 0 {
			return
		}
		if !shellNames[path.Base(f[0])] {
			if _, ok := interpreterName(path.Base(f[0])); ok {
				a.inlineCode(s, path.Base(f[0]), string(data))
				if a.found != nil {
					a.found.Reason += " (in the script " + clip(printable(name)) + ")"
				}
			}
			return // another interpreter's script
		}
		a.shellScript(s, name, data, args, false)
		return
	}
	if bytes.IndexByte(data[:min(len(data), 1024)], 0) >= 0 || bytes.HasPrefix(data, []byte("\x7fELF")) {
		return // a binary program
	}
	a.shellScript(s, name, data, args, false)
}

// madeHere denies (and returns false) a script that the same command
// writes, or names in an earlier command that may write it; else it
// returns the script's physical path. When strict (a shell script), a
// script the guard cannot place is denied too.
func (a *analyzer) madeHere(s *shState, p, how string, strict bool) (string, bool) {
	abs, known := resolve(s.cwd, p)
	if isUnknown(p) || !known {
		if !strict {
			return "", false
		}
		if isUnknown(p) {
			a.deny(CodeBlind, how+" runs a script whose path the guard cannot know ("+clip(printable(p))+")")
		} else {
			a.deny(CodeBlind, how+" runs the script "+clip(p)+" from a working directory the guard cannot know")
		}
		return "", false
	}
	r, ok := a.fs.real(s.cwd, p, true)
	if !ok {
		r = abs
	}
	if strict && (strings.HasPrefix(abs, "/dev/fd/") || strings.HasPrefix(abs, "/proc/") || strings.HasPrefix(abs, "/dev/std")) {
		// a file descriptor the command opened earlier (exec 3< x.sh)
		a.deny(CodeBlind, how+" runs "+clip(p)+", a file descriptor or process file the guard cannot read")
		return "", false
	}
	if a.fs == nil {
		return r, true
	}
	if a.fs.written[abs] || a.fs.written[r] {
		a.deny(CodeBlind, how+" runs "+clip(p)+", which this same command writes first: the guard cannot read "+
			"a script before it exists (write it in one call and run it in the next)")
		return "", false
	}
	if by := a.fs.inTree(abs, r); by != "" {
		a.deny(CodeBlind, how+" runs "+clip(p)+", under a directory where an earlier command of the same call writes "+
			"files it does not name ("+by+"): the guard cannot read it before it runs (run it in a separate call)")
		return "", false
	}
	a.fs.need(abs, r)
	name := path.Base(abs)
	for _, m := range a.fs.mentions {
		if containsName(m, name) {
			a.deny(CodeBlind, how+" runs "+clip(p)+", which an earlier command of the same call may write ("+
				clip(printable(m))+"): the guard cannot read it before it runs (run it in a separate call)")
			return "", false
		}
	}
	return r, true
}

// containsName reports whether name occurs in s as a whole file name: not
// preceded or followed by a letter, digit, '_', '-' or '.'.
func containsName(s, name string) bool {
	part := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
	}
	for i := 0; i+len(name) <= len(s); {
		j := strings.Index(s[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		if (j == 0 || !part(s[j-1])) && (end == len(s) || !part(s[end])) {
			return true
		}
		i = j + 1
	}
	return false
}

// maxPackageJSON bounds the package.json files the guard reads.
const maxPackageJSON = 1 << 20

// npmScript checks the package.json scripts that npm run, yarn, pnpm or
// bun run NAME would run (with their pre and post scripts), as sh -c
// strings in the package's directory.
func (a *analyzer) npmScript(s *shState, tool string, args []string) {
	if len(args) == 0 || s.cwd == "" {
		return
	}
	var name string
	var extra []string
	switch {
	case args[0] == "run" || args[0] == "run-script" || args[0] == "rum" || args[0] == "urn":
		if len(args) < 2 {
			return
		}
		name, extra = args[1], args[2:]
	case tool == "npm" && (args[0] == "test" || args[0] == "t" || args[0] == "tst"):
		name, extra = "test", args[1:]
	case tool == "npm" && (args[0] == "start" || args[0] == "stop" || args[0] == "restart"):
		name, extra = args[0], args[1:]
	case tool != "npm":
		name, extra = args[0], args[1:] // yarn build, pnpm lint
	default:
		return
	}
	if strings.HasPrefix(name, "-") || isUnknown(name) {
		return
	}
	if len(extra) > 0 && extra[0] == "--" {
		extra = extra[1:]
	}
	dir := s.cwd
	for {
		if _, err := os.Stat(path.Join(dir, "package.json")); err == nil || a.fs.written[path.Join(dir, "package.json")] {
			break
		}
		if dir == "/" || (a.project != "" && dir == a.project) {
			return
		}
		dir = path.Dir(dir)
	}
	pj := path.Join(dir, "package.json")
	how := tool + " " + name
	r, ok := a.madeHere(s, pj, how, false)
	if !ok {
		return
	}
	data, use, ok := a.versionText(pj, r, how)
	if !ok {
		return
	}
	var err error
	if !use {
		data, err = readRegular(r, maxPackageJSON)
	}
	if err != nil {
		a.deny(CodeBlind, how+" runs a script from "+pj+", which the guard cannot read: "+clip(err.Error()))
		return
	}
	var pkg struct {
		Scripts map[string]any `json:"scripts"`
	}
	if json.Unmarshal(data, &pkg) != nil {
		return // npm refuses a package.json it cannot parse
	}
	for _, k := range []string{"pre" + name, name, "post" + name} {
		c, ok := pkg.Scripts[k].(string)
		if !ok {
			continue
		}
		if k == name && len(extra) > 0 {
			c += " " + quoteWords(extra)
		}
		sub := s.clone()
		sub.depth++
		sub.cwd = dir
		a.script(sub, c)
		if a.found != nil {
			a.found.Reason += " (the \"" + k + "\" script of " + pj + ")"
			return
		}
	}
}

// errNotRegular and errTooLarge are why readRegular refuses a file.
var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = errors.New("larger than the guard reads")
)

// readRegular reads a regular file of at most max bytes without blocking
// on a FIFO or device.
func readRegular(p string, max int) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, errTooLarge
	}
	return data, nil
}
