package guard

import (
	"strings"
	"testing"
)

// FuzzCheck feeds arbitrary commands and paths to the guard's entry
// point: it must never panic (a fault would show as GUARD_ERROR) and
// always return a decision whose reason starts with its code.
func FuzzCheck(f *testing.F) {
	for _, c := range append(append([]string{}, deniedCommands...), allowedCommands...) {
		f.Add("Bash", c)
	}
	f.Add("Read", "tests/hidden/%2e%2e/x")
	f.Add("Glob", "**/{a,b}/[!x]*")
	f.Add("Bash", "eval \"$(echo $'\\x67')\" ${x:-${y:-$(z)}}")
	f.Add("Bash", "ln -sfn .git g && ln -sr g/../g h; rm -rf h/objects g/")
	f.Add("Bash", "echo 'rm -rf .git' > x.sh; PATH=.:$PATH x.sh; . ./x.sh; bash < x.sh")
	f.Add("Bash", "declare -n r=x; find -L /etc -maxdepth 0 -follow -delete; sh -c '$0 x' /bin/true")
	f.Add("Bash", "git branch x v && git -C . checkout -b y x -- && git stash pop 1; git pull o +a:b && make -f m; ./b.sh")
	f.Fuzz(func(t *testing.T, tool, arg string) {
		key := "command"
		if tool != "Bash" {
			key = "file_path"
		}
		d := Check(Request{Mode: ModeDev, Tool: tool, Input: map[string]any{key: arg, "pattern": arg, "glob": arg},
			Cwd: "/work/proj", ProjectDir: "/work/proj", Home: "/home/u"})
		if d.Code == CodeGuardError {
			t.Fatalf("guard fault on %s %q: %s", tool, arg, d.Reason)
		}
		if d.Deny != (d.Code != "") || (d.Deny && !strings.HasPrefix(d.Reason, d.Code+": ")) {
			t.Fatalf("inconsistent decision for %s %q: %+v", tool, arg, d)
		}
	})
}
