//go:build unix

package guard

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHardLinkWalkCutShort checks that a .git too large to walk fails
// closed for files with other links, and stays open for files with one.
func TestHardLinkWalkCutShort(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	for _, d := range []string{".git/objects/aa", ".git/refs/heads", "src"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".git/HEAD", ".git/config", ".git/objects/aa/bb", "src/x.go", "src/one.go"} {
		if err := os.WriteFile(filepath.Join(repo, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(repo, "src/x.go"), filepath.Join(repo, "x2.go")); err != nil {
		t.Fatal(err)
	}
	old := maxGitWalk
	maxGitWalk = 3
	t.Cleanup(func() { maxGitWalk = old })
	tests := []struct {
		tool string
		path string
		code string
	}{
		{"Write", "x2.go", CodeDestructive},    // other links, walk cut short
		{"Write", "src/x.go", CodeDestructive}, // the same file
		{"Write", "src/one.go", ""},            // one link: nothing to rule out
		{"Write", "new.go", ""},                // does not exist yet
	}
	for _, tt := range tests {
		d := Check(Request{Mode: ModeDev, Tool: tt.tool, Input: map[string]any{"file_path": tt.path},
			Cwd: repo, ProjectDir: repo, Home: filepath.Join(root, "home")})
		if d.Code != tt.code {
			t.Errorf("%s %s: got %q (%s), want %q", tt.tool, tt.path, d.Code, d.Reason, tt.code)
		}
	}
}

// BenchmarkHardLinkWrite measures a Write tool call onto a file with two
// links outside .git: the walk of .git a fresh hook process makes.
func BenchmarkHardLinkWrite(b *testing.B) {
	root := b.TempDir()
	setupRepoFSAt(b, root)
	repo := filepath.Join(root, "repo")
	req := Request{Mode: ModeDev, Tool: "Write", Input: map[string]any{"file_path": "hl-src"},
		Cwd: repo, ProjectDir: repo, Home: filepath.Join(root, "home")}
	for b.Loop() {
		gitWalks.Clear() // each hook call is a new process
		if d := Check(req); d.Deny {
			b.Fatal(d.Reason)
		}
	}
}
