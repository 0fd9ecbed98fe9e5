// Package guard is the AMP PreToolUse guard: it denies tool calls that read
// or write answer and grading files, destroy work (destructive git, deleting
// or overwriting the repository, the project, the home directory or /), or
// skip verification.
//
// Shell commands are parsed with a real Bash parser (mvdan.cc/sh) and every
// simple command the script could run is checked after bash's own
// expansions: quoting and escapes, brace expansion, variables assigned
// earlier in the script, command substitutions whose output is known
// (echo, printf, pwd), globs (matched against .git and the protected names),
// wrappers (env, sudo, xargs, find -exec, timeout …) and code handed to
// sh -c, eval and script interpreters. Git commands are parsed with git's
// own rules (global options, option clusters, unique-prefix abbreviations,
// aliases given with -c). Where the guard cannot know what will run and the
// rest of the command could be destructive, it denies: it fails closed where
// it is blind.
package guard

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Mode selects how strict the guard is.
type Mode string

// Guard modes.
const (
	// ModeDev (the default) blocks answer files, destructive commands and
	// skipped verification.
	ModeDev Mode = "dev"
	// ModeEval also blocks any git push, git stash, test fixtures and
	// expected-output files, and [skip ci].
	ModeEval Mode = "eval"
)

// EnvMode is the environment variable selecting the mode.
const EnvMode = "PUAX_GUARD_MODE"

// EnvProjectDir is the variable Claude Code sets to the project root for
// hooks; the guard protects that directory.
const EnvProjectDir = "CLAUDE_PROJECT_DIR"

// ModeFromEnv returns ModeEval when PUAX_GUARD_MODE=eval, else ModeDev.
func ModeFromEnv() Mode {
	if strings.EqualFold(strings.TrimSpace(os.Getenv(EnvMode)), string(ModeEval)) {
		return ModeEval
	}
	return ModeDev
}

// Denial codes, the first word of a denial's reason.
const (
	// CodeAntiCheat: an answer, hidden-test or grading file.
	CodeAntiCheat = "ANTI_CHEAT_BLOCK"
	// CodeGit: a git command that destroys work or history.
	CodeGit = "GIT_DESTRUCTIVE_BLOCK"
	// CodeGitEval: a git command allowed in dev mode only.
	CodeGitEval = "GIT_BYPASS_BLOCKED"
	// CodeCIBypass: skipping verification (--no-verify, hooks, [skip ci]).
	CodeCIBypass = "CI_BYPASS_BLOCKED"
	// CodeDestructive: deleting or overwriting protected paths.
	CodeDestructive = "DESTRUCTIVE_BLOCK"
	// CodeBlind: the guard cannot know what would run, and it could
	// destroy work.
	CodeBlind = "BLIND_COMMAND_BLOCK"
	// CodeGuardError: the guard could not check the call.
	CodeGuardError = "GUARD_ERROR"
)

// Decision is the guard's verdict on one tool call.
type Decision struct {
	Deny   bool   `json:"deny"`
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Request is one tool call to check.
type Request struct {
	Mode Mode
	// Tool is the host's tool name (Bash, Read, Write, Edit, Grep, …).
	Tool string
	// Input is the tool's input object.
	Input map[string]any
	// Cwd is the host's working directory (relative paths resolve there).
	Cwd string
	// ProjectDir is the project root to protect; default
	// $CLAUDE_PROJECT_DIR, else the repository containing Cwd, else Cwd.
	ProjectDir string
	// Home is the home directory to protect; default $HOME.
	Home string
}

// commandTools are tool names (lowercased) whose input is a shell command.
var commandTools = map[string]bool{
	"bash": true, "shell": true, "execute": true, "exec": true, "run_command": true,
	"run_shell_command": true, "terminal": true, "powershell": true, "sh": true,
}

// writeTools are file tools that change files.
var writeTools = map[string]bool{
	"write": true, "edit": true, "multiedit": true, "notebookedit": true, "writefile": true, "editfile": true,
	"str_replace_based_edit_tool": true, "create": true,
}

// Check decides one tool call.
func Check(r Request) Decision {
	ps := r.paths()
	tool := strings.ToLower(r.Tool)
	if commandTools[tool] {
		for _, k := range []string{"command", "cmd", "input", "script"} {
			if s, ok := r.Input[k].(string); ok && s != "" {
				if d := checkCommand(ps, s, r.Cwd); d.Deny {
					return d
				}
			}
		}
		return Decision{}
	}
	keys := []string{"file_path", "filePath", "path", "notebook_path", "notebookPath"}
	for _, k := range keys {
		s, ok := r.Input[k].(string)
		if !ok || s == "" {
			continue
		}
		if d := checkFile(ps, s, r.Cwd); d.Deny {
			return d
		}
		if writeTools[tool] {
			if why := ps.writeThrough(r.Cwd, s); why != "" {
				return Decision{Deny: true, Code: CodeDestructive, Reason: CodeDestructive + ": " + r.Tool + " of " + clip(s) + " is blocked: " + why}
			}
		}
		if tool == "grep" || tool == "glob" || tool == "ls" || tool == "search" {
			if d := searchRoot(ps, s, r.Cwd); d.Deny {
				return d
			}
		}
	}
	// Glob's pattern and Grep's glob filter select files by name.
	for _, k := range []string{"pattern", "glob", "include"} {
		if k == "pattern" && tool != "glob" {
			continue
		}
		s, ok := r.Input[k].(string)
		if !ok || s == "" {
			continue
		}
		base, _ := r.Input["path"].(string)
		if d := checkGlob(ps, s, base, r.Cwd); d.Deny {
			return d
		}
		if d := globThroughLink(ps, s, base, r.Cwd); d.Deny {
			return d
		}
	}
	return Decision{}
}

func (r Request) paths() paths {
	ps := paths{mode: r.Mode, home: r.Home, project: r.ProjectDir}
	if ps.mode == "" {
		ps.mode = ModeDev
	}
	if ps.home == "" {
		ps.home, _ = os.UserHomeDir()
	}
	if ps.project == "" {
		ps.project = os.Getenv(EnvProjectDir)
	}
	if ps.project == "" && r.Cwd != "" {
		ps.project = repoRoot(r.Cwd)
	}
	if ps.project != "" && filepath.IsAbs(ps.project) {
		ps.project = filepath.Clean(ps.project)
	} else {
		ps.project = ""
	}
	if ps.home != "" {
		ps.home = filepath.Clean(ps.home)
	}
	ps.projectReal = realDir(ps.project)
	ps.homeReal = realDir(ps.home)
	ps.fs = newFSView()
	return ps
}

// realDir is dir with symlinks resolved, or "" when that is dir itself or
// it cannot be resolved.
func realDir(dir string) string {
	if dir == "" {
		return ""
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil || r == dir {
		return ""
	}
	return r
}

// repoRoot returns the directory holding .git at or above dir, else dir.
func repoRoot(dir string) string {
	if !filepath.IsAbs(dir) {
		return ""
	}
	d := filepath.Clean(dir)
	for range 64 {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return filepath.Clean(dir)
}

// CheckPath decides access to one file path by any file tool.
func CheckPath(mode Mode, raw string) Decision {
	return checkFile(paths{mode: mode}, raw, "")
}

func checkFile(ps paths, raw, cwd string) Decision {
	if ps.antiCheat(cwd, raw) {
		return Decision{Deny: true, Code: CodeAntiCheat,
			Reason: CodeAntiCheat + ": access to " + clip(raw) + " is not allowed (answer, hidden-test or grading file)"}
	}
	return Decision{}
}

// searchRoot denies a search rooted right above a hidden-test directory
// (Grep or Glob over tests/ would read tests/hidden/).
func searchRoot(ps paths, p, cwd string) Decision {
	abs, known := resolve(cwd, NormalizePath(p))
	if !known {
		return Decision{}
	}
	if r, ok := ps.fs.real(cwd, p, true); ok {
		abs = r // a search follows a symlink given as its root
	}
	for _, sub := range []string{"hidden", "hidden_tests", "hidden-tests", "grading", ".score", "answer_key"} {
		cand := filepath.Join(abs, sub)
		if !ps.antiCheat("", cand) {
			continue
		}
		if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
			return Decision{Deny: true, Code: CodeAntiCheat,
				Reason: CodeAntiCheat + ": searching " + clip(p) + " would read " + sub + "/, an answer, hidden-test or grading directory"}
		}
	}
	return Decision{}
}

// checkGlob denies a name pattern aimed at answer files: one that matches
// a protected name but not its neutral twin (tests/hid*/**, *solution*),
// as opposed to a broad pattern (**/*.py).
func checkGlob(ps paths, pattern, base, cwd string) Decision {
	full := pattern
	if base != "" && !strings.HasPrefix(pattern, "/") {
		full = strings.TrimSuffix(base, "/") + "/" + pattern
	}
	for _, probe := range globProbes(ps.mode) {
		if !globMatch(full, probe.path) && !globMatch(pattern, probe.path) {
			continue
		}
		if globMatch(full, probe.twin) || globMatch(pattern, probe.twin) {
			continue
		}
		return Decision{Deny: true, Code: CodeAntiCheat,
			Reason: CodeAntiCheat + ": the pattern " + clip(pattern) + " selects answer, hidden-test or grading files"}
	}
	return Decision{}
}

// globThroughLink denies a pattern whose literal leading directories lead,
// through a symlink, into an answer or hidden-test directory (hid/** with
// hid a link to tests/hidden).
func globThroughLink(ps paths, pattern, base, cwd string) Decision {
	var lit []string
	for _, seg := range strings.Split(NormalizePath(pattern), "/") {
		if strings.ContainsAny(seg, "*?[{") {
			break
		}
		lit = append(lit, seg)
	}
	if len(lit) == 0 {
		return Decision{}
	}
	dir := strings.Join(lit, "/")
	if dir == "" {
		dir = "/"
	}
	if base != "" && !strings.HasPrefix(dir, "/") {
		dir = strings.TrimSuffix(base, "/") + "/" + dir
	}
	if r, ok := ps.fs.real(cwd, dir, true); ok && ps.antiCheatAbs(r) {
		return Decision{Deny: true, Code: CodeAntiCheat,
			Reason: CodeAntiCheat + ": the pattern " + clip(pattern) + " reaches " + r + ", an answer, hidden-test or grading directory"}
	}
	return Decision{}
}

type probe struct{ path, twin string }

func globProbes(mode Mode) []probe {
	ps := []probe{
		{"test/hidden/a.py", "test/unit/a.py"}, {"tests/hidden/a.py", "tests/unit/a.py"},
		{"src/test/hidden/a.go", "src/test/unit/a.go"}, {"grading/a.py", "src/a.py"}, {".score/a", ".cache/a"},
		{"hidden_tests/a.py", "unit_tests/a.py"}, {"a.hidden.py", "a.shown.py"}, {"a.solution.py", "a.main.py"},
		{"SOLUTION.md", "README.md"}, {"solution.md", "readme.md"}, {"a_solution.txt", "a_notes.txt"},
		{"a.scoring.json", "a.other.json"}, {"rubric.json", "config.json"}, {"grading_script.py", "build_script.py"},
		{"answer_key.txt", "answer_sheet.txt"}, {"expected_output.txt", "actual_output.txt"},
	}
	if mode == ModeEval {
		ps = append(ps, probe{"test/fixtures/a.json", "test/helpers/a.json"}, probe{"a.golden", "a.json"})
	}
	return ps
}

// globMatch matches a Glob-tool pattern (with ** across directories and
// {a,b} alternatives) against a relative path, ignoring case.
func globMatch(pattern, name string) bool {
	pattern = strings.ToLower(strings.TrimPrefix(NormalizePath(pattern), "./"))
	name = strings.ToLower(name)
	if i := strings.IndexByte(pattern, '{'); i >= 0 {
		if j := strings.IndexByte(pattern[i:], '}'); j > 0 {
			for _, alt := range strings.Split(pattern[i+1:i+j], ",") {
				if globMatch(pattern[:i]+alt+pattern[i+j+1:], name) {
					return true
				}
			}
			return false
		}
	}
	ps := strings.Split(pattern, "/")
	ns := strings.Split(name, "/")
	return matchSegs(ps, ns) || (len(ps) > 0 && !strings.HasPrefix(pattern, "/") && matchAnySuffix(ps, ns))
}

// matchAnySuffix lets a relative pattern rooted in a search path match
// deeper (Grep's glob filter matches at any depth).
func matchAnySuffix(ps, ns []string) bool {
	for i := 1; i < len(ns); i++ {
		if matchSegs(ps, ns[i:]) {
			return true
		}
	}
	return false
}

func matchSegs(ps, ns []string) bool {
	if len(ps) == 0 {
		return len(ns) == 0
	}
	if ps[0] == "**" {
		for i := 0; i <= len(ns); i++ {
			if matchSegs(ps[1:], ns[i:]) {
				return true
			}
		}
		return false
	}
	if len(ns) == 0 {
		return false
	}
	if ok, _ := filepath.Match(ps[0], ns[0]); !ok {
		return false
	}
	return matchSegs(ps[1:], ns[1:])
}

// CheckCommand decides one shell command. cwd (may be empty) is where it
// runs.
func CheckCommand(mode Mode, raw, cwd string) Decision {
	return checkCommand(Request{Mode: mode, Cwd: cwd}.paths(), raw, cwd)
}

func checkCommand(ps paths, raw, cwd string) (d Decision) {
	defer func() {
		if p := recover(); p != nil {
			// fail closed: a fault in the analysis denies
			d = Decision{Deny: true, Code: CodeGuardError, Reason: fmt.Sprintf("%s: the guard failed on this command: %v", CodeGuardError, p)}
		}
	}()
	// The first pass reads files as they are on disk. A script read
	// after a git command that may set it to another version (git
	// checkout REF, git stash pop) is read again in a pass of its own
	// for each such version.
	seen := map[gitVersion]bool{} // by ""
	var queue []gitVersion
	for pass := 0; ; pass++ {
		a := &analyzer{paths: ps}
		a.fs = newFSView()
		if pass > 0 {
			v := queue[0]
			queue = queue[1:]
			a.fs.variant = &v
		}
		s := newState(a, "")
		if filepath.IsAbs(cwd) {
			s.cwd = filepath.Clean(cwd)
			a.startCwd = s.cwd
		}
		a.script(s, raw)
		if a.found != nil {
			if v := a.fs.variant; v != nil && !strings.Contains(a.found.Reason, v.by) {
				a.found.Reason += " (as " + clip(printable(v.by)) + " may leave it: version " + clip(printable(v.ref)) + ")"
			}
			return *a.found
		}
		for _, v := range a.fs.needed {
			k := v
			k.by = ""
			if !seen[k] {
				seen[k] = true
				queue = append(queue, v)
			}
		}
		if len(queue) == 0 {
			return Decision{}
		}
		if pass+1 > maxVersionPasses {
			return Decision{Deny: true, Code: CodeBlind, Reason: CodeBlind + ": the command runs scripts after git " +
				"commands that may check out more versions than the guard reads (run the scripts in a separate call)"}
		}
	}
}

// clip shortens s for a reason text.
func clip(s string) string {
	const max = 200
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
