package guard

import (
	"path"
	"strings"
)

// make and gmake run the recipes of a makefile as sh -c strings. The guard
// reads the makefile (64 KiB, like a script), finds the recipes of the
// targets that would run (the goals given, else the default goal, and the
// prerequisites they reach within the file) and checks each recipe line as
// shell in make's directory. Simple variable assignments are resolved; a
// value the guard cannot know (a function, $(shell …), ?= overridden by the
// environment …) is unknown, so a recipe that runs it as a command is
// checked by the fail-closed rule for command names built at run time.

// maxMakeTargets bounds the targets followed from the goals; beyond it
// every recipe of the file is checked.
const maxMakeTargets = 500

// mkVar is one make variable.
type mkVar struct {
	val       string
	known     bool
	recursive bool // = (expanded when used), not := (expanded now)
}

// mkRule is one rule: targets, prerequisites and recipe lines (raw).
type mkRule struct {
	targets []string
	prereqs []string
	recipe  []string
	pattern bool
}

// makefile is what the guard learnt of the makefiles make would read.
type makefile struct {
	dir       string
	vars      map[string]mkVar
	overrides map[string]string // VAR=value on make's command line
	env       func(string) (string, bool)
	envWins   bool // make -e: the environment overrides the makefile
	rules     []*mkRule
	first     string // the default goal
	oneShell  bool
	blind     string // why the guard cannot know what make runs
	shells    []string
	seenShell map[string]bool
	steps     int // references expanded, bounded by maxMakeSteps
	// read returns a makefile's text (false when it does not exist, or
	// when the guard denied reading it: denied is then set).
	read     func(p string) ([]byte, bool)
	denied   bool
	includes int
	// remake are the makefiles read: make remakes them first when a
	// rule says how.
	remake []string
}

// maxMakeSteps bounds the variable references expanded in one makefile
// (recursive variables can double at each level); beyond it make is
// blind.
const maxMakeSteps = 20000

// makeDefaults are the values of make's built-in variables used as
// commands.
var makeDefaults = map[string]string{
	"RM": "rm -f", "CC": "cc", "CXX": "g++", "CPP": "cc -E", "AR": "ar", "AS": "as", "LD": "ld", "FC": "f77",
	"LEX": "lex", "YACC": "yacc", "INSTALL": "install", "MAKEINFO": "makeinfo", "TEX": "tex", "SHELL": "/bin/sh",
	"ARFLAGS": "rv", "MAKEFLAGS": "", "MFLAGS": "",
}

// makeRun checks make, gmake: the makefile's recipes that would run.
func (a *analyzer) makeRun(s *shState, name string, args []string, in input, env map[string]string) {
	if a.found != nil {
		return
	}
	if s.depth >= maxDepth {
		a.deny(CodeBlind, "make runs make too deeply to check")
		return
	}
	lookup := func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		if v, ok := s.vars[k]; ok && v.IsSet() {
			return v.String(), true
		}
		return "", false
	}
	if v, ok := lookup("MAKEFILES"); ok && strings.TrimSpace(v) != "" {
		a.deny(CodeBlind, name+" reads the makefiles named in MAKEFILES ("+clip(printable(v))+"), which the guard does not follow")
		return
	}
	// flags and variables given in the environment count as arguments
	for _, k := range []string{"MFLAGS", "GNUMAKEFLAGS", "MAKEFLAGS"} {
		v, ok := lookup(k)
		if !ok {
			continue
		}
		if isUnknown(v) {
			a.deny(CodeBlind, name+" takes flags and variables from "+k+", which the guard cannot know")
			return
		}
		w := strings.Fields(v)
		if len(w) > 0 && !strings.HasPrefix(w[0], "-") && !strings.Contains(w[0], "=") {
			w[0] = "-" + w[0]
		}
		args = append(w, args...)
	}
	dir := s.cwd
	var files, goals []string
	overrides := map[string]string{}
	dry, envWins := false, false
	setDir := func(d string) {
		if isUnknown(d) {
			dir = ""
			return
		}
		if strings.HasPrefix(d, "/") {
			dir = path.Clean(d)
		} else if dir != "" {
			dir = path.Join(dir, d)
		}
	}
	for i := 0; i < len(args); i++ {
		x := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case x == "--":
			for _, y := range args[i+1:] {
				if k, v, ok := strings.Cut(y, "="); ok && !strings.ContainsAny(k, "/ ") {
					overrides[strings.TrimRight(k, ":+?!")] = v
				} else {
					goals = append(goals, y)
				}
			}
			i = len(args)
		case x == "--directory":
			setDir(next())
		case strings.HasPrefix(x, "--directory="):
			setDir(strings.TrimPrefix(x, "--directory="))
		case x == "--file" || x == "--makefile":
			files = append(files, next())
		case strings.HasPrefix(x, "--file=") || strings.HasPrefix(x, "--makefile="):
			_, v, _ := strings.Cut(x, "=")
			files = append(files, v)
		case x == "--eval" || strings.HasPrefix(x, "--eval="):
			a.deny(CodeBlind, name+" --eval evaluates make code the guard does not follow")
			return
		case x == "--just-print" || x == "--dry-run" || x == "--recon" || x == "--question" || x == "--touch":
			dry = true
		case x == "--environment-overrides":
			envWins = true
		case x == "--include-dir" || x == "--old-file" || x == "--assume-old" || x == "--new-file" ||
			x == "--assume-new" || x == "--what-if" || x == "--jobs" || x == "--load-average":
			if x == "--jobs" || x == "--load-average" {
				if i+1 < len(args) && strings.Trim(args[i+1], "0123456789.") == "" {
					i++
				}
				continue
			}
			next()
		case strings.HasPrefix(x, "--"):
		case len(x) > 1 && x[0] == '-':
			cl := x[1:]
			for k := 0; k < len(cl); k++ {
				c := cl[k]
				rest := cl[k+1:]
				val := func() string {
					if rest != "" {
						return rest
					}
					return next()
				}
				switch c {
				case 'C':
					setDir(val())
				case 'f':
					files = append(files, val())
				case 'I', 'o', 'W':
					val()
				case 'E':
					a.deny(CodeBlind, name+" -E evaluates make code the guard does not follow")
					return
				case 'n', 'q', 't':
					dry = true
					continue
				case 'e':
					envWins = true
					continue
				case 'j', 'l', 'O':
					if rest == "" && i+1 < len(args) && strings.Trim(args[i+1], "0123456789.") == "" {
						i++
					}
				default:
					continue
				}
				break
			}
		default:
			if k, v, ok := strings.Cut(x, "="); ok && !strings.ContainsAny(k, "/ ") && k != "" {
				overrides[strings.TrimRight(k, ":+?!")] = v
			} else {
				goals = append(goals, x)
			}
		}
	}
	if dir == "" {
		if a.startCwd == "" {
			return // no working directory at all (not a hook call): nothing to read
		}
		a.deny(CodeBlind, name+" runs a makefile in a directory the guard cannot know")
		return
	}
	if len(files) == 0 {
		for _, f := range []string{"GNUmakefile", "makefile", "Makefile"} {
			p := path.Join(dir, f)
			if a.fs.written[p] || fileExists(p) {
				files = []string{p}
				break
			}
		}
		for _, f := range []string{"GNUmakefile", "makefile", "Makefile"} {
			if len(files) > 0 {
				break
			}
			// none on disk: an earlier git command may check one out
			p := path.Join(dir, f)
			a.fs.need(p, p)
			if _, use, ok := a.versionText(p, p, name); !ok {
				return
			} else if use {
				files = []string{p}
			}
		}
		if len(files) == 0 {
			return // no makefile: make only knows built-in rules
		}
	}
	m := &makefile{dir: dir, vars: map[string]mkVar{}, overrides: overrides, seenShell: map[string]bool{}, env: lookup,
		envWins: envWins}
	m.vars["CURDIR"] = mkVar{val: dir, known: true}
	m.vars["MAKE"] = mkVar{val: name, known: true}
	if dry {
		m.vars["MAKE"] = mkVar{val: name + " -n", known: true} // a sub-make inherits -n
	}
	m.vars["MAKECMDGOALS"] = mkVar{val: strings.Join(goals, " "), known: true}
	m.read = func(p string) ([]byte, bool) {
		sub := s.clone()
		sub.cwd = dir
		d, ok := a.readScript(sub, p, name)
		if a.found != nil {
			m.denied = true
		}
		return d, ok
	}
	where := files[0]
	for _, f := range files {
		var data []byte
		if f == "-" || f == "/dev/stdin" {
			if !in.known {
				a.deny(CodeBlind, name+" reads a makefile from standard input the guard cannot see")
				return
			}
			data = []byte(in.text)
		} else {
			p := f
			if !strings.HasPrefix(p, "/") && !isUnknown(p) {
				p = path.Join(dir, p)
			}
			if f == files[0] {
				where = p
			}
			m.remake = append(m.remake, strings.TrimPrefix(p, dir+"/"))
			d, ok := m.read(p)
			if !ok {
				if a.found != nil {
					return
				}
				continue // make stops: no such makefile
			}
			data = d
		}
		m.parse(string(data))
		if a.found != nil {
			return
		}
		if m.blind != "" {
			a.deny(CodeBlind, name+" "+m.blind+" (in "+clip(printable(f))+")")
			return
		}
	}
	recipes := m.toRun(goals, m.remake)
	if m.blind != "" {
		a.deny(CodeBlind, name+" "+m.blind)
		return
	}
	sh := m.get("SHELL", nil, 0)
	if base := path.Base(sh); !shellNames[base] {
		if lang, ok := interpreterName(base); ok && !isUnknown(sh) {
			for _, r := range recipes {
				a.inlineCode(s, lang, r.text)
			}
			return
		}
		a.deny(CodeBlind, name+" runs its recipes with SHELL="+clip(printable(sh))+", which the guard cannot check")
		return
	}
	check := func(what, src string) {
		sub := s.clone()
		sub.depth++
		sub.cwd = dir
		a.script(sub, src)
		if a.found != nil {
			a.found.Reason += " (" + what + " in " + clip(printable(where)) + ")"
		}
	}
	for i := 0; i < len(m.shells) && a.found == nil; i++ {
		check("a $(shell …) of the makefile", m.shells[i])
	}
	for _, r := range recipes {
		if a.found != nil {
			return
		}
		if dry && !r.always {
			continue
		}
		check("the recipe of "+r.target, r.text)
	}
}

func fileExists(p string) bool {
	_, err := readRegular(p, 0)
	return err == nil || err == errTooLarge || err == errNotRegular
}

// parse reads one makefile's text.
func (m *makefile) parse(text string) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var cur []*mkRule // the rules whose recipe lines follow
	cond := 0
	var defining string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		recipe := strings.HasPrefix(line, "\t") && cur != nil && defining == ""
		// backslash-newline continues a line
		for strings.HasSuffix(line, "\\") && !strings.HasSuffix(line, "\\\\") && i+1 < len(lines) {
			i++
			nxt := lines[i]
			if recipe {
				line = line[:len(line)-1] + strings.TrimPrefix(nxt, "\t")
			} else {
				line = line[:len(line)-1] + " " + strings.TrimLeft(nxt, " \t")
			}
		}
		if defining != "" {
			if w := strings.Fields(line); len(w) > 0 && w[0] == "endef" {
				defining = ""
			}
			continue
		}
		if recipe {
			for _, r := range cur {
				r.recipe = append(r.recipe, line[1:])
			}
			continue
		}
		t := stripMakeComment(line)
		trimmed := strings.TrimSpace(t)
		if trimmed == "" {
			continue
		}
		w := strings.Fields(trimmed)
		switch w[0] {
		case "ifeq", "ifneq", "ifdef", "ifndef":
			cond++
			continue
		case "else":
			continue
		case "endif":
			if cond > 0 {
				cond--
			}
			continue
		case "include", "-include", "sinclude":
			cur = nil
			if !m.include(strings.TrimSpace(trimmed[len(w[0]):])) {
				return
			}
			continue
		case "define":
			if len(w) > 1 {
				m.vars[m.expand(w[1], nil, 0)] = mkVar{}
			}
			defining = "define"
			continue
		case "export", "unexport", "override", "private":
			if len(w) == 1 {
				continue
			}
			trimmed = strings.TrimSpace(trimmed[len(w[0]):])
			if w[0] == "unexport" || (w[0] == "export" && !strings.ContainsAny(trimmed, "=:")) {
				continue
			}
		case "vpath":
			continue
		}
		if m.assignment(trimmed, cond > 0) {
			cur = nil
			continue
		}
		cur = m.rule(trimmed, cond > 0)
	}
}

// maxMakeIncludes bounds the makefiles one make reads through include.
const maxMakeIncludes = 16

// include reads the makefiles an include line names; it returns false
// (with m.blind or m.denied set) when the guard cannot follow them. A
// makefile that does not exist is one make tries to remake: a goal.
func (m *makefile) include(names string) bool {
	for _, f := range strings.Fields(m.expand(names, nil, 0)) {
		m.includes++
		if m.read == nil || m.includes > maxMakeIncludes || isUnknown(f) || strings.ContainsAny(f, "*?[") {
			m.blind = "reads another makefile (include " + clip(printable(names)) + ") that the guard cannot follow"
			return false
		}
		p := f
		if !strings.HasPrefix(p, "/") {
			p = path.Join(m.dir, p)
		}
		m.remake = append(m.remake, f)
		data, ok := m.read(p)
		if m.denied {
			return false
		}
		if !ok {
			continue
		}
		m.parse(string(data))
		if m.blind != "" || m.denied {
			return false
		}
	}
	return true
}

// stripMakeComment drops a comment (an unescaped #) from a line.
func stripMakeComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] != '\\') {
			return line[:i]
		}
	}
	return line
}

// findOutside returns the index of the first byte of chars in s outside
// $(…) and ${…}, or -1.
func findOutside(s, chars string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$' && i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{'):
			depth++
			i++
		case depth > 0 && (c == '(' || c == '{'):
			depth++
		case depth > 0 && (c == ')' || c == '}'):
			depth--
		case depth == 0 && strings.IndexByte(chars, c) >= 0:
			return i
		}
	}
	return -1
}

// assignment applies a variable assignment line and reports whether the
// line was one.
func (m *makefile) assignment(line string, inCond bool) bool {
	j := findOutside(line, ":=")
	if j < 0 {
		return false
	}
	op, nameEnd, valStart := "=", j, j+1
	if line[j] == ':' {
		switch {
		case strings.HasPrefix(line[j:], ":::="):
			op, valStart = ":=", j+4
		case strings.HasPrefix(line[j:], "::="):
			op, valStart = ":=", j+3
		case strings.HasPrefix(line[j:], ":="):
			op, valStart = ":=", j+2
		default:
			return false // a rule
		}
	} else if j > 0 && strings.IndexByte("+?!", line[j-1]) >= 0 {
		op, nameEnd = line[j-1:j]+"=", j-1
	}
	name := strings.TrimSpace(m.expand(line[:nameEnd], nil, 0))
	value := strings.TrimLeft(line[valStart:], " \t")
	if name == "" || strings.ContainsAny(name, " \t") {
		return true
	}
	if name == ".RECIPEPREFIX" {
		m.blind = "sets .RECIPEPREFIX, which the guard does not follow"
		return true
	}
	if _, ok := m.overrides[name]; ok {
		return true // the command line's value wins
	}
	old, had := m.vars[name]
	var v mkVar
	switch op {
	case "=":
		v = mkVar{val: value, known: true, recursive: true}
	case ":=":
		v = mkVar{val: m.expand(value, nil, 0), known: true}
	case "+=":
		switch {
		case !had:
			v = mkVar{val: value, known: true, recursive: true}
		case old.recursive:
			v = mkVar{val: old.val + " " + value, known: old.known, recursive: true}
		default:
			v = mkVar{val: old.val + " " + m.expand(value, nil, 0), known: old.known}
		}
	case "?=":
		if had {
			return true
		}
		if e, ok := m.env(name); ok {
			v = mkVar{val: e, known: !isUnknown(e)}
		} else {
			v = mkVar{val: value, known: true, recursive: true}
		}
	case "!=":
		m.addShell(m.expand(value, nil, 0))
		v = mkVar{}
	}
	if inCond {
		// set in one branch of a conditional the guard does not evaluate
		m.expand(value, nil, 0) // its $(shell …) still counts
		v = mkVar{}
	}
	m.vars[name] = v
	return true
}

// rule records a rule line and returns it (its recipe lines follow).
func (m *makefile) rule(line string, inCond bool) []*mkRule {
	j := findOutside(line, ":")
	if j < 0 {
		m.expand(line, nil, 0) // $(info …), $(eval …) at the top level
		return nil
	}
	targetsText := line[:j]
	rest := strings.TrimPrefix(line[j+1:], ":") // a double-colon rule
	inline, hasInline := "", false
	if k := findOutside(rest, ";"); k >= 0 {
		inline, hasInline = strings.TrimLeft(rest[k+1:], " \t"), true
		rest = rest[:k]
	}
	if k := findOutside(rest, "="); k >= 0 {
		// a target-specific variable: its value holds for that target's
		// recipes only; the guard does not know which one applies
		nameEnd := k
		if k > 0 && strings.IndexByte("+?!:", rest[k-1]) >= 0 {
			nameEnd = k - 1
		}
		f := strings.Fields(m.expand(rest[:nameEnd], nil, 0))
		m.expand(rest[k+1:], nil, 0)
		if len(f) > 0 {
			m.vars[f[len(f)-1]] = mkVar{}
		}
		return nil
	}
	prereqs := func(text string) []string {
		var out []string
		for _, p := range strings.Fields(m.expand(text, nil, 0)) {
			if strings.Contains(p, "$") {
				p = unknown // .SECONDEXPANSION expands it again
			}
			if p != "|" {
				out = append(out, p)
			}
		}
		return out
	}
	targets := strings.Fields(m.expand(targetsText, nil, 0))
	if k := findOutside(rest, ":"); k >= 0 {
		// a static pattern rule (objs: %.o: %.c): one rule per target,
		// its prerequisites made from the target's stem
		tpat := strings.TrimSpace(m.expand(rest[:k], nil, 0))
		ppats := prereqs(rest[k+1:])
		var rules []*mkRule
		for _, t := range targets {
			r := &mkRule{targets: []string{t}}
			stem, ok := matchStem(tpat, t)
			for _, p := range ppats {
				if !ok {
					p = unknown
				}
				r.prereqs = append(r.prereqs, strings.Replace(p, "%", stem, 1))
			}
			if hasInline {
				r.recipe = append(r.recipe, inline)
			}
			if m.first == "" && !inCond && (!strings.HasPrefix(t, ".") || strings.Contains(t, "/")) {
				m.first = t
			}
			m.rules = append(m.rules, r)
			rules = append(rules, r)
		}
		return rules
	}
	r := &mkRule{targets: targets, prereqs: prereqs(rest)}
	for _, t := range r.targets {
		if strings.Contains(t, "%") {
			r.pattern = true
		}
	}
	if hasInline {
		r.recipe = append(r.recipe, inline)
	}
	for _, t := range r.targets {
		if t == ".ONESHELL" {
			m.oneShell = true
		}
	}
	if m.first == "" && len(r.targets) > 0 && !r.pattern && !inCond {
		if t := r.targets[0]; !strings.HasPrefix(t, ".") || strings.Contains(t, "/") {
			m.first = t
		}
	}
	m.rules = append(m.rules, r)
	return []*mkRule{r}
}

func (m *makefile) addShell(cmd string) {
	if !m.seenShell[cmd] {
		m.seenShell[cmd] = true
		m.shells = append(m.shells, cmd)
	}
}

// expand expands make variable references in text; what the guard cannot
// know becomes the unknown marker.
func (m *makefile) expand(text string, auto map[string]string, depth int) string {
	if depth > 16 {
		return unknown
	}
	if !strings.Contains(text, "$") {
		return text
	}
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '$' || i+1 >= len(text) {
			b.WriteByte(c)
			continue
		}
		n := text[i+1]
		switch n {
		case '$':
			b.WriteByte('$')
			i++
		case '(', '{':
			closer := byte(')')
			if n == '{' {
				closer = '}'
			}
			level, j := 1, i+2
			for ; j < len(text); j++ {
				if text[j] == n {
					level++
				} else if text[j] == closer {
					level--
					if level == 0 {
						break
					}
				}
			}
			if j >= len(text) {
				b.WriteString(unknown)
				return b.String()
			}
			b.WriteString(m.ref(text[i+2:j], auto, depth))
			i = j
		default:
			b.WriteString(m.ref(string(n), auto, depth))
			i++
		}
	}
	return b.String()
}

// ref expands one reference: a function call or a variable.
func (m *makefile) ref(inner string, auto map[string]string, depth int) string {
	m.steps++
	if m.steps > maxMakeSteps {
		if m.blind == "" {
			m.blind = "expands more variables than the guard follows"
		}
		return unknown
	}
	if k := strings.IndexAny(inner, " \t"); k > 0 {
		fn, arg := inner[:k], strings.TrimLeft(inner[k+1:], " \t")
		switch fn {
		case "shell":
			m.addShell(m.expand(arg, auto, depth+1))
			return unknown
		case "eval", "file", "guile", "load":
			if m.blind == "" {
				m.blind = "uses $(" + fn + " …), which the guard does not follow"
			}
			return unknown
		case "strip":
			return strings.Join(strings.Fields(m.expand(arg, auto, depth+1)), " ")
		}
		m.expand(arg, auto, depth+1) // a $(shell …) inside still runs
		return unknown
	}
	if k := findOutside(inner, ":"); k >= 0 {
		// a substitution reference $(VAR:.c=.o)
		m.expand(inner, auto, depth+1)
		return unknown
	}
	name := m.expand(inner, auto, depth+1)
	if isUnknown(name) {
		return unknown
	}
	return m.get(name, auto, depth)
}

// get returns a variable's value, unknown when the guard cannot know it.
func (m *makefile) get(name string, auto map[string]string, depth int) string {
	if auto != nil {
		if v, ok := auto[name]; ok {
			return v
		}
		if len(name) == 2 && (name[1] == 'D' || name[1] == 'F') {
			if v, ok := auto[name[:1]]; ok && !isUnknown(v) {
				if name[1] == 'D' {
					return path.Dir(v)
				}
				return path.Base(v)
			}
		}
	}
	if v, ok := m.overrides[name]; ok {
		return v
	}
	if m.envWins && name != "SHELL" {
		if v, ok := m.env(name); ok {
			return v
		}
	}
	if v, ok := m.vars[name]; ok {
		if !v.known {
			return unknown
		}
		if v.recursive {
			return m.expand(v.val, auto, depth+1)
		}
		return v.val
	}
	if v, ok := m.env(name); ok && name != "SHELL" { // make never takes SHELL from the environment
		return v
	}
	if v, ok := makeDefaults[name]; ok {
		return v
	}
	return unknown
}

// mkRecipe is a recipe (or one line of it) to check.
type mkRecipe struct {
	target string
	text   string
	always bool // runs under make -n too (+ or $(MAKE))
}

// toRun returns the recipes of the goals and the targets they reach.
func (m *makefile) toRun(goals, makefiles []string) []mkRecipe {
	if len(goals) == 0 {
		if _, set := m.vars[".DEFAULT_GOAL"]; set {
			goals = strings.Fields(m.get(".DEFAULT_GOAL", nil, 0))
		} else if m.first != "" {
			goals = []string{m.first}
		}
	}
	var out []mkRecipe
	all := false
	seen := map[string]bool{}
	queue := append(append([]string(nil), makefiles...), goals...)
	for len(queue) > 0 && !all {
		t := queue[0]
		queue = queue[1:]
		if seen[t] {
			continue
		}
		seen[t] = true
		if isUnknown(t) || len(seen) > maxMakeTargets {
			all = true
			break
		}
		found := false
		for _, r := range m.rules {
			if r.pattern || !contains(r.targets, t) {
				continue
			}
			found = found || len(r.recipe) > 0
			out = append(out, m.recipes(r, t, "")...)
			queue = append(queue, r.prereqs...)
		}
		if found {
			continue
		}
		for _, r := range m.rules {
			if !r.pattern {
				continue
			}
			for _, p := range r.targets {
				stem, ok := matchStem(p, t)
				if !ok {
					continue
				}
				found = true
				sub := &mkRule{targets: r.targets, recipe: r.recipe}
				for _, q := range r.prereqs {
					sub.prereqs = append(sub.prereqs, strings.Replace(q, "%", stem, 1))
				}
				out = append(out, m.recipes(sub, t, stem)...)
				queue = append(queue, sub.prereqs...)
				break
			}
		}
		if !found {
			for _, r := range m.rules {
				if contains(r.targets, ".DEFAULT") {
					out = append(out, m.recipes(r, t, "")...)
				}
			}
		}
	}
	if all {
		out = out[:0]
		for _, r := range m.rules {
			if len(r.recipe) > 0 && len(r.targets) > 0 {
				out = append(out, m.recipes(r, r.targets[0], "")...)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// matchStem matches a target against a pattern with one %.
func matchStem(pattern, t string) (string, bool) {
	pre, suf, ok := strings.Cut(pattern, "%")
	if !ok || len(t) < len(pre)+len(suf) || !strings.HasPrefix(t, pre) || !strings.HasSuffix(t, suf) {
		return "", false
	}
	return t[len(pre) : len(t)-len(suf)], true
}

// recipes expands a rule's recipe for target t: one shell command line
// each, or one script under .ONESHELL.
func (m *makefile) recipes(r *mkRule, t, stem string) []mkRecipe {
	if len(r.recipe) == 0 {
		return nil
	}
	auto := map[string]string{"@": t, "*": stem, "%": "", "<": "", "^": strings.Join(r.prereqs, " "),
		"+": strings.Join(r.prereqs, " "), "?": strings.Join(r.prereqs, " "), "|": ""}
	if len(r.prereqs) > 0 {
		auto["<"] = r.prereqs[0]
	}
	var out []mkRecipe
	var one []string
	always := false
	for _, raw := range r.recipe {
		line := strings.TrimLeft(raw, " \t")
		plus := false
		for len(line) > 0 && strings.IndexByte("@-+", line[0]) >= 0 {
			plus = plus || line[0] == '+'
			line = strings.TrimLeft(line[1:], " \t")
		}
		rec := plus || strings.Contains(line, "$(MAKE)") || strings.Contains(line, "${MAKE}")
		text := m.expand(line, auto, 0)
		if m.oneShell {
			one = append(one, text)
			always = always || rec
			continue
		}
		out = append(out, mkRecipe{target: t, text: text, always: rec})
	}
	if m.oneShell {
		out = append(out, mkRecipe{target: t, text: strings.Join(one, "\n"), always: always})
	}
	return out
}
