// Package guard is the AMP PreToolUse guard: it denies tool calls that read
// or write answer and grading files, and destructive git commands.
//
// Check is pure apart from an optional look at the repository's HEAD (to
// know the current branch for a force push without a refspec) and uses no
// regular expressions, so it is cheap on the hook hot path.
package guard

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Mode selects how strict the guard is.
type Mode string

// Guard modes.
const (
	// ModeDev (the default) blocks answer files and destructive git.
	ModeDev Mode = "dev"
	// ModeEval also blocks any git push, git stash, test fixtures and
	// expected-output files, and CI bypasses (--no-verify, [skip ci]).
	ModeEval Mode = "eval"
)

// EnvMode is the environment variable selecting the mode.
const EnvMode = "PUAX_GUARD_MODE"

// ModeFromEnv returns ModeEval when PUAX_GUARD_MODE=eval, else ModeDev.
func ModeFromEnv() Mode {
	if strings.EqualFold(strings.TrimSpace(os.Getenv(EnvMode)), string(ModeEval)) {
		return ModeEval
	}
	return ModeDev
}

// Denial codes, the first word of a denial's reason.
const (
	CodeAntiCheat  = "ANTI_CHEAT_BLOCK"
	CodeGit        = "GIT_DESTRUCTIVE_BLOCK"
	CodeGitEval    = "GIT_BYPASS_BLOCKED"
	CodeCIBypass   = "CI_BYPASS_BLOCKED"
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
	// Cwd is the working directory, used to find the current branch.
	Cwd string
}

// commandTools are tool names (lowercased) whose input is a shell command.
var commandTools = map[string]bool{
	"bash": true, "shell": true, "execute": true, "exec": true, "run_command": true,
	"run_shell_command": true, "terminal": true, "powershell": true, "sh": true,
}

// Check decides one tool call.
func Check(r Request) Decision {
	tool := strings.ToLower(r.Tool)
	if commandTools[tool] {
		for _, k := range []string{"command", "cmd", "input", "script"} {
			if s, ok := r.Input[k].(string); ok && s != "" {
				if d := CheckCommand(r.Mode, s, r.Cwd); d.Deny {
					return d
				}
			}
		}
		return Decision{}
	}
	keys := []string{"file_path", "filePath", "path", "notebook_path", "notebookPath"}
	if tool == "glob" {
		keys = append(keys, "pattern")
	}
	for _, k := range keys {
		if s, ok := r.Input[k].(string); ok && s != "" {
			if d := CheckPath(r.Mode, s); d.Deny {
				return d
			}
		}
	}
	return Decision{}
}

// CheckPath decides access to one file path by any file tool.
func CheckPath(mode Mode, raw string) Decision {
	for _, view := range []string{raw, NormalizePath(raw)} {
		if protectedPath(mode, view) {
			return Decision{Deny: true, Code: CodeAntiCheat,
				Reason: CodeAntiCheat + ": access to " + clip(raw) + " is not allowed (answer, hidden-test or grading file)"}
		}
	}
	return Decision{}
}

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

// protectedPath reports whether a path names an answer or grading file.
func protectedPath(mode Mode, p string) bool {
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

// NormalizeCommand URL-decodes twice, joins backslash-newline
// continuations, drops quotes and collapses whitespace.
func NormalizeCommand(c string) string {
	c = decodeTwice(c, url.QueryUnescape)
	c = strings.ReplaceAll(c, "\\\r\n", "")
	c = strings.ReplaceAll(c, "\\\n", "")
	c = strings.NewReplacer(`"`, "", `'`, "").Replace(c)
	return strings.Join(strings.Fields(c), " ")
}

// CheckCommand decides one shell command. cwd (may be empty) locates the
// repository for a force push that names no branch.
func CheckCommand(mode Mode, raw, cwd string) Decision {
	views := []string{raw, NormalizeCommand(raw)}
	for _, view := range views {
		for _, simple := range splitCommands(view) {
			if d := checkSimple(mode, simple, raw, cwd); d.Deny {
				return d
			}
		}
	}
	return Decision{}
}

// splitCommands splits a command line into simple commands' words at
// shell operators and command substitutions. Quotes are not interpreted
// (the normalised view has none).
func splitCommands(s string) [][]string {
	var out [][]string
	cur := []string{}
	word := strings.Builder{}
	flushWord := func() {
		if word.Len() > 0 {
			cur = append(cur, word.String())
			word.Reset()
		}
	}
	flushCmd := func() {
		flushWord()
		if len(cur) > 0 {
			out = append(out, cur)
			cur = []string{}
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ';', '&', '|', '(', ')', '`', '\n', '{', '}':
			flushCmd()
		case '$':
			if i+1 < len(s) && s[i+1] == '(' {
				flushCmd()
				i++
			} else {
				word.WriteByte(c)
			}
		case ' ', '\t', '\r', '<', '>', '"', '\'':
			flushWord()
		default:
			word.WriteByte(c)
		}
	}
	flushCmd()
	return out
}

func checkSimple(mode Mode, words []string, raw, cwd string) Decision {
	for i, w := range words {
		// Any word that names a protected path is a read of it (cat, less,
		// cp, python …). Values of --opt=value are checked too.
		candidate := w
		if j := strings.IndexByte(w, '='); j >= 0 && strings.HasPrefix(w, "-") {
			candidate = w[j+1:]
		}
		// Only words that look like paths: a bare word such as "grading" in
		// a commit message is not a file access.
		if strings.ContainsAny(candidate, "/.") && protectedPath(mode, NormalizePath(candidate)) {
			return Decision{Deny: true, Code: CodeAntiCheat,
				Reason: CodeAntiCheat + ": the command touches " + clip(candidate) + ", an answer, hidden-test or grading file"}
		}
		switch path.Base(strings.ToLower(w)) {
		case "git":
			if d := checkGit(mode, words[i+1:], raw, cwd); d.Deny {
				return d
			}
		case "rm":
			if d := checkRm(words[i+1:], raw); d.Deny {
				return d
			}
		}
	}
	if mode == ModeEval {
		for _, w := range words {
			lw := strings.ToLower(w)
			if lw == "--no-verify" || strings.Contains(lw, "[skip") || strings.Contains(lw, "skip_ci") || strings.Contains(lw, "skip-ci") {
				return Decision{Deny: true, Code: CodeCIBypass, Reason: CodeCIBypass + ": bypassing checks is not allowed in eval mode: " + clip(raw)}
			}
		}
	}
	return Decision{}
}

// gitOptionsWithValue are global git options that take the next word.
var gitOptionsWithValue = map[string]bool{"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true, "--exec-path": true}

func checkGit(mode Mode, args []string, raw, cwd string) Decision {
	sub := -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		if gitOptionsWithValue[a] {
			if a == "-C" && i+1 < len(args) && cwd != "" && !filepath.IsAbs(args[i+1]) {
				cwd = filepath.Join(cwd, args[i+1])
			} else if a == "-C" && i+1 < len(args) {
				cwd = args[i+1]
			}
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		sub = i
		break
	}
	if sub < 0 {
		return Decision{}
	}
	rest := args[sub+1:]
	deny := func(code, why string) Decision {
		return Decision{Deny: true, Code: code, Reason: code + ": " + why + ": " + clip(raw)}
	}
	switch strings.ToLower(args[sub]) {
	case "reset":
		if hasArg(rest, "--hard") {
			return deny(CodeGit, "git reset --hard discards work and history")
		}
	case "clean":
		if hasArg(rest, "--force") || hasShortFlag(rest, 'f') {
			return deny(CodeGit, "git clean -f deletes untracked files")
		}
	case "push":
		if mode == ModeEval {
			return deny(CodeGitEval, "git push is not allowed in eval mode")
		}
		if forcePush(rest) && pushTargetsProtected(rest, cwd) {
			return deny(CodeGit, "force push to a protected branch (main, master, trunk, develop, release*, prod*)")
		}
	case "stash":
		if mode == ModeEval {
			return deny(CodeGitEval, "git stash hides work from the grader in eval mode")
		}
	}
	return Decision{}
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

// hasShortFlag reports whether a short option cluster (-f, -fdx) has c.
func hasShortFlag(args []string, c byte) bool {
	for _, a := range args {
		if len(a) >= 2 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a[1:], c) >= 0 {
			return true
		}
	}
	return false
}

func forcePush(args []string) bool {
	if hasShortFlag(args, 'f') {
		return true
	}
	for _, a := range args {
		if a == "--force" || strings.HasPrefix(a, "--force-with-lease") || strings.HasPrefix(a, "--force-if-includes") {
			return true
		}
		if strings.HasPrefix(a, "+") {
			return true
		}
	}
	return false
}

// pushOptionsWithValue are git push options that take the next word.
var pushOptionsWithValue = map[string]bool{"-o": true, "--push-option": true, "--repo": true, "--receive-pack": true, "--exec": true}

// pushTargetsProtected reports whether a (force) push may update a
// protected branch: a refspec names one, --all/--mirror is given, or no
// refspec is given and the current branch is protected or unknown.
func pushTargetsProtected(args []string, cwd string) bool {
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--all" || a == "--mirror" || a == "--branches" {
			return true
		}
		if pushOptionsWithValue[a] {
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		positional = append(positional, a)
	}
	if len(positional) <= 1 { // only a remote, or nothing: the current branch
		b, ok := currentBranch(cwd)
		return !ok || protectedBranch(b)
	}
	for _, spec := range positional[1:] {
		spec = strings.TrimPrefix(spec, "+")
		dst := spec
		if j := strings.LastIndexByte(spec, ':'); j >= 0 {
			dst = spec[j+1:]
		}
		if dst == "" || dst == "HEAD" {
			b, ok := currentBranch(cwd)
			if !ok || protectedBranch(b) {
				return true
			}
			continue
		}
		if protectedBranch(dst) {
			return true
		}
	}
	return false
}

func protectedBranch(b string) bool {
	b = strings.ToLower(strings.TrimPrefix(b, "refs/heads/"))
	switch b {
	case "main", "master", "trunk", "develop", "development", "production", "prod", "release", "stable":
		return true
	}
	return strings.HasPrefix(b, "release/") || strings.HasPrefix(b, "release-") || strings.HasPrefix(b, "prod/")
}

// currentBranch reads the branch HEAD points to, walking up from cwd.
func currentBranch(cwd string) (string, bool) {
	if cwd == "" {
		return "", false
	}
	dir := filepath.Clean(cwd)
	for range 64 {
		gitPath := filepath.Join(dir, ".git")
		if fi, err := os.Stat(gitPath); err == nil {
			gitDir := gitPath
			if !fi.IsDir() { // a worktree: ".git" is a file "gitdir: <path>"
				data, err := os.ReadFile(gitPath)
				if err != nil {
					return "", false
				}
				line := strings.TrimSpace(string(data))
				if !strings.HasPrefix(line, "gitdir:") {
					return "", false
				}
				gitDir = strings.TrimSpace(strings.TrimPrefix(line, "gitdir:"))
				if !filepath.IsAbs(gitDir) {
					gitDir = filepath.Join(dir, gitDir)
				}
			}
			head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
			if err != nil {
				return "", false
			}
			ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
			if !ok {
				return "", false // detached HEAD
			}
			return strings.TrimPrefix(ref, "refs/heads/"), true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", false
}

// checkRm denies rm of a .git directory, or a recursive rm inside one
// (rm .git/index.lock stays allowed).
func checkRm(args []string, raw string) Decision {
	recursive := hasArg(args, "--recursive") || hasShortFlag(args, 'r') || hasShortFlag(args, 'R')
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		p := NormalizePath(a)
		inside := strings.HasPrefix(p, ".git/") || strings.Contains(p, "/.git/")
		if path.Base(p) == ".git" || (inside && recursive) {
			return Decision{Deny: true, Code: CodeGit, Reason: CodeGit + ": removing .git destroys the repository history: " + clip(raw)}
		}
	}
	return Decision{}
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
