//go:build unix

package guard

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The file-system table: commands and tool calls whose decision depends on
// what is on disk — symlinks (existing ones and those the command makes)
// and script files (existing ones and those the command writes). They are
// checked in a repository made by setupRepoFS, and the denied ones marked
// real are run there with bash and git to show that they do harm.

type fsCase struct {
	cmd  string
	code string // "" = allowed
	real bool   // run it for real (it stays inside the repository)
}

var fsCommands = []fsCase{
	// Symlinks already on disk: gl -> .git, hid -> tests/hidden, up -> ..
	{"rm -rf gl/objects", CodeDestructive, true},
	{"cd gl && rm -rf refs", CodeDestructive, true},
	{"rm -rf gl/", CodeDestructive, true},
	{"rm -rf gl/*", CodeDestructive, true},
	{"rm -rf gl/.", CodeDestructive, false}, // GNU rm refuses "."
	{"echo x > gl/HEAD", CodeDestructive, true},
	{"printf '' > gl/config", CodeDestructive, true},
	{"truncate -s 0 gl/index", CodeDestructive, true},
	{"sed -i s/main/x/ gl/HEAD", CodeDestructive, true},
	{"chmod -R 000 gl/", CodeDestructive, true},
	{"mv gl/objects ../moved", CodeDestructive, true},
	{"find gl/ -delete", CodeDestructive, true},
	{"cat hid/a.txt", CodeAntiCheat, true},
	{"cd hid && cat a.txt", CodeAntiCheat, true},
	{"cp hid/a.txt /dev/stdout", CodeAntiCheat, true},
	{"rm -rf up/repo", CodeDestructive, true},
	{"rm -rf rootlink/", CodeDestructive, false},
	{"rm -rf rootlink/*", CodeDestructive, false},
	{"rm -rf homelink/", CodeDestructive, false},
	// Links the command makes itself.
	{"ln -s .git g && rm -rf g/objects", CodeDestructive, true},
	{"ln -s .git g; rm -rf g/", CodeDestructive, true},
	{"ln -sf / r; rm -rf r/", CodeDestructive, false},
	{"ln -sf / r; rm -rf r/*", CodeDestructive, false},
	{"ln -sfn ~ h && rm -rf h/", CodeDestructive, false},
	{"ln -s tests/hidden h && cat h/a.txt", CodeAntiCheat, true},
	{"ln -s tests t2 && cat t2/hidden/a.txt", CodeAntiCheat, true},
	{"ln -s .git/config c && echo '[core' > c", CodeDestructive, true},
	{"ln .git/config c && echo x >> c", CodeDestructive, true},
	{"mkdir d && ln -s ../.git d/g && rm -rf d/g/objects", CodeDestructive, true},
	{"mkdir d && ln -s ../.git d && rm -rf d/.git/objects", CodeDestructive, true},
	{"mkdir e && ln -s ../.git e && cd e && rm -rf .git/refs", CodeDestructive, true},
	{"ln -s \"$PWD/.git\" /tmp/x$$ && rm -rf /tmp/x$$/objects", CodeBlind, false},
	{"D=$(mktemp -d); ln -s \"$PWD\" $D/p && rm -rf $D/p/", CodeBlind, false},
	{"ln -s \"$PWD/src\" /tmp/s$$ && ls /tmp/s$$", "", false},
	{"ln -s . self && rm -rf self/", CodeDestructive, true},
	{"ln -s .. up2 && rm -rf up2/repo", CodeDestructive, true},
	{"sh -c 'ln -s .git x; rm -rf x/hooks'", CodeDestructive, true},
	{"ln -s .git g && find g/ -delete", CodeDestructive, true},
	{"ln -s .git g && chmod -R 000 g/", CodeDestructive, true},
	{"ln -sfn .git g && truncate -s 0 g/index", CodeDestructive, true},
	{"ln --sym .git g && cd g && rm -rf objects", CodeDestructive, true},
	{"L=.git; ln -s $L g; rm -rf g/refs", CodeDestructive, true},
	{"ln -s .git g && mv g/objects ../moved", CodeDestructive, true},
	{"mkdir -p a/b && ln -s ../../.git a/b/l && rm -rf a/b/l/refs", CodeDestructive, true},
	{"ln -s .git g && ln -s g g2 && rm -rf g2/objects", CodeDestructive, true},
	// Script files on disk.
	{"bash scripts/evil.sh", CodeDestructive, true},
	{"sh ./scripts/evil.sh", CodeDestructive, true},
	{"bash -e scripts/evil.sh", CodeDestructive, true},
	{"bash -x -- scripts/evil.sh", CodeDestructive, true},
	{"source scripts/evil.sh", CodeDestructive, true},
	{". scripts/evil.sh", CodeDestructive, true},
	{"./scripts/evil.sh", CodeDestructive, true},
	{"scripts/evil.sh", CodeDestructive, true},
	{"exec bash scripts/evil.sh", CodeDestructive, true},
	{"env bash scripts/evil.sh", CodeDestructive, true},
	{"nohup ./scripts/evil.sh", CodeDestructive, true},
	{"F=scripts/evil.sh; bash $F", CodeDestructive, true},
	{"bash < scripts/evil.sh", CodeDestructive, true},
	{"cat scripts/evil.sh | bash", CodeBlind, true},
	{"find scripts -name evil.sh -exec bash {} \\;", CodeDestructive, true},
	{"./scripts/reset", CodeGit, true},
	{"scripts/envsh", CodeGit, true},
	{"bash scripts/nested.sh", CodeDestructive, true},
	{"source scripts/lib.sh; wipe", CodeDestructive, true},
	{"bash scripts/cat-hidden.sh", CodeAntiCheat, true},
	{"bash scripts/args.sh .git", CodeDestructive, true},
	{"bash scripts/big.sh", CodeBlind, false},
	{"bash scripts/fifo", CodeBlind, false},
	{"source scripts/fifo", CodeBlind, false},
	{"./hidlink.sh", CodeDestructive, true},
	// Scripts the command writes before it runs them.
	{"echo 'rm -rf .git' > x.sh; bash x.sh", CodeBlind, true},
	{"echo 'rm -rf .git' > x.sh && . ./x.sh", CodeBlind, true},
	{"printf '#!/bin/sh\\ngit reset --hard\\n' > y && chmod +x y && ./y", CodeBlind, true},
	{"cat > z.sh <<'EOF'\nrm -rf .git\nEOF\nsh z.sh", CodeBlind, true},
	{"python3 -c \"open('w.sh','w').write('rm -rf .git')\"; bash w.sh", CodeBlind, true},
	{"cp scripts/evil.sh ok2.sh && bash ok2.sh", CodeBlind, true},
	{"echo 'git clean -fdx' | tee t.sh >/dev/null; sh t.sh", CodeBlind, true},
	{"echo 'rm -rf .git' > scripts/ok.sh; bash scripts/ok.sh", CodeBlind, true},
	{"echo 'rm -rf .git' >> scripts/ok.sh; ./scripts/ok.sh", CodeBlind, true},
	{"ln -sf evil.sh scripts/ok.sh; bash scripts/ok.sh", CodeBlind, true},
	{"S=q.sh; echo 'rm -rf .git' > $S; bash $S", CodeBlind, true},
	{"echo 'rm -rf .git' > x.sh; bash < x.sh", CodeBlind, true},
	{"sed -i 's/echo ok/rm -rf .git/' scripts/ok.sh && bash scripts/ok.sh", CodeBlind, true},
	{"git show HEAD:a.txt > a.sh; bash a.sh", CodeBlind, false},
	{"f() { echo 'rm -rf .git' > x.sh; }; f; bash x.sh", CodeBlind, true},
	{"bash $(mktemp)", CodeBlind, false},

	// More spellings of links and scripts.
	{"ln -sr .git g && rm -rf g/objects", CodeDestructive, true},
	{"mkdir d && ln -sr .git d/g && rm -rf d/g/refs", CodeDestructive, true},
	{"ln -s \"$(pwd)/.git\" g && rm -rf g/objects", CodeDestructive, true},
	{"ln -s $PWD/.git g; rm -rf g/hooks", CodeDestructive, true},
	{"ln -s .git g && find -L g -delete", CodeDestructive, true},
	{"find -L gl -delete", CodeDestructive, true},
	{"ln -s .git g && rsync -a --delete src/ g/", CodeDestructive, false}, // no rsync here
	{"ln -s .git g && cp a.txt g/HEAD", CodeDestructive, true},
	{"ln -s .git g && tee g/config < a.txt", CodeDestructive, true},
	{"ln -s .git g; dd if=/dev/zero of=g/index bs=1 count=8", CodeDestructive, true},
	{"ln -s / r && rm -rf r/home", CodeDestructive, false},
	{"command . scripts/evil.sh", CodeDestructive, true},
	{"builtin source scripts/evil.sh", CodeDestructive, true},
	{"xargs bash <<< scripts/evil.sh", CodeDestructive, true},
	{"echo scripts/evil.sh | xargs sh", CodeDestructive, true},
	{"bash -- scripts/evil.sh", CodeDestructive, true},
	{"sh -c 'bash scripts/evil.sh'", CodeDestructive, true},
	{"eval 'source scripts/evil.sh'", CodeDestructive, true},
	{"bash scripts/args.sh \"$(echo .git)\"", CodeDestructive, true},
	{"bash scripts/../scripts/evil.sh", CodeDestructive, true},
	{"ln -s scripts/evil.sh run.sh && bash run.sh", CodeBlind, true},
	{"PATH=$PWD/scripts:$PATH evil.sh", CodeDestructive, true},
	{"PATH=scripts:$PATH; reset", CodeGit, true},
	{"export PATH=\"$PWD/scripts:$PATH\"; envsh", CodeGit, true},
	{"env PATH=./scripts:/usr/bin:/bin evil.sh", CodeDestructive, true},
	{"$SHELL scripts/evil.sh", CodeBlind, false},
	{"BASH_ENV=scripts/evil.sh bash -c true", CodeDestructive, true},
	{"export BASH_ENV=scripts/evil.sh; bash -c 'echo hi'", CodeDestructive, true},
	{"bash --rcfile scripts/evil.sh -ic true", CodeDestructive, true},
	{"sh -s < scripts/evil.sh", CodeDestructive, true},
	{"mv scripts/evil.sh r.sh; bash r.sh", CodeBlind, true},
	{"install -m755 scripts/evil.sh r.sh && ./r.sh", CodeBlind, true},
	{"bash -c '. scripts/evil.sh'", CodeDestructive, true},
	{"(source scripts/lib.sh && wipe)", CodeDestructive, true},
	{"ln -s .git/objects o; rm -rf o/", CodeDestructive, true},
	{"ln -s .git g && unlink g/HEAD", CodeDestructive, true},
	{"ln -s .git g; echo 'exit 0' > g/hooks/pre-commit", CodeDestructive, true},
	{"busybox sh scripts/evil.sh", CodeDestructive, false},
	{"echo \"import shutil; shutil.rmtree('.git')\" > e.py; python3 e.py", CodeBlind, true},
	{"printf 'require(\"fs\").rmSync(\".git\",{recursive:true})' > e.js && node e.js", CodeBlind, true},
	{"declare -n r=x; x=.git; rm -rf $r", CodeDestructive, true},

	// Links to places the guard learns only at run time, and a working
	// directory it cannot know.
	{"ln -s .git g && rm -rf g/*", CodeDestructive, true},
	{"ln -s \"$(git rev-parse --git-dir)\" g && rm -rf g/objects", CodeDestructive, true},
	{"ln -s \"$(cat list.txt)\" g && rm -rf g/objects", CodeDestructive, true},
	{"ln -s \"$(cat list.txt)\" g && echo x > g/HEAD", CodeDestructive, true},
	{"cd \"$(git rev-parse --git-dir)\" && rm -rf objects", CodeDestructive, true},
	{"cd \"$(git rev-parse --absolute-git-dir)\" && rm -rf refs", CodeDestructive, true},
	{"cd \"$(readlink -f gl)\" && rm -rf hooks", CodeDestructive, true},
	{"cd $(realpath gl) && rm -rf logs", CodeDestructive, true},
	{"cd \"$(cat list.txt)\" && rm -rf objects", CodeDestructive, true},
	{"rm -rf \"$(readlink -f gl)\"", CodeDestructive, true},
	{"bash scripts/self.sh", CodeDestructive, true},
	// package.json scripts.
	{"npm run nuke", CodeDestructive, true},
	{"npm test", CodeGit, true},
	{"yarn nuke", CodeDestructive, false},
	{"pnpm run nuke -- --x", CodeDestructive, false},
	{"npm run leak", CodeAntiCheat, true},
	{"cd scripts && npm test", CodeBlind, false}, // scripts/package.json is a FIFO

	// Links made by cp, scripts read from file descriptors.
	{"cp -rs \"$PWD/.git\" g && echo x > g/HEAD", CodeDestructive, true},
	{"cp -al .git g && echo x > g/HEAD", CodeDestructive, true},
	{"exec 3< scripts/evil.sh; bash <&3", CodeBlind, true},
	{"exec 3< scripts/evil.sh; bash /dev/fd/3", CodeBlind, true},
	{"bash /proc/self/fd/0 < scripts/evil.sh", CodeBlind, true},

	// Recursive searches over a hidden-test directory, as the Grep tool.
	{"grep -r SECRET tests/", CodeAntiCheat, true},
	{"grep -Rn SECRET tests", CodeAntiCheat, true},
	{"grep -e SECRET -r tests", CodeAntiCheat, true},
	{"grep --recursive SECRET test", CodeAntiCheat, true},
	{"cd tests && grep -r SECRET .", CodeAntiCheat, true},
	{"ln -s tests tt && grep -r SECRET tt/", CodeAntiCheat, true},
	{"rg SECRET tests", CodeAntiCheat, false},

	// Hard links into .git made by an earlier call (hl-config, hl-hook):
	// writing through them changes the repository.
	{"echo x > hl-config", CodeDestructive, true},
	{"echo x >> hl-config", CodeDestructive, true},
	{"echo 'exit 0' > hl-hook", CodeDestructive, true},
	{"truncate -s 0 hl-config", CodeDestructive, true},
	{"cp a.txt hl-config", CodeDestructive, true},
	{"tee hl-hook < a.txt", CodeDestructive, true},
	{"dd if=a.txt of=hl-config", CodeDestructive, true},
	{"sed -n 'w hl-config' a.txt", CodeDestructive, true},
	{"cat a.txt >| hl-hook", CodeDestructive, true},
	{"ln -s hl-config c2 && echo x > c2", CodeDestructive, true},
	{"cd src && echo x > ../hl-config", CodeDestructive, true},
	{"cp conf/config hd/", CodeDestructive, true},
	{"cp -t hd conf/config", CodeDestructive, true},
	{"python3 -c \"open('hl-config', 'w').write('x')\"", CodeDestructive, true},
	{"node -e \"require('fs').writeFileSync('hl-hook', 'exit 0')\"", CodeDestructive, true},

	// make: the recipes of the targets that would run.
	{"make nuke", CodeDestructive, true},
	{"gmake nuke", CodeDestructive, true},
	{"make -k -j4 nuke", CodeDestructive, true},
	{"make -f Makefile nuke", CodeDestructive, true},
	{"make reset", CodeGit, true},
	{"make -n reset", CodeGit, true}, // + lines run under -n
	{"make deep", CodeDestructive, true},
	{"make --directory=sub wipe", CodeDestructive, true},
	{"make -Csub", CodeDestructive, true},
	{"make -C mk", CodeGit, true},
	{"make pat", CodeDestructive, true},
	{"make long", CodeDestructive, true},
	{"make clean BUILD=.git", CodeDestructive, true},
	{"TOOL=git make blindcmd", CodeGit, true},
	{"MAKEFLAGS=BUILD=.git make clean", CodeDestructive, true},
	{"export MAKEFLAGS=BUILD=.git; make clean", CodeDestructive, true},
	{"MAKEFLAGS=s make nuke", CodeDestructive, true},
	{"BUILD=.git make -e clean", CodeDestructive, true},
	{"MAKEFILES=mk/inc.mk make", CodeBlind, false},
	{"make blindcmd", CodeBlind, false},
	{"make -f mk/shell.mk", CodeDestructive, true},
	{"make -f mk/oneshell.mk", CodeDestructive, true},
	{"make -f mk/inc2.mk", CodeDestructive, true},
	{"make -f mk/inc3.mk", CodeBlind, false},
	{"make -f mk/remake.mk", CodeDestructive, false},
	{"sh -c 'make nuke'", CodeDestructive, true},
	{"printf 'x:\\n\\trm -rf .git\\n' > mk/new.mk && make -f mk/new.mk", CodeBlind, true},
	{"make -f mk/ok.mk clean OUT=.", CodeDestructive, false},
	{"make -E 'x: ; rm -rf .git' x", CodeBlind, false},
	{"cd \"$(cat list.txt)\" && make", CodeBlind, false},
	{"make -f - <<'EOF'\nx:\n\trm -rf .git\nEOF", CodeDestructive, true},

	// The narrowed "named by an earlier writer" rule still denies these.
	{"touch x.sh && echo 'rm -rf .git' >> x.sh && bash x.sh", CodeBlind, true},
	{"touch scripts/evil.sh && bash scripts/evil.sh", CodeDestructive, true},
	{"sed -n 'w scripts/ok.sh' scripts/evil.sh; bash scripts/ok.sh", CodeBlind, true},
	{"cp scripts/evil.sh scripts/ok.sh && bash scripts/ok.sh", CodeBlind, true},
	{"mkdir d && cp scripts/evil.sh d && bash d/evil.sh", CodeBlind, true},
	{"mkdir d && cp -t d scripts/evil.sh && sh d/evil.sh", CodeBlind, true},
	{"mkdir d && mv scripts/evil.sh d/ && bash d/evil.sh", CodeBlind, true},
	{"python3 scripts/mk.py && bash scripts/ok.sh", CodeBlind, true},
	{"python3 scripts/mk.py scripts/ok.sh && bash scripts/ok.sh", CodeBlind, true},
	{"dos2unix scripts/ok.sh && bash scripts/ok.sh", CodeBlind, false},
	// Files written without being named: extractors, git, copied trees.
	{"tar xf kit.tar && bash run.sh", CodeBlind, true},
	{"mkdir d && tar -xf kit.tar -C d && sh d/run.sh", CodeBlind, true},
	{"mkdir d && cp -r scripts d && bash d/scripts/evil.sh", CodeBlind, true},
	{"mkdir d && mv scripts d/ && bash d/scripts/evil.sh", CodeBlind, true},
	{"unzip -o /tmp/x.zip && make", CodeBlind, false},
	// Git sets tracked files to versions the guard reads as well
	// (everyday_test.go); these scripts are untracked in every version.
	{"git checkout -q feature && bash scripts/ok.sh", "", false},
	{"git apply /tmp/p.diff && bash scripts/ok.sh", "", false},
	{"git pull && make -f mk/ok.mk", "", false},
	{"git stash pop && ./scripts/ok.sh", "", false},
	{"git worktree add ../wt feature && bash ../wt/scripts/ok.sh", CodeBlind, false},

	// Python, Perl and Node scripts already on disk.
	{"python3 scripts/evil.py", CodeDestructive, true},
	{"python3 -u scripts/evil.py", CodeDestructive, true},
	{"perl scripts/evil.pl", CodeGit, true},
	{"node js/evil.js", CodeDestructive, true},
	{"./scripts/evilx.py", CodeGit, true},
	{"scripts/evilp", CodeDestructive, true},
	{"cd scripts && python3 evil.py", CodeDestructive, false}, // rmtree('.git') from scripts/: none there
	{"python3 scripts/leak.py", CodeAntiCheat, true},
	{"python3 scripts/sub.py 'rm -rf .git'", CodeBlind, true},
	{"python3 -c \"import subprocess; subprocess.run(['cp', 'kit.tar', 'x.sh']); subprocess.run(['bash', 'x.sh'])\"", CodeBlind, false},
	{"python3 scripts/big.py", CodeBlind, false},
	{"python3 scripts/fifo", CodeBlind, false},
	{"cp scripts/evil.py e2.py && python3 e2.py", CodeBlind, true},
	{"env python3 scripts/evil.py", CodeDestructive, true},
	{"python3 -W ignore scripts/evil.py", CodeDestructive, true},
	{"python3 -m scripts.evil", CodeDestructive, true},
	{"python3 -mscripts.evil", CodeDestructive, true},
	{"node -r ./js/evil.js js/ok.js", CodeDestructive, true},
	{"node --require ./js/ok.js js/evil.js", CodeDestructive, true},
	{"find scripts -name evil.py -exec python3 {} \\;", CodeDestructive, true},

	// Benign near-misses.
	{"rm hl-config", "", false},
	{"rm -f hl-config hl-hook", "", false},
	{"unlink hl-hook", "", false},
	{"mv a.txt hl-config", "", false},
	{"sed -i s/x/y/ hl-config", "", false},
	{"cat hl-config", "", false},
	{"echo x > hl-src", "", false},
	{"cp a.txt hl-src", "", false},
	{"cp conf/config src/", "", false},
	{"cp a.txt hd/", "", false},
	{"grep -rn SECRET src", "", false},
	{"grep SECRET tests/unit.txt", "", false},
	{"grep -r 'rm -rf' docs", "", false},
	{"rm gl", "", false},
	{"rm -f srclink", "", false},
	{"unlink gl", "", false},
	{"ls gl/", "", false},
	{"cat gl/HEAD", "", false},
	{"cat srclink/x.go", "", false},
	{"ln -s build b && rm -rf b/", "", false},
	{"ln -s src s2 && cat s2/x.go", "", false},
	{"ln -sf ../shared/config config", "", false},
	{"ln -s .git g && ls g/", "", false},
	{"bash scripts/ok.sh", "", false},
	{"./scripts/ok.sh", "", false},
	{"sh scripts/ok.sh arg", "", false},
	{"bash scripts/args.sh build", "", false},
	{"./scripts/tool.py", "", false},
	{"bash scripts/missing.sh", "", false},
	{"bash -n scripts/evil.sh", "", false},
	{"shellcheck scripts/evil.sh", "", false},
	{"cat scripts/evil.sh", "", false},
	{"chmod +x scripts/ok.sh && ./scripts/ok.sh", "", false},
	{"cat scripts/ok.sh; bash scripts/ok.sh", "", false},
	{"git add scripts/ok.sh && bash scripts/ok.sh", "", false},
	{"echo hi > out.txt; bash scripts/ok.sh", "", false},
	{"for f in scripts/ok.sh; do bash \"$f\"; done", "", false},
	{"source .venv/bin/activate && python -V", "", false},
	{". .venv/bin/activate; deactivate", "", false},
	{"python3 -m venv .venv2 && . .venv2/bin/activate", "", false},
	{"echo 'echo hi' > x.txt; bash scripts/ok.sh", "", false},
	{"source scripts/lib.sh", "", false},
	{"./bin/tool --version", "", false},
	{"rm -rf .venv && python3 -m venv .venv", "", false},
	{"python3 scripts/tool.py", "", false},
	{"python3 scripts/ok.py", "", false},
	{"python3 scripts/gotest.py", "", false},
	{"python3 -c \"import subprocess; subprocess.run(['go', 'vet', './...'])\"", "", false},
	{"touch scripts/ok.sh && bash scripts/ok.sh", "", false},
	{"tar tf kit.tar && bash scripts/ok.sh", "", false},
	{"git stash list && bash scripts/ok.sh", "", false},
	{"git status && make -f mk/ok.mk", "", false},
	{"sed -n 1p scripts/ok.sh && bash scripts/ok.sh", "", false},
	{"cp scripts/ok.sh /tmp/ok.sh.bak && bash scripts/ok.sh", "", false},
	{"cp scripts/ok.py scripts/ok2.py && python3 scripts/ok.py", "", false},
	{"python3 scripts/ok.py && python3 scripts/ok.py", "", false},
	{"node js/ok.js; node js/ok.js", "", false},
	{"perl scripts/ok.pl && perl scripts/ok.pl", "", false},
	{"make -f mk/ok.mk && make -f mk/ok.mk", "", false},
	{"make", "", false},
	{"make all", "", false},
	{"make clean", "", false},
	{"make blindok", "", false},
	{"make -n nuke", "", false},
	{"make -n deep", "", false},
	{"make -C sub safe", "", false},
	{"make -f mk/ok.mk", "", false},
	{"make -f mk/ok.mk clean", "", false},
	{"make -C src", "", false},
	{"make -C mk -n", "", false},
	{"make -f mk/inc.mk", "", false}, // other.mk is missing: make stops
	{"make -f mk/inc4.mk", "", false},
	{"BUILD=.git make clean", "", false}, // the makefile's BUILD wins without -e
	{"MAKEFLAGS=n make nuke", "", false},
	{"perl scripts/ok.pl", "", false},
	{"node js/ok.js", "", false},
	{"python3 scripts/missing.py", "", false},
	{"cat scripts/evil.py", "", false},
	{"python3 -m py_compile scripts/evil.py", "", false},
	{"python3 -m venv .venv3", "", false},
	{"python3 -m scripts.ok", "", false},
	{"node -r ./js/ok.js js/ok.js", "", false},
	{"make test; python3 t.py", "", false},
	{"export PATH=$PATH:/usr/local/bin && go version", "", false},
	{"PATH=$PWD/scripts:$PATH ok.sh", "", false},
	{"find -L src -name '*.o' -delete", "", false},
	{"ln -sr src/x.go x.go && cat x.go", "", false},
	{"echo 'print(1)' > t.py && cat t.py", "", false},
	{"BASH_ENV=scripts/ok.sh bash -c true", "", false},
	{"bash --norc scripts/ok.sh", "", false},
	{"cp -rs \"$PWD/src\" s3 && echo x > s3/y.go", "", false},
	{"exec 3< a.txt; cat <&3", "", false},
	{"npm run build", "", false},
	{"npm install && npm run build", "", false},
	{"yarn install", "", false},
	{"cd \"$(git rev-parse --show-toplevel)\" && rm -rf build", "", false},
	{"cd \"$(mktemp -d)\" && rm -rf out", "", false},
	{"ln -s \"$(cat list.txt)\" g && ls g/", "", false},
}

// setupRepoFS makes the repository of setupRepo with symlinks and script
// files added, and returns the root holding it.
func setupRepoFS(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	setupRepoFSAt(t, root)
	return root
}

func setupRepoFSAt(t testing.TB, root string) {
	t.Helper()
	setupRepo(t, root)
	repo := filepath.Join(root, "repo")
	big := strings.Repeat("echo ok\n", maxScriptFile/8+16)
	files := map[string]string{
		"scripts/evil.sh":       "#!/bin/bash\nrm -rf .git\n",
		"scripts/reset":         "git reset --hard\n",
		"scripts/envsh":         "#!/usr/bin/env bash\ngit push --force origin main\n",
		"scripts/ok.sh":         "#!/bin/sh\necho ok\nls >/dev/null\n",
		"scripts/nested.sh":     "#!/bin/sh\nbash scripts/evil.sh\n",
		"scripts/lib.sh":        "wipe() { rm -rf .git; }\nhello() { echo hi; }\n",
		"scripts/cat-hidden.sh": "#!/bin/sh\ncat tests/hidden/a.txt\n",
		"scripts/args.sh":       "#!/bin/sh\nrm -rf \"$1\"\n",
		"scripts/tool.py":       "#!/usr/bin/env python3\nimport shutil\nprint('ok')\n",
		"scripts/big.sh":        big,
		"src/evil2.sh":          "rm -rf .git/refs\n",
		"scripts/self.sh":       "#!/bin/sh\ncd \"$(dirname \"$0\")/..\" && rm -rf .git\n",
		"package.json": `{"name":"x","scripts":{"build":"echo built","nuke":"rm -rf .git","pretest":"git reset --hard",` +
			`"test":"echo ok","leak":"cat tests/hidden/a.txt"}}`,
		"bin/tool": "\x7fELF\x00\x00binary",
		// Makefiles.
		"Makefile": "CC := cc\nRM = rm -f\nBUILD = build\nNUKE = rm -rf .git\n.PHONY: all test clean nuke deep reset prereq\n" +
			"all: build/out.o\n\t@echo built\nbuild/out.o:\n\t@echo compiling $@\ntest:\n\tgo version >/dev/null 2>&1 || true\n" +
			"clean:\n\t$(RM) -r $(BUILD)\nnuke:\n\t-@$(NUKE)\nreset: prereq\nprereq:\n\t+git reset --hard\n" +
			"deep:\n\t$(MAKE) -C sub wipe\npat: hooks.gen\n%.gen:\n\trm -rf .git/$*\n" +
			"blindcmd:\n\t$(TOOL) reset --hard\nblindok:\n\t$(TOOL) --version\nlong: \\\n  nuke\n",
		"sub/Makefile":   "wipe:\n\trm -rf ../.git/objects\nsafe:\n\techo ok\n",
		"conf/config":    "[core]\n\tbare = true\n",
		"hd/README":      "a directory holding a hard link into .git\n",
		"mk/Makefile":    "default:\n\tcd .. && git reset --hard\n",
		"mk/inc.mk":      "include other.mk\nall:\n\techo hi\n",
		"mk/evil.inc":    "nuke2:\n\trm -rf .git\n",
		"mk/inc2.mk":     "all: nuke2\ninclude mk/evil.inc\n",
		"mk/inc3.mk":     "-include $(wildcard mk/*.inc)\nall:\n\techo hi\n",
		"mk/inc4.mk":     "OUT := build\n-include mk/ok.mk\n-include mk/none.d\n",
		"mk/remake.mk":   "all:\n\techo hi\nmk/remake.mk: mk/ok.mk\n\trm -rf .git\n",
		"mk/shell.mk":    "X := $(shell rm -rf .git/refs)\nall:\n\t@echo $(X)\n",
		"mk/oneshell.mk": ".ONESHELL:\nall:\n\tcd .git\n\trm -rf hooks\n",
		"mk/ok.mk":       "OUT = build\nall: $(OUT)/a\n$(OUT)/a:\n\tmkdir -p $(OUT) && touch $@\nclean:\n\trm -rf $(OUT)\n",
		// Other interpreters' scripts (Node's outside scripts/, whose
		// package.json is a FIFO that node would block on).
		"scripts/evil.py":   "import shutil\nshutil.rmtree('.git')\n",
		"scripts/evil.pl":   "system('git reset --hard');\n",
		"js/evil.js":        "require('child_process').execSync('rm -rf .git')\n",
		"scripts/evilx.py":  "#!/usr/bin/env python3\nimport os\nos.system('git clean -fdx')\n",
		"scripts/evilp":     "#!/usr/bin/perl -w\nunlink '.git/config';\n",
		"scripts/leak.py":   "print(open('tests/hidden/a.txt').read())\n",
		"scripts/sub.py":    "import subprocess, sys\nsubprocess.run(sys.argv[1], shell=True)\n",
		"scripts/gotest.py": "import subprocess\nsubprocess.run(['go', 'vet', './...'], check=False)\n",
		"scripts/ok.py":     "import json\nprint(json.dumps({'a': 1}))\n",
		"scripts/ok.pl":     "print \"hi\\n\";\n",
		"js/ok.js":          "console.log([1, 2].map(x => x * 2))\n",
		"scripts/mk.py":     "open('scripts/ok.sh', 'w').write('rm -rf .git\\n')\n",
		"scripts/big.py":    strings.Repeat("print('ok')\n", maxScriptFile/12+16),
	}
	for name, body := range files {
		p := filepath.Join(repo, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"gl": ".git", "hid": "tests/hidden", "up": "..", "rootlink": "/", "srclink": "src",
		"homelink": filepath.Join(root, "home"), "hidlink.sh": "src/evil2.sh",
	} {
		if err := os.Symlink(target, filepath.Join(repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, fifo := range []string{"scripts/fifo", "scripts/package.json"} {
		if err := syscall.Mkfifo(filepath.Join(repo, fifo), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An archive whose run.sh deletes .git.
	var kit bytes.Buffer
	tw := tar.NewWriter(&kit)
	body := "rm -rf .git\n"
	tw.WriteHeader(&tar.Header{Name: "run.sh", Mode: 0o755, Size: int64(len(body))})
	tw.Write([]byte(body))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "kit.tar"), kit.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// Hard links made by an earlier tool call: two into .git, one not.
	for link, target := range map[string]string{"hl-config": ".git/config", "hl-hook": ".git/hooks/pre-commit",
		"hl-src": "src/x.go", "hd/config": ".git/config"} {
		if err := os.Link(filepath.Join(repo, target), filepath.Join(repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("python3", "-m", "venv", "--without-pip", filepath.Join(repo, ".venv"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
}

func fsRequest(root, cmd string) Request {
	repo := filepath.Join(root, "repo")
	return Request{Mode: ModeDev, Tool: "Bash", Input: map[string]any{"command": cmd},
		Cwd: repo, ProjectDir: repo, Home: filepath.Join(root, "home")}
}

func TestFSCommandTable(t *testing.T) {
	root := setupRepoFS(t)
	for _, c := range fsCommands {
		d := Check(fsRequest(root, c.cmd))
		if d.Code != c.code {
			t.Errorf("%q: got %q (%s), want %q", c.cmd, d.Code, d.Reason, c.code)
		}
	}
}

func TestFSToolTable(t *testing.T) {
	root := setupRepoFS(t)
	repo := filepath.Join(root, "repo")
	tests := []struct {
		tool  string
		input map[string]any
		code  string
	}{
		{"Read", map[string]any{"file_path": "hid/a.txt"}, CodeAntiCheat},
		{"Read", map[string]any{"file_path": filepath.Join(repo, "hid", "a.txt")}, CodeAntiCheat},
		{"Read", map[string]any{"file_path": "srclink/x.go"}, ""},
		{"Read", map[string]any{"file_path": "gl/config"}, ""},
		{"Write", map[string]any{"file_path": "gl/config", "content": "x"}, CodeDestructive},
		{"Write", map[string]any{"file_path": "gl/hooks/pre-commit", "content": "exit 0"}, CodeDestructive},
		{"Edit", map[string]any{"file_path": "gl/hooks/pre-commit", "old_string": "exit 1", "new_string": "exit 0"}, CodeDestructive},
		{"MultiEdit", map[string]any{"file_path": "hid/a.txt", "edits": []any{}}, CodeAntiCheat},
		{"NotebookEdit", map[string]any{"notebook_path": "gl/x.ipynb"}, CodeDestructive},
		{"Write", map[string]any{"file_path": "srclink/y.go", "content": "package x"}, ""},
		{"Grep", map[string]any{"pattern": "SECRET", "path": "hid"}, CodeAntiCheat},
		{"Grep", map[string]any{"pattern": "SECRET", "path": "srclink"}, ""},
		{"Glob", map[string]any{"pattern": "*", "path": "hid"}, CodeAntiCheat},
		{"Glob", map[string]any{"pattern": "**/*.txt", "path": "up/repo/hid"}, CodeAntiCheat},
		{"Glob", map[string]any{"pattern": "*.go", "path": "srclink"}, ""},
		{"Glob", map[string]any{"pattern": "hid/*"}, CodeAntiCheat},
		{"Glob", map[string]any{"pattern": "up/repo/hid/**"}, CodeAntiCheat},
		{"Grep", map[string]any{"pattern": "SECRET", "glob": "hid/*"}, CodeAntiCheat},
		{"Glob", map[string]any{"pattern": "srclink/*.go"}, ""},
		{"Glob", map[string]any{"pattern": "**/*.go"}, ""},
		{"Write", map[string]any{"file_path": "hl-config", "content": "x"}, CodeDestructive},
		{"Edit", map[string]any{"file_path": "hl-hook", "old_string": "exit 1", "new_string": "exit 0"}, CodeDestructive},
		{"Write", map[string]any{"file_path": filepath.Join(repo, "hl-hook"), "content": "exit 0"}, CodeDestructive},
		{"Write", map[string]any{"file_path": "hl-src", "content": "package x"}, ""},
		{"Edit", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"}, ""},
	}
	for _, tt := range tests {
		d := Check(Request{Mode: ModeDev, Tool: tt.tool, Input: tt.input, Cwd: repo, ProjectDir: repo, Home: filepath.Join(root, "home")})
		if d.Code != tt.code {
			t.Errorf("%s %v: got %q (%s), want %q", tt.tool, tt.input, d.Code, d.Reason, tt.code)
		}
	}
}

// TestFSTableForReal runs every denied command of the file-system table
// marked real in a copy of the repository, and checks that it really
// destroys work or leaks an answer file.
func TestFSTableForReal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bash and git in copies of a repository: full lane, not with -short")
	}
	template := setupRepoFS(t)
	for _, c := range fsCommands {
		if !c.real {
			continue
		}
		if c.code == "" {
			t.Fatalf("%q is allowed: only denied commands run for real", c.cmd)
		}
		t.Run(c.cmd, func(t *testing.T) {
			t.Parallel()
			repo, home := copyRepo(t, template)
			before := snapshotMap(repo, home)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", c.cmd)
			cmd.Dir = repo
			cmd.Env = gitEnv(home)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			_ = cmd.Run()
			if strings.Contains(out.String(), "SECRET-ANSWER") {
				return
			}
			// Only what existed before counts: making a link or writing a
			// script is no harm in itself.
			after := snapshotMap(repo, home)
			if strings.Contains(c.cmd, "hl-") {
				// a hard link into .git: the harm is a file under .git
				gitDir := filepath.Join(repo, ".git") + string(filepath.Separator)
				for k, v := range before {
					if strings.HasPrefix(k, gitDir) && after[k] != v {
						return
					}
				}
				t.Fatalf("the command changed nothing under .git (output %q)", out.String())
			}
			for k, v := range before {
				if after[k] != v {
					return
				}
			}
			if after["repo"] != "" {
				return
			}
			t.Fatalf("the command changed nothing that existed in the repository (output %q)", out.String())
		})
	}
}

// BenchmarkCheckOnDisk measures a command that resolves paths through
// symlinks on disk and reads a script file.
func BenchmarkCheckOnDisk(b *testing.B) {
	root := b.TempDir()
	setupRepoFSAt(b, root)
	req := fsRequest(root, "rm -f srclink/x gl/index.lock && bash scripts/ok.sh && cat hid/../README.md")
	for b.Loop() {
		if d := Check(req); d.Deny {
			b.Fatal(d.Reason)
		}
	}
}
