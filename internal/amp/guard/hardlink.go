package guard

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// A file of the work tree can be a hard link to a file under .git, made by
// an earlier tool call (ln .git/config c): writing through it in place
// (a redirection, tee, cp onto it, the Write and Edit tools) changes the
// repository. Replacing it (mv, sed -i, install, ln -f) or deleting it
// only drops the link and is harmless.

// maxGitWalk bounds the entries of a .git directory the guard visits
// looking for a file's inode; a larger walk is cut short and a write
// through any multiply-linked file in that repository is denied.
var maxGitWalk = 100_000

// fileID identifies a file on disk.
type fileID struct{ dev, ino uint64 }

// gitInodes is what one walk of a .git directory found: the files with
// more than one link, and whether the walk saw everything.
type gitInodes struct {
	ids      map[fileID]bool
	complete bool
}

// gitWalks caches walks per process, by the .git directory's path.
var gitWalks sync.Map // string -> *gitInodes

// walkGitDir returns the multiply-linked files under dir (not following
// symlinks), visiting at most maxGitWalk entries.
func walkGitDir(dir string) *gitInodes {
	if v, ok := gitWalks.Load(dir); ok {
		return v.(*gitInodes)
	}
	g := &gitInodes{ids: map[fileID]bool{}, complete: true}
	n := 0
	errStop := errors.New("stop")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			g.complete = false
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		n++
		if n > maxGitWalk {
			return errStop
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			g.complete = false
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			g.ids[fileID{uint64(st.Dev), uint64(st.Ino)}] = true
		}
		return nil
	})
	if err != nil {
		g.complete = false
	}
	gitWalks.Store(dir, g)
	return g
}

// gitDirsFor returns the .git directories that could hold a file at abs:
// the repository containing it and the project's, each with the common
// directory of a linked worktree.
func (ps paths) gitDirsFor(abs string) []string {
	var dirs []string
	add := func(d string) {
		for _, x := range dirs {
			if x == d {
				return
			}
		}
		dirs = append(dirs, d)
	}
	var roots []string
	d := path.Dir(abs)
	for range 64 {
		if _, err := os.Lstat(path.Join(d, ".git")); err == nil {
			roots = append(roots, d)
			break
		}
		if d == "/" {
			break
		}
		d = path.Dir(d)
	}
	if ps.project != "" {
		roots = append(roots, ps.project)
	}
	for _, r := range roots {
		g := path.Join(r, ".git")
		fi, err := os.Stat(g)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			add(g)
			continue
		}
		// a worktree or submodule: .git is a file naming the real one
		gd := gitdirFile(g)
		if gd == "" {
			add(g) // unreadable: walkGitDir reports it incomplete
			continue
		}
		add(gd)
		if c, err := os.ReadFile(path.Join(gd, "commondir")); err == nil {
			cd := strings.TrimSpace(string(c))
			if !path.IsAbs(cd) {
				cd = path.Join(gd, cd)
			}
			add(path.Clean(cd))
		}
	}
	return dirs
}

// gitdirFile reads the "gitdir: …" line of a .git file.
func gitdirFile(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return ""
	}
	gd, ok := strings.CutPrefix(sc.Text(), "gitdir:")
	if !ok {
		return ""
	}
	gd = strings.TrimSpace(gd)
	if !path.IsAbs(gd) {
		gd = path.Join(path.Dir(p), gd)
	}
	return path.Clean(gd)
}

// hardLinkIntoGit explains why writing in place to the file at abs (a
// physical path) changes a file under .git through a hard link, or
// returns "". A walk cut short fails closed.
func (ps paths) hardLinkIntoGit(abs string) string {
	fi, err := os.Stat(abs)
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return ""
	}
	id := fileID{uint64(st.Dev), uint64(st.Ino)}
	for _, dir := range ps.gitDirsFor(abs) {
		di, err := os.Stat(dir)
		if err != nil {
			continue
		}
		if dst, ok := di.Sys().(*syscall.Stat_t); ok && uint64(dst.Dev) != id.dev {
			continue // a hard link never crosses file systems
		}
		g := walkGitDir(dir)
		if g.ids[id] {
			return "it is a hard link to a file under " + dir + " (history, config and hooks): writing it changes the repository"
		}
		if !g.complete {
			return "it has other hard links, and " + dir + " is too large or unreadable for the guard to rule out that one is under it"
		}
	}
	return ""
}

// writeThrough explains why writing in place to p (opening it for
// writing, as a redirection, tee, cp or the Write tool do) destroys work
// beyond what write reports: p is a hard link into .git.
func (ps paths) writeThrough(cwd, p string) string {
	if why := ps.write(cwd, p); why != "" {
		return why
	}
	if p == "" || isUnknown(p) {
		return ""
	}
	r, ok := ps.fs.real(cwd, p, true)
	if !ok {
		return ""
	}
	if ps.fs == nil {
		return ""
	}
	if _, made := ps.fs.links[r]; made {
		return "" // a link this command makes: resolved by write
	}
	return ps.hardLinkIntoGit(r)
}
