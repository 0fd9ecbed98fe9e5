package guard

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"time"
)

// gitVersion is a version of a repository's tracked files that an
// earlier git command of the same call may put in the work tree: a
// commit the repository holds (git checkout REF, git stash pop) or the
// index (git checkout -- FILE). A script run later under root is checked
// as it is on disk and as it is in each such version.
type gitVersion struct {
	root string // the work tree
	ref  string // a revision; ":" is the index
	// optional: a version that does not exist locally (a merge's
	// upstream not fetched yet, a stash without untracked files) leaves
	// only the disk to check; otherwise an unknown ref is blind.
	optional bool
	// dwim: "git checkout X" or "git switch X" with no branch X makes
	// one from a remote's branch X.
	dwim bool
	by   string // the command, for reasons
}

// gitEffectKind is what a git command does to the files of a work tree.
type gitEffectKind int

const (
	gitNoFiles  gitEffectKind = iota // changes no file it does not name
	gitVersions                      // sets tracked files to versions git holds
	gitUnknown                       // writes files the guard cannot know
)

// maxGitTree bounds a tree object the guard reads to find a file.
const maxGitTree = 1 << 20

// gitReadTimeout bounds one read of a version with git.
const gitReadTimeout = 2 * time.Second

// maxVersionPasses bounds the versions of the tree checked for one
// command; a command that could check out more is blind.
const maxVersionPasses = 8

// errGitSymlink is returned for a path that a version holds as a
// symbolic link (or below one): the guard cannot tell what runs.
var errGitSymlink = errors.New("a symbolic link in that version")

// gitEffect tells what the git command with args (global options
// included) does to the files of a work tree, resolved against s's cwd.
// For gitVersions it returns the versions and the work tree; for
// gitUnknown the directory under which files are written ("" for /).
func gitEffect(s *shState, args []string) (gitEffectKind, string, []gitVersion) {
	dir := ""
	i := 0
	for ; i < len(args); i++ {
		x := args[i]
		switch {
		case x == "-C" || x == "-c" || x == "--config-env" || x == "--namespace" || x == "--exec-path" || x == "--super-prefix" || x == "--attr-source":
			if x == "-C" && i+1 < len(args) {
				dir = path.Join(dir, args[i+1])
			}
			i++
			continue
		case x == "--git-dir" || x == "--work-tree" || strings.HasPrefix(x, "--git-dir=") || strings.HasPrefix(x, "--work-tree="):
			// another repository or work tree: where its files go is
			// not the cwd's repository
			return gitUnknown, "", nil
		case strings.HasPrefix(x, "-"):
			continue
		}
		break
	}
	if i >= len(args) {
		return gitNoFiles, "", nil
	}
	sub, rest := args[i], args[i+1:]
	root := gitRoot(s, args)
	by := strings.TrimSpace("git " + sub + " " + clip(printable(strings.Join(rest, " "))))
	if isUnknown(sub) {
		return gitUnknown, root, nil
	}
	before, dashdash := rest, false
	for j, x := range rest {
		if x == "--" {
			before, dashdash = rest[:j], true
			break
		}
	}
	g := parseGitArgs(sub, before)
	var vs []gitVersion
	add := func(ref string, optional, dwim bool) {
		if isUnknown(ref) || strings.HasPrefix(ref, "-") {
			ref, optional = unknown, false
		}
		vs = append(vs, gitVersion{root: root, ref: ref, optional: optional, dwim: dwim, by: by})
	}
	versions := func() (gitEffectKind, string, []gitVersion) {
		if root == "" {
			return gitUnknown, "", nil
		}
		if len(vs) == 0 {
			return gitNoFiles, "", nil
		}
		return gitVersions, root, vs
	}
	switch sub {
	case "checkout":
		if g.has("patch") {
			return gitNoFiles, "", nil // interactive: asks before each hunk
		}
		start := ""
		for _, k := range []string{"-b", "-B", "orphan"} {
			if _, ok := g.opts[k]; ok {
				start = "new"
			}
		}
		switch {
		case len(g.ops) == 0 && dashdash:
			add(":", false, false) // git checkout -- FILE: the index
		case len(g.ops) == 0:
			if g.has("force", "merge") {
				add("HEAD", false, false)
			}
		case len(g.ops) == 1 && g.ops[0] == "-":
			add("@{-1}", false, false)
		case start != "" || dashdash:
			add(g.ops[0], false, false)
		default:
			// git checkout X: a file X restores the index's version
			if p, known := resolve(s.cwd, g.ops[0]); known && !isUnknown(p) && fileExists(p) {
				add(":", false, false)
			} else {
				add(g.ops[0], false, true)
			}
		}
	case "switch":
		switch {
		case len(g.ops) == 0:
		case g.ops[0] == "-":
			add("@{-1}", false, false)
		default:
			add(g.ops[0], false, true)
		}
	case "restore":
		if g.has("staged") && !g.has("worktree") {
			return gitNoFiles, "", nil
		}
		src, ok := g.last("source")
		if !ok || src == "" {
			src = ":"
		}
		add(src, false, false)
	case "reset":
		if !g.has("keep", "merge", "hard") {
			return gitNoFiles, "", nil // --mixed and --soft leave the work tree alone
		}
		ref := "HEAD"
		if len(g.ops) > 0 {
			ref = g.ops[0]
		}
		add(ref, false, false)
	case "stash":
		ops := skipOpts(rest, "m", []string{"message", "pathspec-from-file"})
		what := "push"
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") && len(ops) > 0 {
			what, ops = ops[0], ops[1:]
		}
		switch what {
		case "list", "show", "drop", "clear", "create", "store":
			return gitNoFiles, "", nil
		case "push", "save":
			add("HEAD", false, false)
		case "pop", "apply", "branch":
			if what == "branch" && len(ops) > 0 {
				ops = ops[1:]
			}
			ref := "stash@{0}"
			if len(ops) > 0 {
				ref = ops[0]
				if _, err := strconv.Atoi(ref); err == nil {
					ref = "stash@{" + ref + "}"
				}
			}
			add(ref, false, false)
			add(ref+"^3", true, false) // the untracked files of git stash -u
			if what == "branch" {
				add(ref+"^1", false, false)
			}
		default:
			return gitUnknown, root, nil
		}
	case "merge", "pull", "rebase", "cherry-pick", "revert":
		if g.has("abort", "quit") {
			add("HEAD", false, false)
			add("ORIG_HEAD", true, false)
			break
		}
		switch sub {
		case "pull":
			if len(g.ops) >= 2 {
				for _, spec := range g.ops[1:] {
					src, _, _ := strings.Cut(strings.TrimPrefix(spec, "+"), ":")
					add(g.ops[0]+"/"+src, true, false)
				}
			} else {
				add("@{upstream}", true, false)
			}
		case "merge":
			for _, op := range g.ops {
				add(op, true, false)
			}
			if len(g.ops) == 0 {
				add("@{upstream}", true, false)
			}
		case "rebase":
			if onto, ok := g.last("onto"); ok {
				add(onto, true, false)
			}
			for _, op := range g.ops {
				add(op, true, false)
			}
			if len(g.ops) == 0 {
				add("@{upstream}", true, false)
			}
		default: // cherry-pick, revert
			for _, op := range g.ops {
				from, to, isRange := strings.Cut(op, "..")
				if isRange {
					add(strings.TrimPrefix(to, "."), true, false)
					add(from, true, false)
					continue
				}
				add(op, true, false)
				if sub == "revert" {
					add(op+"^", true, false)
				}
			}
		}
	case "am", "apply":
		// content from outside the repository: the disk version is
		// what the guard can read (docs/amp.md, Known gaps)
		return gitNoFiles, "", nil
	case "clone":
		ops := skipOpts(rest, "obcuj", []string{"origin", "branch", "config", "upload-pack", "template", "reference",
			"reference-if-able", "separate-git-dir", "depth", "shallow-since", "shallow-exclude", "jobs", "filter",
			"server-option", "bundle-uri", "ref-format", "revision"})
		target := ""
		switch {
		case len(ops) >= 2:
			target = ops[1]
		case len(ops) == 1:
			target = strings.TrimSuffix(path.Base(strings.TrimSuffix(ops[0], "/")), ".git")
		}
		if target == "" || isUnknown(target) || (s.cwd == "" && !strings.HasPrefix(target, "/")) {
			return gitUnknown, "", nil
		}
		at := s.cwd
		if strings.HasPrefix(dir, "/") {
			at = dir
		} else if dir != "" {
			at = path.Join(s.cwd, dir)
		}
		d, _ := resolve(at, target)
		return gitUnknown, d, nil
	case "worktree":
		ops := skipOpts(rest, "b", []string{"reason", "expire"})
		if len(ops) == 0 || ops[0] != "add" && ops[0] != "move" {
			return gitNoFiles, "", nil
		}
		return gitUnknown, "", nil
	case "read-tree", "checkout-index", "submodule", "sparse-checkout", "bisect", "filter-branch", "mergetool", "merge-index",
		"unpack-file", "format-patch":
		if sub == "bisect" && len(rest) > 0 && (rest[0] == "log" || rest[0] == "visualize" || rest[0] == "view") {
			return gitNoFiles, "", nil
		}
		if sub == "submodule" && len(rest) > 0 && (rest[0] == "status" || rest[0] == "summary" || rest[0] == "foreach") {
			return gitNoFiles, "", nil
		}
		return gitUnknown, root, nil
	default:
		if !gitBuiltins[sub] {
			// an alias or an external git-SUB program: unknown
			return gitUnknown, root, nil
		}
		return gitNoFiles, "", nil
	}
	return versions()
}

// gitRoot returns the work tree a git command runs in (after its -C
// options), "" when the guard cannot know it.
func gitRoot(s *shState, args []string) string {
	dir := ""
	for i := 0; i < len(args); i++ {
		x := args[i]
		if x == "-C" || x == "-c" || x == "--config-env" || x == "--namespace" || x == "--exec-path" ||
			x == "--super-prefix" || x == "--attr-source" || x == "--git-dir" || x == "--work-tree" {
			if x == "-C" && i+1 < len(args) {
				dir = path.Join(dir, args[i+1])
				if strings.HasPrefix(args[i+1], "/") {
					dir = args[i+1]
				}
			}
			i++
			continue
		}
		if !strings.HasPrefix(x, "-") {
			break
		}
	}
	if isUnknown(dir) || (s.cwd == "" && !strings.HasPrefix(dir, "/")) {
		return ""
	}
	root := s.cwd
	if dir != "" {
		root, _ = resolve(s.cwd, dir)
	}
	return repoRoot(root)
}

// gitCreates returns the branch or tag the git command with args makes
// and the revision it points at ("" when it makes none), so that a
// version named by it later in the same call is read at that revision.
func gitCreates(args []string) (name, start string) {
	i := 0
	for ; i < len(args); i++ {
		if args[i] == "-C" || args[i] == "-c" {
			i++
			continue
		}
		if !strings.HasPrefix(args[i], "-") {
			break
		}
	}
	if i >= len(args) {
		return "", ""
	}
	sub, rest := args[i], args[i+1:]
	g := parseGitArgs(sub, rest)
	switch sub {
	case "branch", "tag":
		if len(g.ops) == 0 || len(g.opts) > 0 && !g.has("force", "-f", "track", "no-track", "annotate", "message", "-m", "-a") {
			return "", ""
		}
		name = g.ops[0]
		start = "HEAD"
		if len(g.ops) > 1 {
			start = g.ops[1]
		}
	case "checkout", "switch":
		for _, k := range []string{"-b", "-B", "create", "force-create"} {
			if v, ok := g.last(k); ok && v != "" {
				name = v
			}
		}
		if name == "" {
			return "", ""
		}
		start = "HEAD"
		if len(g.ops) > 0 {
			start = g.ops[0]
		}
	}
	if isUnknown(name) || isUnknown(start) {
		return "", ""
	}
	return name, start
}

// versionText returns the text the version being checked in this pass
// puts at abs (the logical path) or r (the physical one): use is false
// when the disk's version stands (no version pass, another repository,
// or a file the version does not hold). ok is false when it denied.
func (a *analyzer) versionText(abs, r, how string) (data []byte, use, ok bool) {
	v := a.fs.variant
	if v == nil || !a.fs.registered(*v) {
		return nil, false, true
	}
	rel := ""
	switch {
	case within(abs, v.root) && abs != v.root:
		rel = strings.TrimPrefix(abs, v.root+"/")
	case within(r, v.root) && r != v.root:
		rel = strings.TrimPrefix(r, v.root+"/")
	default:
		if rr := realDir(v.root); rr != "" && within(r, rr) && r != rr {
			rel = strings.TrimPrefix(r, rr+"/")
		} else {
			return nil, false, true
		}
	}
	ref := v.ref
	if isUnknown(ref) {
		a.deny(CodeBlind, how+" runs "+clip(abs)+" after "+v.by+", which sets it to a version the guard cannot know")
		return nil, false, false
	}
	data, present, err := readGitVersion(context.Background(), v.root, ref, rel)
	var unknownRef *errUnknownRef
	if errors.As(err, &unknownRef) && v.dwim && !strings.ContainsAny(ref, ":^~@{}*?[\\ ") {
		// git checkout NAME with no branch NAME makes one from the
		// remote's (origin's, when it is the only one to have it)
		data, present, err = readGitVersion(context.Background(), v.root, "refs/remotes/origin/"+ref, rel)
	}
	switch {
	case errors.As(err, &unknownRef) && v.optional:
		return nil, false, true
	case err != nil:
		a.deny(CodeBlind, how+" runs "+clip(abs)+" after "+clip(v.by)+", and the guard cannot read the version of "+
			clip(printable(ref))+" it may hold: "+clip(err.Error())+" (run the script in a separate call)")
		return nil, false, false
	case !present:
		return nil, false, true
	}
	return data, true, true
}

// errUnknownRef is returned for a revision the repository does not hold.
type errUnknownRef struct{ ref string }

func (e *errUnknownRef) Error() string { return "no revision " + e.ref + " in the repository" }

// readGitVersion reads the file rel (relative to the work tree root) of
// the version ref with git cat-file, walking the trees itself so that a
// symbolic link on the way is seen. present is false when the version
// holds no file there. ref ":" is the index.
func readGitVersion(ctx context.Context, root, ref, rel string) (data []byte, present bool, err error) {
	if strings.ContainsAny(ref+rel, "\n\r\x00") {
		return nil, false, fmt.Errorf("a name with a line break")
	}
	ctx, cancel := context.WithTimeout(ctx, gitReadTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "--batch")
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, false, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, err
	}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("run git: %w", err)
	}
	defer func() {
		stdin.Close()
		if werr := cmd.Wait(); err == nil && werr != nil && ctx.Err() != nil {
			err = fmt.Errorf("git: %w", ctx.Err())
		}
	}()
	br := bufio.NewReader(stdout)
	ask := func(name string) (typ string, body []byte, err error) {
		if _, err := io.WriteString(stdin, name+"\n"); err != nil {
			return "", nil, fmt.Errorf("git: %w", err)
		}
		line, err := br.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil {
				return "", nil, fmt.Errorf("git: %w", ctx.Err())
			}
			return "", nil, fmt.Errorf("git: %w", err)
		}
		f := strings.Fields(line)
		if len(f) == 2 && (f[1] == "missing" || f[1] == "ambiguous") || len(f) != 3 {
			return "missing", nil, nil
		}
		size, err := strconv.Atoi(f[2])
		if err != nil {
			return "", nil, fmt.Errorf("git: bad answer %q", line)
		}
		limit := maxGitTree
		if f[1] == "blob" {
			limit = maxScriptFile
		}
		if size > limit {
			return "", nil, errTooLarge
		}
		body = make([]byte, size+1)
		if _, err := io.ReadFull(br, body); err != nil {
			return "", nil, fmt.Errorf("git: %w", err)
		}
		return f[1], body[:size], nil
	}
	if ref == ":" {
		typ, body, err := ask(":" + rel)
		if err != nil || typ != "blob" {
			return nil, false, err
		}
		return body, true, nil
	}
	typ, body, err := ask(ref + "^{tree}")
	if err != nil && ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		// git dies on some names it cannot resolve (@{upstream} with
		// no upstream, @{-1} with no earlier branch)
		return nil, false, &errUnknownRef{ref: ref}
	}
	if err != nil {
		return nil, false, err
	}
	if typ != "tree" {
		return nil, false, &errUnknownRef{ref: ref}
	}
	parts := splitPath(rel)
	for i, name := range parts {
		mode, id, found := treeEntry(body, name)
		if !found {
			return nil, false, nil
		}
		switch {
		case mode == "120000":
			return nil, false, errGitSymlink
		case mode == "40000" && i < len(parts)-1:
			if typ, body, err = ask(id); err != nil {
				return nil, false, err
			}
			if typ != "tree" {
				return nil, false, nil
			}
		case (mode == "100644" || mode == "100755") && i == len(parts)-1:
			typ, body, err := ask(id)
			if err != nil {
				return nil, false, err
			}
			return body, typ == "blob", nil
		default:
			return nil, false, nil // a directory or a submodule where a file was named
		}
	}
	return nil, false, nil
}

// treeEntry finds name in a raw tree object: "MODE NAME\0" and a binary
// object id (20 bytes for SHA-1, 32 for SHA-256, told apart by the next
// entry's shape).
func treeEntry(tree []byte, name string) (mode, id string, ok bool) {
	for len(tree) > 0 {
		sp := bytes.IndexByte(tree, ' ')
		nul := bytes.IndexByte(tree, 0)
		if sp < 0 || nul < sp {
			return "", "", false
		}
		m, n := string(tree[:sp]), string(tree[sp+1:nul])
		rest := tree[nul+1:]
		size := 20
		if len(rest) >= 32 && (len(rest) == 32 || looksLikeEntry(rest[32:])) && !(len(rest) == 20 || looksLikeEntry(rest[20:])) {
			size = 32
		}
		if len(rest) < size {
			return "", "", false
		}
		if n == name {
			return m, fmt.Sprintf("%x", rest[:size]), true
		}
		tree = rest[size:]
	}
	return "", "", false
}

// looksLikeEntry reports whether b starts like a tree entry ("100644 ").
func looksLikeEntry(b []byte) bool {
	sp := bytes.IndexByte(b, ' ')
	if sp < 5 || sp > 6 {
		return false
	}
	for _, c := range b[:sp] {
		if c < '0' || c > '7' {
			return false
		}
	}
	return true
}
