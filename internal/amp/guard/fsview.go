package guard

import (
	"os"
	"path"
	"strings"
)

// maxLinkHops bounds symlink resolution (the kernel's own limit is 40).
const maxLinkHops = 40

// fsView is what the guard knows of the file system during one check:
// symlinks on disk, links the script itself makes (ln -s .git g) and files
// it writes (a script written and then run by the same command).
type fsView struct {
	// links maps the absolute path of a link the script makes to its
	// target as given (relative to the link's directory unless absolute).
	links map[string]string
	// written holds the absolute paths (logical and physical) the script
	// writes to.
	written map[string]bool
	// mentions are the arguments of earlier commands that may write files
	// (a script file named there may have been made by them).
	mentions []string
	// trees maps directories under which an earlier command writes files
	// it does not name (tar x, git checkout, cp -r) to that command.
	trees map[string]string
	// gitTrees maps work trees where an earlier git command sets tracked
	// files to versions git holds (git checkout REF, git stash) to them.
	gitTrees map[string][]gitVersion
	// needed are the versions of scripts read in this pass, to check in
	// further passes.
	needed []gitVersion
	// variant is the version checked in this pass (nil: the disk's).
	variant *gitVersion
	// newRefs maps branches and tags made earlier in the same call
	// (work tree, NUL, name) to the revision they were made at.
	newRefs map[string]string
}

func newFSView() *fsView {
	return &fsView{links: map[string]string{}, written: map[string]bool{}, trees: map[string]string{},
		gitTrees: map[string][]gitVersion{}, newRefs: map[string]string{}}
}

// registered reports whether an earlier git command of this pass may put
// the version v in its work tree.
func (v *fsView) registered(g gitVersion) bool {
	for _, x := range v.gitTrees[g.root] {
		if x.ref == g.ref {
			return true
		}
	}
	return false
}

// need records the versions that may replace the file at abs (logical)
// or r (physical).
func (v *fsView) need(abs, r string) {
	for root, vs := range v.gitTrees {
		if within(abs, root) || within(r, root) || (realDir(root) != "" && within(r, realDir(root))) {
			v.needed = append(v.needed, vs...)
		}
	}
}

// readlink returns the target of the link at abs: one the script made,
// else one on disk.
func (v *fsView) readlink(abs string) (string, bool) {
	if t, ok := v.links[abs]; ok {
		return t, true
	}
	t, err := os.Readlink(abs)
	if err != nil {
		return "", false
	}
	return t, true
}

// real returns the physical path p names when resolved against cwd, the
// way the kernel walks it: every symlink among its components is followed
// (the last one only when followLast), and ".." applies to the directory
// a symlink led to. known is false when p is relative and cwd unknown, or
// p has parts the guard cannot know.
func (v *fsView) real(cwd, p string, followLast bool) (string, bool) {
	if v == nil || p == "" || isUnknown(p) || strings.Contains(p, everything) {
		return "", false
	}
	full := p
	if !strings.HasPrefix(p, "/") {
		if cwd == "" {
			return "", false
		}
		full = cwd + "/" + p
	}
	if strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || p == "." {
		followLast = true
	}
	rest := splitPath(full)
	cur := "/"
	hops := 0
	for len(rest) > 0 {
		seg := rest[0]
		rest = rest[1:]
		switch seg {
		case ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, seg)
		if len(rest) == 0 && !followLast {
			cur = next
			break
		}
		t, ok := v.readlink(next)
		if !ok {
			cur = next
			continue
		}
		hops++
		if hops > maxLinkHops {
			return "", false
		}
		if strings.HasPrefix(t, "/") {
			cur = "/"
		}
		rest = append(splitPath(t), rest...)
	}
	return cur, true
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// link records a link the script makes at abs pointing to target.
func (v *fsView) link(abs, target string) {
	if v == nil || abs == "" || isUnknown(abs) {
		return
	}
	v.links[abs] = target
}

// wrote records a file the script writes.
func (v *fsView) wrote(abs string) {
	if v == nil || abs == "" {
		return
	}
	v.written[abs] = true
}

// viaUnknownLink returns the link, made by the command with a target the
// guard cannot know, that p goes through (or is); "" if none.
func (v *fsView) viaUnknownLink(cwd, p string) string {
	if v == nil || len(v.links) == 0 || isUnknown(p) {
		return ""
	}
	abs, known := resolve(cwd, p)
	if !known {
		return ""
	}
	for l, t := range v.links {
		if isUnknown(t) && within(abs, l) {
			return l
		}
	}
	return ""
}

// tree records a directory under which the command writes files it does
// not name; "" (a directory the guard cannot know) stands for /.
func (v *fsView) tree(dir, by string) {
	if v == nil {
		return
	}
	if dir == "" || isUnknown(dir) {
		dir = "/"
	}
	v.trees[dir] = by
}

// inTree returns the command that writes unnamed files under a directory
// holding abs or r, or "".
func (v *fsView) inTree(abs, r string) string {
	if v == nil {
		return ""
	}
	for t, by := range v.trees {
		if within(abs, t) || within(r, t) {
			return by
		}
	}
	return ""
}
