package guard

import (
	"os"
	"path"
	"strings"
)

// File commands: rm, cp, mv, ln, install, chmod, rsync, and the writes
// and links they record for later commands of the same call.

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

// cpTarget splits the arguments of cp, mv, install or ln into their
// options, their sources and their destination: the -t or
// --target-directory value, else the last operand once there are at
// least minOps of them (it stays a source below that).
func cpTarget(args []string, minOps int) (opts map[string]string, srcs []string, dest string) {
	opts, srcs = cpSpec.scan(args)
	if t, ok := opts["-t"]; ok {
		return opts, srcs, t
	}
	if t, ok := opts["--target-directory"]; ok {
		return opts, srcs, t
	}
	if len(srcs) >= minOps && len(srcs) > 0 {
		return opts, srcs[:len(srcs)-1], srcs[len(srcs)-1]
	}
	return opts, srcs, ""
}

func (a *analyzer) copyLike(s *shState, name string, args []string) {
	opts, ops, dest := cpTarget(args, 1)
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
	_, ops, dest := cpTarget(args, 1)
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
