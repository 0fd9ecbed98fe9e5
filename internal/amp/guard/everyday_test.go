//go:build unix

package guard

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The everyday table: commands developers chain every day — builds,
// tests, linters and git workflows — checked in real repositories the way
// the hook checks them (guard.Check with the tool call's cwd). Scripts
// and makefiles run after a git command that changes the work tree are
// read as git would leave them; in "bad", the other versions are
// destructive and those commands stay denied.

// everydayAllowed must all be allowed in "good", a repository whose every
// version (branches, upstream, stash) is harmless.
var everydayAllowed = []string{
	// The false alarms of issue 29.
	"git pull && make",
	"git checkout -b x && ./build.sh",
	"git stash && make",
	"git checkout main && make",
	"git fetch && git merge origin/main && make test",
	"git pull && ./build.sh",
	// Git workflows.
	"git checkout feature && make",
	"git checkout feature && ./build.sh",
	"git switch feature && make test",
	"git switch -c topic && ./build.sh",
	"git switch -C topic && make",
	"git checkout -b topic origin/main && make",
	"git checkout -B topic feature && ./build.sh",
	"git checkout - && make",
	"git stash pop && make",
	"git stash apply && ./build.sh",
	"git stash push -m wip && make test",
	"git stash list && make",
	"git pull --rebase && make test",
	"git pull origin main && make",
	"git fetch origin && git rebase origin/main && make test",
	"git merge feature && make",
	"git merge --no-ff feature -m 'merge feature' && make test",
	"git cherry-pick feature && make",
	"git revert --no-edit HEAD && make",
	"git restore build.sh && ./build.sh",
	"git checkout -- build.sh && ./build.sh",
	"git restore --source feature Makefile && make",
	"git reset HEAD~1 && make",
	"git reset --soft HEAD~1 && make test",
	"git branch topic && git checkout topic && make",
	"git tag v2 && make",
	"git log --oneline -5 && make",
	"git status && ./build.sh",
	"git diff --stat && make test",
	"git add -A && git commit -qm wip && make",
	"git fetch --all --prune && make",
	"git am --abort; make",
	"git apply fix.diff && make test",
	"git -C . checkout feature && make",
	"git worktree list && make",
	"git checkout -q -b solo && git pull && make", // no upstream
	// Builds, tests and linters.
	"make",
	"make -j4 all",
	"make test",
	"make lint && make test",
	"./build.sh",
	"bash build.sh && make test",
	"./scripts/test.sh",
	"go build ./... && go test ./...",
	"go vet ./... && go test -race ./...",
	"gofmt -l . && go vet ./...",
	"go run ./cmd/tool --help",
	"go mod tidy && go build ./...",
	"npm install && npm run build",
	"npm ci && npm test",
	"npm run lint && npm run build",
	"pnpm install && pnpm build",
	"pnpm run test",
	"yarn && yarn build",
	"yarn test --watch=false",
	"npx eslint . && npx prettier --check .",
	"cargo build --release && cargo test",
	"cargo clippy -- -D warnings",
	"cargo fmt --check",
	"pip install -r requirements.txt && pytest -q",
	"python3 -m pytest tests/ -x",
	"python3 -m venv .venv && . .venv/bin/activate && pip install -e .",
	"ruff check . && mypy src",
	"docker compose up -d && docker compose ps",
	"docker compose build && docker compose run --rm app make test",
	"docker build -t app . && docker run --rm app",
	"docker compose down -v",
	// cd, loops, here-docs.
	"cd sub && make",
	"cd sub && make -C .. test",
	"cd scripts && ./test.sh",
	"cd \"$(git rev-parse --show-toplevel)\" && make",
	"for f in *.go; do gofmt -l \"$f\"; done",
	"for f in scripts/*.sh; do bash -n \"$f\"; done",
	"for d in sub scripts; do (cd \"$d\" && ls); done",
	"cat <<'EOF'\nnotes: rm -rf is dangerous\nEOF",
	"cat > notes.txt <<EOF\nbuild passed\nEOF",
	"mkdir -p out && tar xf kit.tar -C out && make",
	"tar xzf kit.tar.gz -C out && ./build.sh",
	"unzip -o kit.zip -d out && make test",
	"tar cf backup.tar src && make",
	"rm -rf build && make",
	"make clean && make",
	"find . -name '*.o' -delete && make",
	"grep -rn TODO src | head",
	"git grep -n 'rm -rf' && make",
	"echo 'git reset --hard is dangerous' && make",
}

type everydayDeny struct {
	cmd  string
	code string
	real bool // run it for real to show the harm
}

// everydayDenied are run in "bad", whose other versions are destructive.
var everydayDenied = []everydayDeny{
	// A branch holds a destructive build.sh or Makefile.
	{"git checkout evil && ./build.sh", CodeDestructive, true},
	{"git checkout evil && make", CodeGit, true},
	{"git checkout evil && bash build.sh", CodeDestructive, true},
	{"git switch evil && ./build.sh", CodeDestructive, true},
	{"git checkout -q evil; ./build.sh", CodeDestructive, true},
	{"git checkout -b topic evil && ./build.sh", CodeDestructive, true},
	{"git switch -c topic evil && make", CodeGit, true},
	{"git checkout evil -- build.sh && ./build.sh", CodeDestructive, true},
	{"git restore --source evil build.sh && ./build.sh", CodeDestructive, true},
	{"git restore -s evil -- Makefile && make", CodeGit, true},
	{"git checkout evil && npm run build", CodeDestructive, true},
	{"cd sub && git checkout evil && cd .. && ./build.sh", CodeDestructive, true},
	{"git -C sub checkout evil && ./build.sh", CodeDestructive, true},
	{"git checkout evil && cd sub && bash ../build.sh", CodeDestructive, false},
	{"git branch x evil && git checkout x && ./build.sh", CodeDestructive, true},
	{"git checkout -b x evil && git checkout main && git checkout x && make", CodeGit, true},
	{"git reset --keep evil && ./build.sh", CodeDestructive, false},
	{"git checkout -q evil; git checkout -q main; ./build.sh", CodeDestructive, false},
	// A file only the other version holds.
	{"git checkout evilnew && bash run.sh", CodeDestructive, true},
	{"git checkout evilnew && make -f new.mk", CodeDestructive, true},
	// Versions the guard cannot read.
	{"git checkout linky && ./build.sh", CodeBlind, false},
	{"git checkout big && ./build.sh", CodeBlind, false},
	{"git checkout nosuch && ./build.sh", CodeBlind, false},
	{"git checkout \"$(cat ref.txt)\" && ./build.sh", CodeGit, false}, // could be "."
	// The stash, the upstream and merged branches.
	{"git stash pop && ./build.sh", CodeDestructive, true},
	{"git stash apply 0 && sh build.sh", CodeDestructive, false},
	{"git pull && ./build.sh", CodeDestructive, false},
	{"git merge origin/main && ./build.sh", CodeDestructive, true},
	{"git fetch && git merge origin/main && ./build.sh", CodeDestructive, false},
	{"git rebase origin/main && ./build.sh", CodeDestructive, false},
	{"git cherry-pick evil && ./build.sh", CodeDestructive, false},
	{"git merge evil && make", CodeGit, false},
	// Unknown writers stay blind.
	{"tar xf kit.tar && ./build.sh", CodeBlind, false},
	{"tar -xPf kit.tar -C out && ./build.sh", CodeBlind, false},
	{"tar -xf kit.tar -C out -C .. && ./build.sh", CodeBlind, false},
	{"7z x kit.7z -oout && ./build.sh", CodeBlind, false},
	{"cpio -id < kit.cpio && ./build.sh", CodeBlind, false},
	{"patch -p1 < fix.diff && ./build.sh", CodeBlind, false},
	{"git clone -q ../origin.git c2 && cd c2 && ./build.sh", CodeBlind, false},
	{"git worktree add ../w evil && cd ../w && ./build.sh", CodeBlind, false},
	{"git co evil && ./build.sh", CodeBlind, false},
	{"git --work-tree=/tmp checkout evil && ./build.sh", CodeBlind, false},
	{"git bisect start evil main && ./build.sh", CodeBlind, false},
}

const (
	goodMakefile = ".PHONY: all test lint build\nall build:\n\t@echo built\ntest:\n\t@echo tested\nlint:\n\t@echo linted\n"
	goodBuild    = "#!/bin/sh\necho building\n"
	goodPackage  = `{"name":"x","scripts":{"build":"echo build","test":"echo test","lint":"echo lint"}}`
)

// setupEveryday makes two repositories under root, "good" and "bad",
// each with an origin, a feature branch, an upstream commit fetched and a
// stash; in "bad" the other versions of build.sh and the Makefile are
// destructive.
func setupEveryday(t testing.TB, root string) {
	t.Helper()
	home := filepath.Join(root, "home")
	os.MkdirAll(home, 0o755)
	sh := func(dir, script string) {
		t.Helper()
		cmd := exec.Command("bash", "-ec", script)
		cmd.Dir = dir
		cmd.Env = gitEnv(home)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("setup %q: %v\n%s", script, err, out)
		}
	}
	write := func(dir string, files map[string]string) {
		t.Helper()
		for name, body := range files {
			p := filepath.Join(dir, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"good", "bad"} {
		dir := filepath.Join(root, name)
		os.MkdirAll(dir, 0o755)
		sh(dir, "git init -q --bare -b main origin.git && git init -q -b main repo")
		repo := filepath.Join(dir, "repo")
		write(repo, map[string]string{"Makefile": goodMakefile, "build.sh": goodBuild, "package.json": goodPackage,
			"scripts/test.sh": "#!/bin/sh\necho test\n", "sub/Makefile": "all:\n\t@echo sub\n", "main.go": "package main\n",
			"ref.txt": "evil\n"})
		sh(repo, `git add -A && git commit -qm c1 && git remote add origin ../origin.git && git push -q -u origin main
git branch feature && git tag v1`)
		evil, bad := goodBuild, goodMakefile
		if name == "bad" {
			evil, bad = "#!/bin/sh\nrm -rf .git\n", "all:\n\tgit reset --hard\n"
		}
		// The feature (or evil) branch.
		branch := "feature"
		if name == "bad" {
			branch = "evil"
			sh(repo, "git branch evil")
		}
		sh(repo, "git checkout -q "+branch)
		write(repo, map[string]string{"build.sh": strings.Replace(evil, "building", "building feature", 1), "Makefile": bad,
			"package.json": strings.Replace(goodPackage, `"build":"echo build"`, `"build":"`+map[bool]string{true: "rm -rf .git", false: "echo feature"}[name == "bad"]+`"`, 1)})
		sh(repo, "git commit -qam f && git checkout -q main")
		// The upstream moves on.
		sh(dir, "git clone -q origin.git other")
		write(filepath.Join(dir, "other"), map[string]string{"build.sh": strings.Replace(evil, "building", "building upstream", 1)})
		sh(filepath.Join(dir, "other"), "git commit -qam up && git push -q origin main")
		sh(repo, "git fetch -q origin")
		// A stash.
		write(repo, map[string]string{"build.sh": strings.Replace(evil, "building", "building stashed", 1)})
		sh(repo, "git stash -q")
		if name == "bad" {
			sh(repo, `git checkout -q -b evilnew main
printf 'rm -rf .git\n' > run.sh && printf 'all:\n\trm -rf .git\n' > new.mk && git add run.sh new.mk && git commit -qm n
git checkout -q -b linky main && ln -sf /tmp/evil-outside.sh build.sh && git add build.sh && git commit -qm l
git checkout -q -b big main && head -c 70000 /dev/zero | tr '\0' '#' > build.sh && git commit -qam b
git checkout -q main && git config alias.co checkout`)
		}
		write(repo, map[string]string{"kit.tar": "", "fix.diff": ""})
	}
}

func everydayRequest(repo, cmd string) Request {
	// The hook's request: tool, input and the call's cwd; the project is
	// the repository holding it.
	return Request{Mode: ModeDev, Tool: "Bash", Input: map[string]any{"command": cmd}, Cwd: repo}
}

func TestEverydayCommands(t *testing.T) {
	if len(everydayAllowed) < 60 {
		t.Fatalf("the table has %d everyday commands, want at least 60", len(everydayAllowed))
	}
	root := t.TempDir()
	setupEveryday(t, root)
	good, bad := filepath.Join(root, "good", "repo"), filepath.Join(root, "bad", "repo")
	for _, c := range everydayAllowed {
		if d := Check(everydayRequest(good, c)); d.Deny {
			t.Errorf("denied, want allowed: %q\n\t%s", c, d.Reason)
		}
	}
	for _, c := range everydayDenied {
		if d := Check(everydayRequest(bad, c.cmd)); d.Code != c.code {
			t.Errorf("%q: got %q (%s), want %q", c.cmd, d.Code, d.Reason, c.code)
		}
	}
}

// TestEverydayDeniedForReal runs the denied commands marked real in a copy
// of "bad" and checks that they destroy work.
func TestEverydayDeniedForReal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bash and git in copies of a repository: full lane, not with -short")
	}
	template := t.TempDir()
	setupEveryday(t, template)
	for _, c := range everydayDenied {
		if !c.real {
			continue
		}
		t.Run(c.cmd, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if out, err := exec.Command("cp", "-a", template+"/.", root).CombinedOutput(); err != nil {
				t.Fatalf("copy: %v\n%s", err, out)
			}
			repo := filepath.Join(root, "bad", "repo")
			head := func() string {
				out, _ := exec.Command("git", "-C", repo, "rev-parse", "--git-dir").CombinedOutput()
				return string(out)
			}
			// The harm: .git gone, or a work tree reset (the stash
			// popped and then reset counts: build.sh changed back).
			os.WriteFile(filepath.Join(repo, "work.txt"), []byte("uncommitted\n"), 0o644)
			exec.Command("git", "-C", repo, "add", "work.txt").Run()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", c.cmd)
			cmd.Dir = repo
			cmd.Env = gitEnv(filepath.Join(root, "home"))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			_ = cmd.Run()
			_, statErr := os.Stat(filepath.Join(repo, ".git"))
			_, workErr := os.Stat(filepath.Join(repo, "work.txt"))
			if statErr == nil && workErr == nil {
				t.Fatalf("the command left .git and the staged work (git: %s; output %q)", head(), out.String())
			}
		})
	}
}
