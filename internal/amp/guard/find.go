package guard

import (
	"path"
	"strings"
)

// find: its expression, -delete and -exec, and paths that reach .git.

// findTests are find's expression words that take one argument.
var findTests = map[string]bool{
	"-name": true, "-iname": true, "-path": true, "-ipath": true, "-wholename": true, "-iwholename": true, "-regex": true,
	"-iregex": true, "-type": true, "-xtype": true, "-size": true, "-mtime": true, "-mmin": true, "-atime": true, "-amin": true,
	"-ctime": true, "-cmin": true, "-newer": true, "-perm": true, "-user": true, "-group": true, "-uid": true, "-gid": true,
	"-maxdepth": true, "-mindepth": true, "-links": true, "-inum": true, "-samefile": true, "-fstype": true, "-used": true,
	"-printf": true, "-fprint": true, "-fprint0": true, "-fls": true, "-lname": true, "-ilname": true, "-context": true,
	"-regextype": true, "-newermt": true, "-newerct": true, "-newerat": true, "-anewer": true, "-cnewer": true, "-files0-from": true,
}

func (a *analyzer) find(s *shState, args []string) {
	i := 0
	follow := false // find -L and -follow walk through symlinks
	for i < len(args) && (args[i] == "-H" || args[i] == "-L" || args[i] == "-P" || strings.HasPrefix(args[i], "-O") || args[i] == "-D") {
		if args[i] == "-L" || args[i] == "-H" {
			follow = true
		}
		if args[i] == "-D" {
			i++
		}
		i++
	}
	i = min(i, len(args)) // find -D with its value missing
	var roots []string
	for i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "(" && args[i] != "!" {
		roots = append(roots, args[i])
		i++
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	expr := args[i:]
	filtered, logic := false, false
	var sample string
	del := false
	type execCmd struct{ argv []string }
	var execs []execCmd
	for j := 0; j < len(expr); j++ {
		x := expr[j]
		switch {
		case x == "-o" || x == "-or" || x == "!" || x == "-not" || x == "," || x == "(" || x == ")":
			logic = true
		case x == "-name" || x == "-iname" || x == "-path" || x == "-ipath" || x == "-wholename" || x == "-regex" || x == "-iregex":
			if j+1 < len(expr) {
				pat := expr[j+1]
				if !matchesGit(pat, x) {
					filtered = true
					if !strings.ContainsAny(pat, "*?[") {
						sample = path.Base(pat)
					}
				}
				j++
			}
		case x == "-delete":
			del = true
		case x == "-follow":
			follow = true
		case x == "-exec" || x == "-execdir" || x == "-ok" || x == "-okdir":
			k := j + 1
			for k < len(expr) && expr[k] != ";" && expr[k] != "+" {
				k++
			}
			execs = append(execs, execCmd{argv: expr[j+1 : k]})
			j = k
		case findTests[x]:
			j++
		}
	}
	if logic {
		filtered = false
	}
	if sample == "" {
		sample = "item"
	}
	for _, r := range roots {
		if a.found != nil {
			return
		}
		// The items find visits: with a name filter, files below the root
		// with a harmless name; without one, the root itself and its .git.
		items := []string{strings.TrimSuffix(r, "/") + "/" + sample}
		if !filtered {
			items = []string{r}
		} else if _, inside := gitSegments(path.Clean(r)); inside || path.Base(path.Clean(r)) == ".git" {
			items = append(items, r)
		}
		if del {
			for _, it := range items {
				if follow && !strings.HasSuffix(it, "/") {
					it += "/"
				}
				if why := a.deletion(s.cwd, it, true); why != "" {
					a.deny(CodeDestructive, "find "+printable(r)+" -delete is blocked: "+why)
					return
				}
			}
		}
		for _, e := range execs {
			for _, it := range items {
				argv := make([]string, len(e.argv))
				for k, w := range e.argv {
					argv[k] = strings.ReplaceAll(w, "{}", it)
				}
				a.run(s.clone(), argv, stdinNone, nil)
				if a.found != nil {
					a.found.Reason += " (run by find -exec on " + printable(it) + ")"
					return
				}
			}
		}
	}
}

// matchesGit reports whether a find name/path pattern could match .git.
func matchesGit(pat, test string) bool {
	if test == "-regex" || test == "-iregex" {
		return true // the guard does not evaluate regular expressions
	}
	if ok, _ := path.Match(pat, ".git"); ok {
		return true
	}
	if test == "-path" || test == "-ipath" || test == "-wholename" {
		for _, p := range []string{"./.git", "./.git/x", ".git", "./x/.git"} {
			if ok, _ := path.Match(pat, p); ok {
				return true
			}
		}
		return strings.Contains(pat, "*") && !strings.Contains(pat, ".") // */x patterns can cross .git
	}
	return false
}
