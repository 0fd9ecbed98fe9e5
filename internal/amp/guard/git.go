package guard

import (
	"path"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
)

// gitOpt is one option of a git subcommand.
type gitOpt struct {
	short byte
	long  string
	arg   argKind
}

type argKind int

const (
	argNone argKind = iota
	argRequired
	argOptional
)

// gitBuiltins are git's own commands, which an alias cannot replace.
var gitBuiltins = map[string]bool{}

func init() {
	for _, c := range strings.Fields(`add am annotate apply archive bisect blame branch bugreport bundle cat-file
	check-attr check-ignore check-mailmap check-ref-format checkout checkout-index cherry cherry-pick clean clone column
	commit commit-graph commit-tree config count-objects credential describe diagnose diff diff-files diff-index
	diff-tree difftool fast-export fast-import fetch fetch-pack fmt-merge-msg for-each-ref for-each-repo format-patch fsck
	gc get-tar-commit-id grep hash-object help hook index-pack init interpret-trailers log ls-files ls-remote ls-tree
	mailinfo mailsplit maintenance merge merge-base merge-file merge-index merge-tree mktag mktree multi-pack-index mv
	name-rev notes pack-objects pack-refs patch-id prune prune-packed pull push range-diff read-tree rebase receive-pack
	reflog remote repack replace rerere reset restore rev-list rev-parse revert rm send-pack shortlog show show-branch
	show-index show-ref sparse-checkout stage stash status stripspace submodule switch symbolic-ref tag unpack-file
	unpack-objects update-index update-ref update-server-info upload-archive upload-pack var verify-commit verify-pack
	verify-tag version whatchanged worktree write-tree`) {
		gitBuiltins[c] = true
	}
}

// gitArgs is a parsed git subcommand line: options by canonical name (the
// long name, "no-<long>" when negated, or "-x" for a short option without
// a long name) with their values, and the operands.
type gitArgs struct {
	opts map[string][]string
	ops  []string
}

func (g gitArgs) has(names ...string) bool {
	for _, n := range names {
		if _, ok := g.opts[n]; ok {
			return true
		}
	}
	return false
}

func (g gitArgs) last(name string) (string, bool) {
	v, ok := g.opts[name]
	if !ok || len(v) == 0 {
		return "", ok
	}
	return v[len(v)-1], true
}

// parseGitArgs parses a subcommand's arguments the way git's
// parse-options does: options anywhere before "--", short clusters,
// values attached or in the next word, and long options abbreviated to
// any unique prefix (an ambiguous prefix, which git refuses, counts as
// every option it could mean).
func parseGitArgs(sub string, args []string) gitArgs {
	table := gitOptions[sub]
	g := gitArgs{opts: map[string][]string{}}
	add := func(k, v string) { g.opts[k] = append(g.opts[k], v) }
	for i := 0; i < len(args); i++ {
		x := args[i]
		switch {
		case x == "--":
			g.ops = append(g.ops, args[i+1:]...)
			return g
		case strings.HasPrefix(x, "--") && len(x) > 2:
			name, val, hasVal := strings.Cut(x[2:], "=")
			matches := matchLong(table, name)
			if len(matches) == 0 {
				add(name, val)
				continue
			}
			for _, m := range matches {
				if m.arg == argRequired && !hasVal && !m.negated && len(matches) == 1 && i+1 < len(args) {
					i++
					val = args[i]
				}
				add(m.key, val)
			}
		case strings.HasPrefix(x, "-") && len(x) > 1 && x != "-":
			for j := 1; j < len(x); j++ {
				c := x[j]
				var o *gitOpt
				for k := range table {
					if table[k].short == c {
						o = &table[k]
						break
					}
				}
				key := "-" + string(c)
				if o != nil && o.long != "" {
					key = o.long
				}
				if o != nil && o.arg != argNone {
					v := x[j+1:]
					if v == "" && o.arg == argRequired && i+1 < len(args) {
						i++
						v = args[i]
					}
					add(key, v)
					break
				}
				add(key, "")
			}
		default:
			g.ops = append(g.ops, x)
		}
	}
	return g
}

type longMatch struct {
	key     string
	arg     argKind
	negated bool
}

// matchLong resolves a long option name (without "--") against a table.
func matchLong(table []gitOpt, name string) []longMatch {
	var exact, prefix []longMatch
	try := func(o gitOpt, long string, neg bool, key string) {
		switch {
		case name == long:
			exact = append(exact, longMatch{key, o.arg, neg})
		case strings.HasPrefix(long, name):
			prefix = append(prefix, longMatch{key, o.arg, neg})
		}
	}
	for _, o := range table {
		if o.long == "" {
			continue
		}
		try(o, o.long, false, o.long)
		if rest, ok := strings.CutPrefix(o.long, "no-"); ok {
			try(o, rest, true, "!"+o.long) // --verify undoes --no-verify
		} else {
			try(o, "no-"+o.long, true, "no-"+o.long)
		}
	}
	if len(exact) > 0 {
		return exact[:1]
	}
	if len(name) < 1 {
		return nil
	}
	// "--no-" and shorter prefixes of it match every negation: git calls
	// that ambiguous; so do we unless one option is meant.
	if len(prefix) > 1 {
		seen := map[string]bool{}
		var out []longMatch
		for _, p := range prefix {
			if !seen[p.key] {
				seen[p.key] = true
				out = append(out, p)
			}
		}
		return out
	}
	return prefix
}

// gitCommandKeys are configuration keys whose value git runs as a shell
// command (section.key, or section.*.key for subsections).
var gitCommandKeys = map[string]bool{
	"core.pager": true, "core.editor": true, "core.sshcommand": true, "core.fsmonitor": true, "core.askpass": true,
	"core.gitproxy": true, "sequence.editor": true, "diff.external": true, "gpg.program": true, "credential.helper": true,
	"uploadpack.packobjectshook": true, "filter.*.clean": true, "filter.*.smudge": true, "filter.*.process": true,
	"merge.*.driver": true, "diff.*.textconv": true, "diff.*.command": true, "difftool.*.cmd": true, "mergetool.*.cmd": true,
	"gpg.*.program": true, "pager.*": true, "sendemail.*.tocmd": true, "sendemail.tocmd": true, "sendemail.cccmd": true,
	"credential.*.helper": true, "core.hookspath": true, "remote.*.receivepack": true, "remote.*.uploadpack": true,
	"remote.*.vcs": true,
}

// configKey lowercases a configuration key's section and name (the
// subsection keeps its case) and returns it with its pattern form.
func configKey(k string) (key, pattern string) {
	first := strings.IndexByte(k, '.')
	last := strings.LastIndexByte(k, '.')
	if first < 0 {
		return strings.ToLower(k), strings.ToLower(k)
	}
	if first == last {
		k = strings.ToLower(k)
		sec, _, _ := strings.Cut(k, ".")
		if sec == "pager" {
			return k, "pager.*"
		}
		return k, k
	}
	key = strings.ToLower(k[:first]) + k[first:last] + strings.ToLower(k[last:])
	return key, strings.ToLower(k[:first]) + ".*" + strings.ToLower(k[last:])
}

// gitConfigValue checks one configuration setting, given with -c, in the
// environment or written by git config.
func (a *analyzer) gitConfigValue(s *shState, k, v string, persistent bool) {
	key, pat := configKey(k)
	lv := strings.ToLower(strings.TrimSpace(v))
	switch {
	case pat == "core.hookspath":
		a.deny(CodeCIBypass, "setting core.hooksPath skips the repository's hooks (verification)")
	case gitCommandKeys[pat]:
		a.eval(s, strings.TrimPrefix(v, "!"))
	case strings.HasPrefix(key, "alias."):
		if persistent {
			a.gitAlias(s, v, nil, nil)
		}
	case key == "clean.requireforce" && (lv == "false" || lv == "no" || lv == "off" || lv == "0"):
		if persistent {
			a.deny(CodeGit, "clean.requireForce=false lets git clean delete untracked files without -f")
		}
	case strings.HasPrefix(key, "remote.") && strings.HasSuffix(key, ".mirror") && persistent && lv != "false":
		a.deny(CodeGit, "a mirror remote makes every push overwrite and delete remote branches")
	case strings.HasPrefix(key, "remote.") && strings.HasSuffix(key, ".push") && persistent && (strings.HasPrefix(v, "+") || strings.HasPrefix(v, ":")):
		a.deny(CodeGit, "a forced or deleting push refspec in the configuration")
	}
}

// gitAlias checks an alias body used as "git <alias> args…".
func (a *analyzer) gitAlias(s *shState, body string, global, rest []string) {
	if s.depth >= maxDepth {
		a.deny(CodeBlind, "git aliases nest too deeply to check")
		return
	}
	sub := s.clone()
	sub.depth++
	if sh, ok := strings.CutPrefix(strings.TrimSpace(body), "!"); ok {
		sub.params, sub.paramsKnown = rest, true
		a.eval(sub, sh+" "+quoteWords(rest))
		return
	}
	f, err := parse("git " + body)
	if err != nil || len(f.Stmts) != 1 {
		a.deny(CodeBlind, "a git alias the guard cannot read: "+clip(body))
		return
	}
	words := a.fieldsOfStmt(sub, f)
	if len(words) < 1 {
		return
	}
	argv := append(append(append([]string(nil), global...), words[1:]...), rest...)
	a.git(sub, argv, nil)
}

// git checks one git command line (the words after "git").
func (a *analyzer) git(s *shState, args []string, env map[string]string) {
	s = s.clone()
	config := map[string]string{}
	var global []string
	// Configuration from the environment.
	if env != nil {
		if n, err := strconv.Atoi(env["GIT_CONFIG_COUNT"]); err == nil {
			for i := 0; i < n && i < 64; i++ {
				k, v := env["GIT_CONFIG_KEY_"+strconv.Itoa(i)], env["GIT_CONFIG_VALUE_"+strconv.Itoa(i)]
				if k != "" {
					config[k] = v
				}
			}
		}
		if p := env["GIT_CONFIG_PARAMETERS"]; p != "" {
			for _, kv := range strings.Fields(strings.NewReplacer("'", " ", "\"", " ").Replace(p)) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					config[k] = v
				}
			}
		}
		for _, k := range []string{"HUSKY", "HUSKY_SKIP_HOOKS", "SKIP_HOOKS", "SKIP"} {
			if v, ok := env[k]; ok && ((k == "HUSKY" && v == "0") || (k != "HUSKY" && v != "" && v != "0")) {
				defer func() {
					if a.found == nil && len(args) > 0 {
						a.deny(CodeCIBypass, k+"="+v+" skips the repository's hooks (verification)")
					}
				}()
			}
		}
	}
	// Programs git runs, named in the environment (given before the
	// command or exported earlier): GIT_EDITOR='rm -rf .git' git commit.
	for _, k := range gitCommandEnv {
		v, ok := env[k]
		if !ok {
			if sv, set := s.vars[k]; set && sv.Kind == expand.String {
				v, ok = sv.Str, true
			}
		}
		if ok && strings.TrimSpace(v) != "" && !isUnknown(v) {
			a.eval(s, v)
			if a.found != nil {
				a.found.Reason += " (run by git as $" + k + ")"
				return
			}
		}
	}
	i := 0
loop:
	for ; i < len(args); i++ {
		x := args[i]
		switch {
		case x == "-C":
			if i+1 < len(args) {
				global = append(global, x, args[i+1])
				i++
				if args[i] != "" {
					a.cd(s, []string{args[i]})
				}
			}
		case x == "-c":
			if i+1 < len(args) {
				global = append(global, x, args[i+1])
				i++
				k, v, _ := strings.Cut(args[i], "=")
				if !strings.Contains(args[i], "=") {
					v = "true"
				}
				config[k] = v
			}
		case strings.HasPrefix(x, "--config-env="):
			global = append(global, x)
			k, _, _ := strings.Cut(strings.TrimPrefix(x, "--config-env="), "=")
			config[k] = unknown
		case x == "--git-dir" || x == "--work-tree" || x == "--namespace" || x == "--super-prefix" || x == "--exec-path" || x == "--config-env" || x == "--attr-source":
			if x == "--config-env" && i+1 < len(args) {
				k, _, _ := strings.Cut(args[i+1], "=")
				config[k] = unknown
			}
			global = append(global, x)
			if i+1 < len(args) {
				global = append(global, args[i+1])
			}
			i++
		case strings.HasPrefix(x, "-"):
			if x == "-h" || x == "--help" || x == "-v" || x == "--version" || strings.HasPrefix(x, "--list-cmds") ||
				x == "--html-path" || x == "--man-path" || x == "--info-path" {
				return
			}
			global = append(global, x)
		default:
			break loop
		}
	}
	for k, v := range config {
		a.gitConfigValue(s, k, v, false)
		if a.found != nil {
			return
		}
	}
	if i >= len(args) {
		return
	}
	sub := args[i]
	rest := args[i+1:]
	if isUnknown(sub) {
		a.deny(CodeBlind, "the git subcommand is built at run time ("+clip(printable(sub))+"): it could be reset, clean or push")
		return
	}
	if !gitBuiltins[sub] {
		for k, v := range config {
			if key, _ := configKey(k); key == "alias."+strings.ToLower(sub) {
				a.gitAlias(s, v, global, rest)
				return
			}
		}
	}
	g := parseGitArgs(sub, rest)
	deny := func(code, why string) { a.deny(code, why+": git "+clip(printable(strings.Join(args[i:], " ")))) }
	noVerify := func() bool { return g.has("no-verify") }
	switch sub {
	case "reset":
		if g.has("hard") {
			deny(CodeGit, "git reset --hard discards uncommitted work")
		}
	case "clean":
		force := g.has("force")
		for k, v := range config {
			if key, _ := configKey(k); key == "clean.requireforce" {
				lv := strings.ToLower(v)
				if lv == "false" || lv == "no" || lv == "off" || lv == "0" || isUnknown(v) {
					force = true
				}
			}
		}
		if force && !g.has("dry-run") {
			deny(CodeGit, "git clean with force deletes untracked files")
		}
	case "push":
		switch {
		case a.mode == ModeEval:
			deny(CodeGitEval, "git push is not allowed in eval mode")
		case noVerify():
			deny(CodeCIBypass, "--no-verify skips the pre-push hook")
		case g.has("mirror"):
			deny(CodeGit, "git push --mirror overwrites and deletes every remote ref")
		case g.has("delete"):
			deny(CodeGit, "git push --delete deletes remote branches")
		case g.has("prune"):
			deny(CodeGit, "git push --prune deletes remote branches")
		case g.has("force", "force-with-lease", "force-if-includes"):
			deny(CodeGit, "a force push rewrites the remote branch's history")
		}
		if a.found != nil {
			return
		}
		for j, op := range g.ops {
			if j == 0 && !g.has("repo") {
				continue // the remote
			}
			switch {
			case isUnknown(op):
				deny(CodeBlind, "a push refspec the guard cannot know")
			case strings.HasPrefix(op, "+"):
				deny(CodeGit, "a +refspec force-pushes and rewrites the remote branch's history")
			case strings.HasPrefix(op, ":"):
				deny(CodeGit, "a refspec starting with ':' deletes the remote branch")
			}
			if a.found != nil {
				return
			}
		}
		for k, v := range config {
			key, _ := configKey(k)
			if strings.HasPrefix(key, "remote.") && strings.HasSuffix(key, ".mirror") && strings.ToLower(v) != "false" {
				deny(CodeGit, "a mirror remote makes the push overwrite and delete remote branches")
				return
			}
			if strings.HasPrefix(key, "remote.") && strings.HasSuffix(key, ".push") && (strings.Contains(v, "+") || strings.HasPrefix(v, ":")) {
				deny(CodeGit, "a forced or deleting push refspec in -c")
				return
			}
		}
	case "checkout":
		if g.has("force") {
			deny(CodeGit, "git checkout --force throws away local changes")
			return
		}
		if g.has("pathspec-from-file") {
			deny(CodeGit, "git checkout of paths read from a file may overwrite the whole tree")
			return
		}
		for _, op := range g.ops {
			if a.wholeTree(s, op) {
				deny(CodeGit, "git checkout of "+printable(op)+" overwrites every uncommitted change in the tree")
				return
			}
		}
	case "restore":
		worktree := !g.has("staged") || g.has("worktree")
		if !worktree {
			return
		}
		if g.has("pathspec-from-file") {
			deny(CodeGit, "git restore of paths read from a file may overwrite the whole tree")
			return
		}
		for _, op := range g.ops {
			if a.wholeTree(s, op) {
				deny(CodeGit, "git restore of "+printable(op)+" overwrites every uncommitted change in the tree")
				return
			}
		}
	case "switch":
		if g.has("discard-changes", "force") {
			deny(CodeGit, "git switch --discard-changes throws away local changes")
		}
	case "branch":
		if g.has("-D") || (g.has("delete") && g.has("force")) {
			deny(CodeGit, "git branch -D deletes a branch even if it is not merged")
		}
	case "stash":
		if a.mode == ModeEval {
			deny(CodeGitEval, "git stash hides work from the grader in eval mode")
			return
		}
		if ops := skipOpts(rest, "", nil); len(ops) > 0 && (ops[0] == "drop" || ops[0] == "clear") {
			deny(CodeGit, "git stash "+ops[0]+" deletes stashed work")
		}
	case "reflog":
		if ops := skipOpts(rest, "", nil); len(ops) > 0 && (ops[0] == "expire" || ops[0] == "delete") {
			deny(CodeGit, "git reflog "+ops[0]+" deletes the history that recovers lost commits")
		}
	case "gc":
		if v, ok := g.last("prune"); ok && v != "" && !strings.Contains(v, "week") && !strings.Contains(v, "month") && !strings.Contains(v, "year") {
			deny(CodeGit, "git gc --prune="+printable(v)+" deletes unreachable commits at once")
			return
		}
		for k, v := range config {
			if key, _ := configKey(k); (key == "gc.pruneexpire" || strings.HasPrefix(key, "gc.reflogexpire")) &&
				(strings.EqualFold(v, "now") || strings.EqualFold(v, "all") || isUnknown(v)) {
				deny(CodeGit, "git gc with "+key+"="+printable(v)+" deletes unreachable commits at once")
				return
			}
		}
	case "prune":
		if !g.has("dry-run") {
			deny(CodeGit, "git prune deletes unreachable commits")
		}
	case "difftool", "mergetool":
		for j, x := range rest {
			v, cut := "", false
			switch {
			case x == "-x" || x == "--extcmd" || x == "--ext" || x == "--extc":
				if j+1 < len(rest) {
					v, cut = rest[j+1], true
				}
			case strings.HasPrefix(x, "--ext") && strings.Contains(x, "="):
				_, v, cut = strings.Cut(x, "=")
			case strings.HasPrefix(x, "-x") && len(x) > 2:
				v, cut = x[2:], true
			}
			if cut {
				a.eval(s, v)
				if a.found != nil {
					return
				}
			}
		}
	case "fetch":
		// A forced fetch into a local branch overwrites its commits
		// (git fetch --force origin main:feature, +main:feature).
		force := g.has("force")
		for _, op := range g.ops {
			src, dst, ok := strings.Cut(op, ":")
			if !ok || dst == "" || strings.HasPrefix(dst, "refs/remotes/") || strings.HasPrefix(dst, "refs/tags/") {
				continue
			}
			if force || strings.HasPrefix(src, "+") {
				deny(CodeGit, "a forced fetch into the local branch "+printable(dst)+" discards its commits")
				return
			}
		}
	case "update-ref":
		if g.has("-d", "stdin") {
			deny(CodeGit, "git update-ref -d deletes a ref")
			return
		}
		// the null object id as the new value deletes the ref too
		if len(g.ops) > 1 && len(g.ops[1]) >= 40 && strings.Trim(g.ops[1], "0") == "" {
			deny(CodeGit, "git update-ref to the null object id deletes a ref")
		}
	case "filter-branch", "filter-repo":
		deny(CodeGit, "git "+sub+" rewrites the repository's history")
	case "commit", "merge", "am", "cherry-pick", "revert", "pull", "rebase":
		if noVerify() || (sub == "commit" && g.has("-n")) {
			deny(CodeCIBypass, "--no-verify skips the repository's hooks (verification)")
			return
		}
		if sub == "rebase" {
			for _, v := range g.opts["exec"] {
				a.eval(s, v)
			}
		}
	case "rm":
		if g.has("cached") {
			return
		}
		if g.has("force") && g.has("-r") {
			deny(CodeGit, "git rm -rf deletes files with their uncommitted changes")
			return
		}
		for _, op := range g.ops {
			if a.wholeTree(s, op) {
				deny(CodeGit, "git rm of "+printable(op)+" deletes the whole tree")
				return
			}
		}
	case "checkout-index":
		if g.has("all") && g.has("force") {
			deny(CodeGit, "git checkout-index -a -f overwrites every uncommitted change")
		}
	case "read-tree":
		if g.has("-u") && g.has("reset") {
			deny(CodeGit, "git read-tree -u --reset overwrites every uncommitted change")
		}
	case "send-pack":
		if g.has("force", "mirror") {
			deny(CodeGit, "git send-pack --force/--mirror rewrites remote history")
		}
	case "worktree":
		if ops := skipOpts(rest, "", nil); len(ops) > 0 && ops[0] == "remove" {
			for _, x := range rest {
				if x == "-f" || x == "--force" || strings.HasPrefix(x, "--for") {
					deny(CodeGit, "git worktree remove --force deletes a worktree with its uncommitted changes")
				}
			}
		}
	case "submodule":
		ops := skipOpts(rest, "", nil)
		if len(ops) > 1 && ops[0] == "foreach" {
			cmd := skipOpts(ops[1:], "", nil)
			a.eval(s, strings.Join(cmd, " "))
		}
	case "bisect":
		if len(rest) > 1 && rest[0] == "run" {
			a.run(s, rest[1:], stdinNone, nil)
		}
	case "config":
		a.gitConfig(s, rest)
	case "show", "cat-file", "diff", "log", "grep", "archive", "blame":
		for _, op := range g.ops {
			p := op
			if _, after, ok := strings.Cut(op, ":"); ok {
				p = after
			}
			if strings.ContainsAny(p, "/.") && a.anti(s, p) {
				return
			}
		}
	}
}

// gitCommandEnv are environment variables naming programs git runs.
var gitCommandEnv = []string{"GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "PAGER", "EDITOR", "VISUAL",
	"GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND"}

// gitConfig checks "git config" writes.
func (a *analyzer) gitConfig(s *shState, rest []string) {
	g := parseGitArgs("config", rest)
	if g.has("get", "get-all", "get-regexp", "get-urlmatch", "list", "unset", "unset-all", "remove-section", "rename-section", "edit", "get-color", "get-colorbool") {
		return
	}
	ops := g.ops
	if len(ops) > 0 && (ops[0] == "set") {
		ops = ops[1:]
	}
	if len(ops) >= 2 {
		a.gitConfigValue(s, ops[0], ops[1], true)
	}
}

// wholeTree reports whether a pathspec covers the whole working tree (or
// cannot be known).
func (a *analyzer) wholeTree(s *shState, spec string) bool {
	if isUnknown(spec) {
		return true
	}
	p := spec
	top := false
	switch {
	case strings.HasPrefix(p, ":("):
		magic, after, ok := strings.Cut(p[2:], ")")
		if !ok || strings.Contains(magic, "exclude") {
			return false
		}
		top = strings.Contains(magic, "top")
		p = after
	case strings.HasPrefix(p, ":!") || strings.HasPrefix(p, ":^"):
		return false
	case strings.HasPrefix(p, ":/"):
		top = true
		p = p[2:]
	case strings.HasPrefix(p, ":"):
		return false
	}
	// a pattern that matches every name: "*", "**", "./*", "*/**" …
	for {
		q := strings.TrimSuffix(strings.TrimSuffix(p, "/"), "*")
		q = strings.TrimSuffix(q, "*")
		if q == p {
			break
		}
		p = q
	}
	if strings.Contains(p, everything) {
		p = strings.SplitN(p, everything, 2)[0]
	}
	if p == "" {
		p = "."
	}
	base := s.cwd
	if top {
		base = a.project
		if base == "" {
			return path.Clean(p) == "."
		}
	}
	abs, known := resolve(base, p)
	if !known {
		c := path.Clean(p)
		return c == "." || c == ".." || strings.HasPrefix(c, "../")
	}
	if a.project == "" {
		return abs == s.cwd || within(s.cwd, abs)
	}
	return within(a.project, abs)
}
