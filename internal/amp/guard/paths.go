package guard

import (
	"net/url"
	"path"
	"strings"
	"unicode/utf8"
)

// NormalizePath URL-decodes twice, turns backslashes into slashes and
// cleans the path (collapsing "//", resolving "." and "..").
func NormalizePath(p string) string {
	p = decodeTwice(p, url.PathUnescape)
	p = strings.ReplaceAll(p, `\`, "/")
	if p == "" {
		return p
	}
	return path.Clean(p)
}

func decodeTwice(s string, dec func(string) (string, error)) string {
	for range 2 {
		if !strings.Contains(s, "%") {
			break
		}
		d, err := dec(s)
		if err != nil {
			break
		}
		s = d
	}
	return s
}

// antiCheatPath reports whether a path names an answer or grading file.
func antiCheatPath(mode Mode, p string) bool {
	p = strings.ToLower(strings.ReplaceAll(p, `\`, "/"))
	segs := strings.Split(p, "/")
	base := segs[len(segs)-1]
	for i, s := range segs {
		next := ""
		if i+1 < len(segs) {
			next = segs[i+1]
		}
		switch s {
		case ".score", "grading", "hidden_tests", "hidden-tests", "answer_key", "answer-key":
			return true
		case "test", "tests":
			if next == "hidden" {
				return true
			}
			if mode == ModeEval && (next == "fixtures" || next == "scenarios" || next == "cases") {
				return true
			}
		case "__pycache__":
			if mode == ModeEval && i+1 < len(segs) && strings.HasSuffix(base, ".py") {
				return true
			}
		}
	}
	switch {
	case strings.Contains(p, ".hidden."),
		strings.Contains(base, ".solution."),
		strings.HasSuffix(base, "solution.md"),
		strings.HasSuffix(base, "_solution.txt"),
		strings.Contains(base, ".scoring."),
		strings.HasSuffix(base, "rubric.json"),
		strings.Contains(base, "grading_script."),
		strings.Contains(base, "answer_key"),
		strings.Contains(base, "expected_output"),
		strings.Contains(base, "expected-output"):
		return true
	}
	if mode == ModeEval && (strings.HasSuffix(base, ".expected") || strings.HasSuffix(base, ".golden")) {
		return true
	}
	return false
}

// probeTwins maps the names the guard's glob analysis offers for every
// directory listing to a neutral twin: a glob that matches a probe but not
// its twin targets a protected file on purpose (tests/hid*), while one
// that matches both (tests/*) is a broad pattern and no sign of cheating.
var probeTwins = map[string]string{
	"hidden": "unit", "grading": "src", ".score": ".cache", "hidden_tests": "unit_tests",
	"answer_key": "other_key", "x.hidden.x": "x.shown.x", "x.solution.x": "x.main.x", "solution.md": "readme.md",
	"x_solution.txt": "x_notes.txt", "x.scoring.x": "x.other.x", "rubric.json": "config.json",
	"grading_script.x": "build_script.x", "expected_output.x": "actual_output.x", "fixtures": "helpers",
	"scenarios": "helpers2", "cases": "helpers3", "x.golden": "x.json", "x.expected": "x.txt",
}

// everything is the name in the guard's fake directory listings that only
// a glob matching any name (*, ?*, [!.]*) matches.
const everything = "\x01"

// unknown marks a value the guard cannot know (a variable set outside the
// command, the output of a program): no shell value contains a NUL byte.
// It is a Unicode noncharacter (bash drops NUL bytes from command
// substitutions); a string that is not valid UTF-8 may be a piece of it
// split by IFS, so it counts as unknown too.
const unknown = "\ufdd0"

func isUnknown(s string) bool { return strings.Contains(s, unknown) || !utf8.ValidString(s) }

// paths resolves and classifies paths for one analysis.
type paths struct {
	mode    Mode
	project string // absolute project root, "" if unknown
	home    string // absolute home directory, "" if unknown
	// projectReal and homeReal are the same with symlinks resolved.
	projectReal, homeReal string
	// fs resolves symlinks and tracks what the script writes.
	fs *fsView
}

// resolve returns p made absolute against cwd and cleaned; known is false
// when p is relative and cwd unknown (abs is then p cleaned).
func resolve(cwd, p string) (abs string, known bool) {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p), true
	}
	if cwd == "" {
		return path.Clean(p), false
	}
	return path.Clean(cwd + "/" + p), true
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// gitSegments reports whether a cleaned path is a .git directory (last
// segment) or inside one.
func gitSegments(p string) (isGit, inside bool) {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s == ".git" {
			if i == len(segs)-1 {
				return true, false
			}
			return false, true
		}
	}
	return false, false
}

// deletion explains why deleting p (recursively or not) destroys work, or
// returns "" if it does not.
func (ps paths) deletion(cwd, p string, recursive bool) string {
	if why := ps.deletionAt(cwd, p, recursive); why != "" {
		return why
	}
	// The same path with symlinks resolved: rm -rf g/objects where g is a
	// link to .git. rm follows the last component only when it ends in /.
	q, suffix := p, ""
	if i := strings.Index(p, everything); i >= 0 {
		q, suffix = p[:i], everything
		if q == "" {
			q = "."
		}
	}
	if l := ps.fs.viaUnknownLink(cwd, q); l != "" {
		return "it goes through " + printable(l) + ", a link this command makes to a place the guard cannot know"
	}
	r, ok := ps.fs.real(cwd, q, suffix != "")
	if !ok {
		return ""
	}
	if logical, _ := resolve(cwd, q); logical == r {
		return ""
	}
	if suffix != "" {
		r = strings.TrimSuffix(r, "/") + "/" + suffix
	}
	if why := ps.deletionAt("", r, recursive); why != "" {
		return why + " (through a symlink: " + printable(p) + " is " + printable(r) + ")"
	}
	return ""
}

func (ps paths) deletionAt(cwd, p string, recursive bool) string {
	if p == "" {
		return ""
	}
	if isUnknown(p) {
		if _, inside := gitSegments(path.Clean(p)); inside || path.Base(p) == ".git" {
			return "it deletes .git or files inside it (the repository's history)"
		}
		// "$TMPDIR/build" ends in a known, harmless name; "$X" or
		// "$(cmd)" could be anything.
		last := path.Base(p)
		if recursive && (isUnknown(last) || last == "." || last == ".." || last == "/" || strings.Contains(last, everything)) {
			return "a recursive deletion of a path the guard cannot know (" + printable(p) + ")"
		}
		return ""
	}
	broad := strings.Contains(p, everything)
	if broad {
		p = strings.SplitN(p, everything, 2)[0]
		if p == "" {
			p = "."
		}
	}
	abs, known := resolve(cwd, p)
	isGit, inside := gitSegments(abs)
	switch {
	case isGit:
		return "it deletes the .git directory (the repository's history)"
	case inside && (recursive || broad || !strings.HasSuffix(abs, ".lock")):
		return "it deletes files inside .git (the repository's history)"
	}
	if broad {
		// a glob matching every name in a directory empties it
		if !known {
			return "a glob deleting everything in a directory the guard cannot place"
		}
		if r := ps.protectedDir(abs); r != "" {
			return "a glob deletes everything in " + r
		}
		return ""
	}
	if !recursive {
		return ""
	}
	if !known {
		c := path.Clean(p)
		if c == "." || c == ".." || strings.HasPrefix(c, "../") {
			return "a recursive deletion of " + c + " from an unknown working directory"
		}
		if gitInternal[strings.SplitN(c, "/", 2)[0]] {
			return "a recursive deletion of " + c + " from a working directory the guard cannot know (it could be .git)"
		}
		return ""
	}
	if r := ps.protectedDir(abs); r != "" {
		return "a recursive deletion of " + r
	}
	return ""
}

// gitInternal are the names inside a .git directory whose recursive
// deletion from an unknown directory the guard denies.
var gitInternal = map[string]bool{"objects": true, "refs": true, "logs": true, "hooks": true, "info": true,
	"worktrees": true, "modules": true}

// protectedDir names abs if it is /, a top-level system directory, the
// home directory or the project root (or an ancestor of either).
func (ps paths) protectedDir(abs string) string {
	if abs == "/" {
		return "the root directory /"
	}
	for _, p := range []string{ps.project, ps.projectReal} {
		if p != "" && within(p, abs) {
			if abs == p {
				return "the project root " + abs
			}
			return abs + ", which contains the project"
		}
	}
	for _, h := range []string{ps.home, ps.homeReal} {
		if h != "" && within(h, abs) {
			if abs == h {
				return "the home directory " + abs
			}
			return abs + ", which contains the home directory"
		}
	}
	if strings.Count(abs, "/") == 1 {
		return "the top-level directory " + abs
	}
	return ""
}

// write explains why writing to p (truncating, overwriting) destroys work
// or bypasses checks, or returns "".
func (ps paths) write(cwd, p string) string {
	if p == "" || isUnknown(p) {
		return ""
	}
	abs, _ := resolve(cwd, p)
	if why := writeAt(abs); why != "" {
		return why
	}
	if l := ps.fs.viaUnknownLink(cwd, p); l != "" && l != abs {
		return "it writes through " + printable(l) + ", a link this command makes to a place the guard cannot know"
	}
	if r, ok := ps.fs.real(cwd, p, true); ok && r != abs {
		if why := writeAt(r); why != "" {
			return why + " (through a symlink: " + printable(p) + " is " + r + ")"
		}
	}
	return ""
}

func writeAt(abs string) string {
	if isGit, inside := gitSegments(abs); isGit || inside {
		return "it writes inside .git (history, config and hooks)"
	}
	if isDevice(abs) {
		return "it writes to the block device " + abs
	}
	return ""
}

func isDevice(abs string) bool {
	if !strings.HasPrefix(abs, "/dev/") {
		return false
	}
	for _, d := range []string{"/dev/sd", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/nvme", "/dev/mmcblk", "/dev/disk", "/dev/mapper/", "/dev/md", "/dev/dm-", "/dev/loop", "/dev/root"} {
		if strings.HasPrefix(abs, d) {
			return true
		}
	}
	return false
}

// antiCheat reports whether p, as written or resolved against cwd, names
// an answer or grading file.
func (ps paths) antiCheat(cwd, p string) bool {
	if p == "" {
		return false
	}
	p = strings.ReplaceAll(p, unknown, "")
	if antiCheatPath(ps.mode, p) || antiCheatPath(ps.mode, NormalizePath(p)) {
		return true
	}
	abs, known := resolve(cwd, NormalizePath(p))
	if !known {
		return false
	}
	if ps.antiCheatAbs(abs) {
		return true
	}
	// the file a symlink leads to (ln -s tests/hidden h; cat h/x)
	if r, ok := ps.fs.real(cwd, NormalizePath(p), true); ok && r != abs {
		return ps.antiCheatAbs(r)
	}
	return false
}

// antiCheatAbs checks an absolute path, relative to the project root when
// it is inside it.
func (ps paths) antiCheatAbs(abs string) bool {
	for _, root := range []string{ps.project, ps.projectReal} {
		if root != "" && within(abs, root) {
			return antiCheatPath(ps.mode, strings.TrimPrefix(abs[len(root):], "/"))
		}
	}
	return antiCheatPath(ps.mode, abs)
}

// printable shows a value with unknown parts as "…".
func printable(s string) string {
	s = strings.ReplaceAll(s, unknown, "…")
	return strings.ReplaceAll(s, everything, "*")
}
