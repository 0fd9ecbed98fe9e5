package guard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	bash := func(cmd string) (string, map[string]any) { return "Bash", map[string]any{"command": cmd} }
	file := func(tool, p string) (string, map[string]any) { return tool, map[string]any{"file_path": p} }
	tests := []struct {
		name  string
		mode  Mode
		tool  string
		input map[string]any
		code  string // "" = allowed
	}{
		// Answer and grading files, by file_path (Claude's field).
		{"read hidden test", ModeDev, "", nil, CodeAntiCheat},
		{"read normal file", ModeDev, "", nil, ""},
		{"dotdot into hidden", ModeDev, "", nil, CodeAntiCheat},
		{"url-encoded dots", ModeDev, "", nil, CodeAntiCheat},
		{"SOLUTION.md encoded", ModeDev, "", nil, CodeAntiCheat},
		{"backslashes", ModeDev, "", nil, CodeAntiCheat},
		{"a..b.ts is fine", ModeDev, "", nil, ""},
		{"write grading script", ModeDev, "", nil, CodeAntiCheat},
		{"edit rubric", ModeDev, "", nil, CodeAntiCheat},
		{"expected output", ModeDev, "", nil, CodeAntiCheat},
		{"fixtures allowed in dev", ModeDev, "", nil, ""},
		{"fixtures denied in eval", ModeEval, "", nil, CodeAntiCheat},
		{"golden allowed in dev", ModeDev, "", nil, ""},
		{"golden denied in eval", ModeEval, "", nil, CodeAntiCheat},
		{"grep in hidden dir", ModeDev, "Grep", map[string]any{"pattern": "answer", "path": "tests/hidden"}, CodeAntiCheat},
		{"glob pattern", ModeDev, "Glob", map[string]any{"pattern": "**/*.solution.py"}, CodeAntiCheat},
		{"readfile path field", ModeDev, "ReadFile", map[string]any{"path": "test/hidden/secret.key"}, CodeAntiCheat},
		// Commands reading protected paths.
		{"cat hidden", ModeDev, "", nil, CodeAntiCheat},
		{"redirect from answers", ModeDev, "", nil, CodeAntiCheat},
		{"commit message word", ModeDev, "", nil, ""},
		// Destructive git.
		{"reset hard", ModeDev, "", nil, CodeGit},
		{"reset hard spaced", ModeDev, "", nil, CodeGit},
		{"reset hard with -C", ModeDev, "", nil, CodeGit},
		{"reset hard quoted", ModeDev, "", nil, CodeGit},
		{"reset hard chained", ModeDev, "", nil, CodeGit},
		{"reset hard in subshell", ModeDev, "", nil, CodeGit},
		{"reset hard via bash -c", ModeDev, "", nil, CodeGit},
		{"reset soft ok", ModeDev, "", nil, ""},
		{"clean -fdx", ModeDev, "", nil, CodeGit},
		{"clean --force", ModeDev, "", nil, CodeGit},
		{"clean dry run ok", ModeDev, "", nil, ""},
		{"rm -rf .git", ModeDev, "", nil, CodeDestructive},
		{"rm -rf ./.git/", ModeDev, "", nil, CodeDestructive},
		{"rm -rf .git/*", ModeDev, "", nil, CodeDestructive},
		{"rm index.lock ok", ModeDev, "", nil, ""},
		{"rm .github ok", ModeDev, "", nil, ""},
		{"status ok", ModeDev, "", nil, ""},
		{"commit ok", ModeDev, "", nil, ""},
		{"push ok in dev", ModeDev, "", nil, ""},
		{"force push main", ModeDev, "", nil, CodeGit},
		{"force push +master", ModeDev, "", nil, CodeGit},
		{"force push HEAD:main", ModeDev, "", nil, CodeGit},
		{"force-with-lease release", ModeDev, "", nil, CodeGit},
		{"force push feature denied", ModeDev, "", nil, CodeGit},
		{"force push all", ModeDev, "", nil, CodeGit},
		{"force push no refspec, unknown branch", ModeDev, "", nil, CodeGit},
		{"push denied in eval", ModeEval, "", nil, CodeGitEval},
		{"quoted push in eval", ModeEval, "", nil, CodeGitEval},
		{"stash in eval", ModeEval, "", nil, CodeGitEval},
		{"stash ok in dev", ModeDev, "", nil, ""},
		{"no-verify in eval", ModeEval, "", nil, CodeCIBypass},
		{"no-verify denied in dev", ModeDev, "", nil, CodeCIBypass},
		{"go test -skip ok", ModeEval, "", nil, ""},
		{"status ok in eval", ModeEval, "", nil, ""},
		{"unknown tool, no path", ModeDev, "WebFetch", map[string]any{"url": "https://example.com/grading/x"}, ""},
		{"glob aimed at hidden tests", ModeDev, "Glob", map[string]any{"pattern": "tests/hid*/**"}, CodeAntiCheat},
		{"glob under a path", ModeDev, "Glob", map[string]any{"pattern": "hidden/*.py", "path": "tests"}, CodeAntiCheat},
		{"glob for solutions", ModeDev, "Glob", map[string]any{"pattern": "**/*solution*"}, CodeAntiCheat},
		{"broad glob allowed", ModeDev, "Glob", map[string]any{"pattern": "**/*.py"}, ""},
		{"broad glob in tests allowed", ModeDev, "Glob", map[string]any{"pattern": "tests/**/*.py"}, ""},
		{"grep glob filter", ModeDev, "Grep", map[string]any{"pattern": "def ", "glob": "**/hidden/**"}, CodeAntiCheat},
		{"grep include filter", ModeDev, "Grep", map[string]any{"pattern": "x", "path": ".", "glob": "*.solution.*"}, CodeAntiCheat},
		{"grep regex is not a path", ModeDev, "Grep", map[string]any{"pattern": "tests/hidden", "path": "src"}, ""},
		{"grep src allowed", ModeDev, "Grep", map[string]any{"pattern": "TODO", "path": "src", "glob": "*.go"}, ""},
		{"write into .git", ModeDev, "Write", map[string]any{"file_path": ".git/hooks/pre-commit", "content": "exit 0"}, CodeDestructive},
		{"edit .git/config", ModeDev, "Edit", map[string]any{"file_path": "/repo/.git/config"}, CodeDestructive},
		{"multiedit via dotdot", ModeDev, "MultiEdit", map[string]any{"file_path": "src/../.git/HEAD"}, CodeDestructive},
		{"notebook in hidden", ModeDev, "NotebookEdit", map[string]any{"notebook_path": "tests/hidden/a.ipynb"}, CodeAntiCheat},
		{"read .git is fine", ModeDev, "Read", map[string]any{"file_path": ".git/HEAD"}, ""},
		{"write normal file", ModeDev, "Write", map[string]any{"file_path": "src/main.go"}, ""},
	}
	inputs := map[string]func() (string, map[string]any){
		"read hidden test":                      func() (string, map[string]any) { return file("Read", "/repo/test/hidden/case1.txt") },
		"read normal file":                      func() (string, map[string]any) { return file("Read", "/repo/src/main.go") },
		"dotdot into hidden":                    func() (string, map[string]any) { return file("Read", "src/..//test/./hidden/x") },
		"url-encoded dots":                      func() (string, map[string]any) { return file("Read", "src/%2e%2e/test/hidden/x") },
		"SOLUTION.md encoded":                   func() (string, map[string]any) { return file("Read", "docs/SOLUTION%2Emd") },
		"backslashes":                           func() (string, map[string]any) { return file("Read", `C:\repo\test\hidden\a.txt`) },
		"a..b.ts is fine":                       func() (string, map[string]any) { return file("Read", "src/a..b.ts") },
		"write grading script":                  func() (string, map[string]any) { return file("Write", "grading_script.py") },
		"edit rubric":                           func() (string, map[string]any) { return file("Edit", "eval/rubric.json") },
		"expected output":                       func() (string, map[string]any) { return file("Read", "cases/expected_output.txt") },
		"fixtures allowed in dev":               func() (string, map[string]any) { return file("Read", "test/fixtures/a.json") },
		"fixtures denied in eval":               func() (string, map[string]any) { return file("Read", "test/fixtures/a.json") },
		"golden allowed in dev":                 func() (string, map[string]any) { return file("Read", "testdata/out.golden") },
		"golden denied in eval":                 func() (string, map[string]any) { return file("Read", "testdata/out.golden") },
		"cat hidden":                            func() (string, map[string]any) { return bash("cat test/hidden/answer.txt") },
		"redirect from answers":                 func() (string, map[string]any) { return bash("python run.py <tests/hidden/in.txt") },
		"commit message word":                   func() (string, map[string]any) { return bash(`git commit -m "update grading notes"`) },
		"reset hard":                            func() (string, map[string]any) { return bash("git reset --hard HEAD~1") },
		"reset hard spaced":                     func() (string, map[string]any) { return bash("git   reset    --hard") },
		"reset hard with -C":                    func() (string, map[string]any) { return bash("git -C ../other reset --hard origin/main") },
		"reset hard quoted":                     func() (string, map[string]any) { return bash(`git reset "--hard"`) },
		"reset hard chained":                    func() (string, map[string]any) { return bash("make && git reset --hard") },
		"reset hard in subshell":                func() (string, map[string]any) { return bash("echo $(git reset --hard)") },
		"reset hard via bash -c":                func() (string, map[string]any) { return bash(`bash -c 'git reset --hard'`) },
		"reset soft ok":                         func() (string, map[string]any) { return bash("git reset --soft HEAD~1") },
		"clean -fdx":                            func() (string, map[string]any) { return bash("git clean -fdx") },
		"clean --force":                         func() (string, map[string]any) { return bash("git clean --force -d") },
		"clean dry run ok":                      func() (string, map[string]any) { return bash("git clean -n") },
		"rm -rf .git":                           func() (string, map[string]any) { return bash("rm -rf .git") },
		"rm -rf ./.git/":                        func() (string, map[string]any) { return bash("rm -rf ./.git/") },
		"rm -rf .git/*":                         func() (string, map[string]any) { return bash("rm -rf .git/*") },
		"rm index.lock ok":                      func() (string, map[string]any) { return bash("rm .git/index.lock") },
		"rm .github ok":                         func() (string, map[string]any) { return bash("rm -rf .github/workflows/old.yml") },
		"status ok":                             func() (string, map[string]any) { return bash("git status") },
		"commit ok":                             func() (string, map[string]any) { return bash(`git commit -m "fix"`) },
		"push ok in dev":                        func() (string, map[string]any) { return bash("git push origin main") },
		"force push main":                       func() (string, map[string]any) { return bash("git push --force origin main") },
		"force push +master":                    func() (string, map[string]any) { return bash("git push origin +master") },
		"force push HEAD:main":                  func() (string, map[string]any) { return bash("git push -f origin HEAD:refs/heads/main") },
		"force-with-lease release":              func() (string, map[string]any) { return bash("git push --force-with-lease origin release/1.2") },
		"force push feature denied":             func() (string, map[string]any) { return bash("git push --force origin feature/x") },
		"force push all":                        func() (string, map[string]any) { return bash("git push --force --all") },
		"force push no refspec, unknown branch": func() (string, map[string]any) { return bash("git push -f") },
		"push denied in eval":                   func() (string, map[string]any) { return bash("git push origin feature") },
		"quoted push in eval":                   func() (string, map[string]any) { return bash(`git pu"sh" origin x`) },
		"stash in eval":                         func() (string, map[string]any) { return bash("git stash") },
		"stash ok in dev":                       func() (string, map[string]any) { return bash("git stash") },
		"no-verify in eval":                     func() (string, map[string]any) { return bash("git commit --no-verify -m x") },
		"no-verify denied in dev":               func() (string, map[string]any) { return bash("git commit --no-verify -m x") },
		"go test -skip ok":                      func() (string, map[string]any) { return bash("go test -skip TestSlow ./...") },
		"status ok in eval":                     func() (string, map[string]any) { return bash("git status") },
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool, input := tc.tool, tc.input
			if input == nil {
				mk, ok := inputs[tc.name]
				if !ok {
					t.Fatalf("no input for %q", tc.name)
				}
				tool, input = mk()
			}
			d := Check(Request{Mode: tc.mode, Tool: tool, Input: input})
			if d.Code != tc.code || d.Deny != (tc.code != "") {
				t.Fatalf("Check(%s %v) = %+v, want code %q", tool, input, d, tc.code)
			}
			if d.Deny && !strings.HasPrefix(d.Reason, tc.code+": ") {
				t.Fatalf("reason %q does not start with its code", d.Reason)
			}
		})
	}
}

func TestReasonEchoesRawPath(t *testing.T) {
	d := CheckPath(ModeDev, "src/%2e%2e/test/hidden/x")
	if !strings.Contains(d.Reason, "src/%2e%2e/test/hidden/x") {
		t.Fatalf("reason %q", d.Reason)
	}
}

func TestNormalize(t *testing.T) {
	if got := NormalizePath("/a/b/../c"); got != "/a/c" {
		t.Errorf("NormalizePath = %q", got)
	}
	if got := NormalizePath("a//b/./c"); got != "a/b/c" {
		t.Errorf("NormalizePath = %q", got)
	}
	if got := NormalizeCommand("git \\\n  reset   \"--hard\""); got != "git reset --hard" {
		t.Errorf("NormalizeCommand = %q", got)
	}
}

func TestModeFromEnv(t *testing.T) {
	t.Setenv(EnvMode, "eval")
	if ModeFromEnv() != ModeEval {
		t.Fatal("eval not read")
	}
	t.Setenv(EnvMode, "")
	if ModeFromEnv() != ModeDev {
		t.Fatal("default is not dev")
	}
}

func BenchmarkCheckCommand(b *testing.B) {
	in := map[string]any{"command": "cd /repo && go test ./... 2>&1 | tail -20"}
	for b.Loop() {
		Check(Request{Mode: ModeDev, Tool: "Bash", Input: in})
	}
}

func TestSearchRootAboveHiddenTests(t *testing.T) {
	proj := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proj, "tests", "hidden"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool string
		in   map[string]any
		deny bool
	}{
		{"Grep", map[string]any{"pattern": "assert", "path": "tests"}, true},
		{"Glob", map[string]any{"pattern": "*", "path": proj + "/tests"}, true},
		{"Grep", map[string]any{"pattern": "assert", "path": "src"}, false},
	} {
		d := Check(Request{Mode: ModeDev, Tool: tc.tool, Input: tc.in, Cwd: proj, ProjectDir: proj})
		if d.Deny != tc.deny {
			t.Errorf("%s %v: %+v, want deny=%v", tc.tool, tc.in, d, tc.deny)
		}
	}
}

func TestEvalModeTable(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		code string
	}{
		{"git push origin feature", CodeGitEval},
		{`g\it pu"sh" origin x`, CodeGitEval},
		{"git stash", CodeGitEval},
		{`git commit -m "fix [skip ci]"`, CodeCIBypass},
		{"cat test/fixtures/a.json", CodeAntiCheat},
		{"git status", ""},
		{"go test -skip TestSlow ./...", ""},
	} {
		r := tableRequest(tc.cmd)
		r.Mode = ModeEval
		if d := Check(r); d.Code != tc.code {
			t.Errorf("eval %q: %+v, want %q", tc.cmd, d, tc.code)
		}
	}
}

func TestUnparsableCommandFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		deny bool
	}{
		{"git reset --hard; (", true},
		{"echo 'unterminated", false},
		{"rm -rf .git )", true},
	} {
		if d := Check(tableRequest(tc.cmd)); d.Deny != tc.deny {
			t.Errorf("%q: %+v, want deny=%v", tc.cmd, d, tc.deny)
		}
	}
}
