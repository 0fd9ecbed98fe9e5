package guard

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Limits of one analysis: a script that needs more is denied (the guard
// fails closed rather than give up half way).
const (
	maxDepth    = 12   // nested sh -c, eval, functions, aliases
	maxCommands = 4000 // simple commands checked
	maxScript   = 1 << 20
	maxLoopVals = 32 // values a for loop is unrolled over
)

var errBudget = errors.New("guard: the command is too complex to check")

// analyzer checks one shell script. The first denial found wins.
type analyzer struct {
	paths
	commands int
	found    *Decision
	// lastFields are the expanded words of the command being checked
	// (to tell a glob aimed at an answer file from a broad one).
	lastFields map[string]bool
	// procs are the process substitutions of the command being checked,
	// by the /dev/fd path they expand to.
	procs map[string]input
	// quietRun is set when the command being checked is an interpreter
	// running a script file whose code neither writes files nor runs
	// commands: its arguments are not mentions of files it may write.
	quietRun bool
	// startCwd is the working directory the check started in ("" when
	// the caller gave none).
	startCwd string
	// inBlind is set while a blind command is tried as each command it
	// could be (no second level of guessing).
	inBlind bool
}

// shState is what the script has set up so far: variables, the working
// directory, functions, aliases and positional parameters.
type shState struct {
	vars        map[string]expand.Variable
	cwd         string // absolute; "" when unknown
	funcs       map[string]*syntax.Stmt
	aliases     map[string]string
	params      []string
	paramsKnown bool
	depth       int
}

func (s *shState) clone() *shState {
	c := *s
	c.vars = make(map[string]expand.Variable, len(s.vars))
	for k, v := range s.vars {
		c.vars[k] = v
	}
	c.funcs = make(map[string]*syntax.Stmt, len(s.funcs))
	for k, v := range s.funcs {
		c.funcs[k] = v
	}
	c.aliases = make(map[string]string, len(s.aliases))
	for k, v := range s.aliases {
		c.aliases[k] = v
	}
	return &c
}

var unknownVar = expand.Variable{Set: true, Kind: expand.String, Str: unknown}

func strVar(s string) expand.Variable { return expand.Variable{Set: true, Kind: expand.String, Str: s} }

// environ is the expand.Environ of a shState: variables the script set are
// known, HOME and PWD are known, everything else is unknown.
type environ struct {
	s *shState
	a *analyzer
}

func (e environ) Get(name string) expand.Variable {
	if v, ok := e.s.vars[name]; ok {
		return v
	}
	switch name {
	case "PWD":
		if e.s.cwd != "" {
			return strVar(e.s.cwd)
		}
	case "HOME":
		if e.a.home != "" {
			return strVar(e.a.home)
		}
	case "IFS":
		return strVar(" \t\n")
	case "@", "*":
		if e.s.paramsKnown {
			return expand.Variable{Set: true, Kind: expand.Indexed, List: e.s.params}
		}
	case "#":
		if e.s.paramsKnown {
			return strVar(strconv.Itoa(len(e.s.params)))
		}
	case "0":
		return strVar("bash")
	}
	if n, err := strconv.Atoi(name); err == nil && n > 0 && e.s.paramsKnown {
		if n <= len(e.s.params) {
			return strVar(e.s.params[n-1])
		}
		return expand.Variable{}
	}
	return unknownVar
}

func (e environ) Each(fn func(string, expand.Variable) bool) {
	for k, v := range e.s.vars {
		if !fn(k, v) {
			return
		}
	}
}

// fakeEntry is a directory entry of the guard's fake listings.
type fakeEntry string

func (f fakeEntry) Name() string               { return string(f) }
func (f fakeEntry) IsDir() bool                { return true }
func (f fakeEntry) Type() fs.FileMode          { return fs.ModeDir }
func (f fakeEntry) Info() (fs.FileInfo, error) { return f, nil }
func (f fakeEntry) Size() int64                { return 0 }
func (f fakeEntry) Mode() fs.FileMode          { return fs.ModeDir | 0o755 }
func (f fakeEntry) ModTime() time.Time         { return time.Time{} }
func (f fakeEntry) Sys() any                   { return nil }

// baseEntries are the names of every fake directory listing.
var baseEntries = func() []fs.DirEntry {
	e := []fs.DirEntry{fakeEntry(".git"), fakeEntry(everything)}
	for p, t := range probeTwins {
		e = append(e, fakeEntry(p), fakeEntry(t))
	}
	return e
}()

// config returns the expansion config for words of one command. Globs
// are matched against a fake listing: ".git", the marker that only a
// match-anything glob matches, the anti-cheat probes and their twins, and
// the literal names written in the words themselves.
func (a *analyzer) config(s *shState, words []*syntax.Word) *expand.Config {
	entries := baseEntries
	for _, w := range words {
		for _, part := range w.Parts {
			if l, ok := part.(*syntax.Lit); ok {
				for _, seg := range strings.Split(l.Value, "/") {
					if seg != "" && !strings.ContainsAny(seg, "*?[") {
						if len(entries) == len(baseEntries) {
							entries = append([]fs.DirEntry(nil), baseEntries...)
						}
						entries = append(entries, fakeEntry(seg))
					}
				}
			}
		}
	}
	return &expand.Config{
		Env:      environ{s, a},
		ReadDir2: func(string) ([]fs.DirEntry, error) { return entries, nil },
		CmdSubst: func(w io.Writer, cs *syntax.CmdSubst) error {
			out, ok := a.staticOutput(s, cs.Stmts)
			if !ok {
				out = unknown
			}
			io.WriteString(w, out)
			return nil
		},
		ProcSubst: func(ps *syntax.ProcSubst) (string, error) {
			name := "/dev/fd/" + strconv.Itoa(63-len(a.procs))
			out, ok := a.staticOutput(s, ps.Stmts)
			if a.procs == nil {
				a.procs = map[string]input{}
			}
			a.procs[name] = input{present: true, known: ok, text: out, from: "a process substitution"}
			return name, nil
		},
	}
}

// fields expands words as bash would; a word that cannot be expanded
// becomes one unknown field.
func (a *analyzer) fields(s *shState, words []*syntax.Word) []string {
	if len(words) == 0 {
		return nil
	}
	cfg := a.config(s, words)
	var out []string
	for _, w := range words {
		f, err := expand.Fields(cfg, w)
		if err != nil {
			out = append(out, unknown)
			continue
		}
		out = append(out, f...)
	}
	return out
}

// literal expands one word without splitting or globbing (assignment
// values, here-strings).
func (a *analyzer) literal(s *shState, w *syntax.Word) string {
	if w == nil {
		return ""
	}
	cfg := a.config(s, nil)
	cfg.ReadDir2 = nil
	v, err := expand.Literal(cfg, w)
	if err != nil {
		return unknown
	}
	return v
}

func (a *analyzer) deny(code, reason string) {
	if a.found == nil {
		a.found = &Decision{Deny: true, Code: code, Reason: code + ": " + reason}
	}
}

// parse parses src as a bash script.
func parse(src string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
}

// script analyses src as a shell script run in state s.
func (a *analyzer) script(s *shState, src string) {
	if a.found != nil {
		return
	}
	if s.depth > maxDepth || len(src) > maxScript {
		a.deny(CodeBlind, "the command nests shells, eval or functions too deeply to check")
		return
	}
	f, err := parse(src)
	if err != nil {
		// Bash may still run the part before the error: check what the
		// lexical fallback sees, and deny what cannot be parsed at all
		// when it holds a risky word.
		a.lexical(src)
		if a.found == nil && risky(src) {
			a.deny(CodeBlind, "the guard cannot parse this command ("+clip(err.Error())+") and it holds a destructive word")
		}
		return
	}
	a.stmts(s, f.Stmts)
}

func (a *analyzer) stmts(s *shState, list []*syntax.Stmt) {
	for _, st := range list {
		if a.found != nil {
			return
		}
		a.stmt(s, st, stdinNone)
	}
}

// input is what a command reads on its standard input.
type input struct {
	present bool
	known   bool
	text    string
	from    string // the producing command's name, if a pipe
	file    string // the file redirected in with <, if any
}

var stdinNone = input{}

func (a *analyzer) stmt(s *shState, st *syntax.Stmt, in input) {
	if a.found != nil || st == nil {
		return
	}
	a.commands++
	if a.commands > maxCommands {
		a.deny(CodeBlind, errBudget.Error())
		return
	}
	// Redirections: writes onto protected files, reads of answer files,
	// here-documents as standard input.
	for _, r := range st.Redirs {
		a.nested(s, r.Word)
		a.nested(s, r.Hdoc)
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = input{present: true, known: true, text: a.heredoc(s, r)}
		case syntax.WordHdoc:
			in = input{present: true, known: true, text: a.literal(s, r.Word) + "\n"}
		case syntax.RdrIn:
			t := a.literal(s, r.Word)
			if a.anti(s, t) {
				return
			}
			in = input{present: true, from: "file " + t, file: t}
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut, syntax.RdrClob:
			t := a.literal(s, r.Word)
			if why := a.writeThrough(s.cwd, t); why != "" {
				a.deny(CodeDestructive, "the redirection onto "+printable(t)+" is blocked: "+why)
				return
			}
			if a.anti(s, t) {
				return
			}
			a.recordWrite(s, t)
		case syntax.DplIn:
			if t := a.literal(s, r.Word); t != "-" && t != "0" {
				in = input{present: true, from: "file descriptor " + printable(t)}
			}
		case syntax.DplOut:
			t := a.literal(s, r.Word)
			if strings.Trim(t, "0123456789-") != "" { // >&file is a file redirection
				if why := a.writeThrough(s.cwd, t); why != "" {
					a.deny(CodeDestructive, "the redirection onto "+printable(t)+" is blocked: "+why)
					return
				}
			}
		}
	}
	a.command(s, st.Cmd, in)
}

// heredoc returns a here-document's body, expanded unless its delimiter
// is quoted.
func (a *analyzer) heredoc(s *shState, r *syntax.Redirect) string {
	if r.Hdoc == nil {
		return ""
	}
	quoted := false
	if r.Word != nil {
		for _, p := range r.Word.Parts {
			switch p := p.(type) {
			case *syntax.SglQuoted, *syntax.DblQuoted:
				quoted = true
			case *syntax.Lit:
				if strings.Contains(p.Value, `\`) {
					quoted = true
				}
			}
		}
	}
	if quoted {
		var b strings.Builder
		for _, p := range r.Hdoc.Parts {
			if l, ok := p.(*syntax.Lit); ok {
				b.WriteString(l.Value)
			}
		}
		return b.String()
	}
	cfg := a.config(s, nil)
	cfg.ReadDir2 = nil
	out, err := expand.Document(cfg, r.Hdoc)
	if err != nil {
		return unknown
	}
	return out
}

// nested checks the commands inside a word's command and process
// substitutions: they run whatever the outer command is.
func (a *analyzer) nested(s *shState, w syntax.Node) {
	if w == nil || a.found != nil {
		return
	}
	switch n := w.(type) {
	case *syntax.Word:
		if n == nil {
			return
		}
	case *syntax.ArrayExpr:
		if n == nil {
			return
		}
	case *syntax.Stmt:
		if n == nil {
			return
		}
	}
	syntax.Walk(w, func(n syntax.Node) bool {
		if a.found != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.CmdSubst:
			a.stmts(s.clone(), n.Stmts)
			return false
		case *syntax.ProcSubst:
			a.stmts(s.clone(), n.Stmts)
			return false
		}
		return true
	})
}

func (a *analyzer) command(s *shState, c syntax.Command, in input) {
	if a.found != nil || c == nil {
		return
	}
	switch c := c.(type) {
	case *syntax.CallExpr:
		a.call(s, c, in)
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			// Each side of a pipe runs in a subshell.
			a.stmt(s.clone(), c.X, in)
			out, known := a.staticOutput(s, []*syntax.Stmt{c.X})
			a.stmt(s.clone(), c.Y, input{present: true, known: known, text: out, from: stmtName(a, s, c.X)})
			return
		}
		a.stmt(s, c.X, in)
		a.stmt(s, c.Y, in)
	case *syntax.Subshell:
		a.stmts(s.clone(), c.Stmts)
	case *syntax.Block:
		a.stmts(s, c.Stmts)
	case *syntax.IfClause:
		for cl := c; cl != nil; cl = cl.Else {
			a.stmts(s, cl.Cond)
			a.stmts(s, cl.Then)
		}
	case *syntax.WhileClause:
		a.stmts(s, c.Cond)
		a.stmts(s, c.Do)
	case *syntax.ForClause:
		switch l := c.Loop.(type) {
		case *syntax.WordIter:
			for _, w := range l.Items {
				a.nested(s, w)
			}
			vals := a.fields(s, l.Items)
			if !l.InPos.IsValid() {
				vals = s.params
				if !s.paramsKnown {
					vals = []string{unknown}
				}
			}
			if len(vals) > maxLoopVals || len(vals) == 0 {
				vals = []string{unknown}
			}
			for _, v := range vals {
				if l.Name != nil {
					s.vars[l.Name.Value] = strVar(v)
				}
				a.stmts(s, c.Do)
			}
		case *syntax.CStyleLoop:
			a.stmts(s, c.Do)
		}
	case *syntax.CaseClause:
		a.nested(s, c.Word)
		for _, it := range c.Items {
			a.stmts(s, it.Stmts)
		}
	case *syntax.FuncDecl:
		if c.Name == nil {
			a.stmt(s, c.Body, in) // an anonymous function runs at once
			return
		}
		s.funcs[c.Name.Value] = c.Body
	case *syntax.DeclClause:
		a.decl(s, c)
	case *syntax.TimeClause:
		a.stmt(s, c.Stmt, in)
	case *syntax.CoprocClause:
		a.stmt(s.clone(), c.Stmt, in)
	case *syntax.LetClause, *syntax.ArithmCmd, *syntax.TestClause:
		a.nested(s, c)
	case *syntax.TestDecl:
		a.stmt(s, c.Body, in)
	default:
		a.nested(s, c)
	}
}

// stmtName is the command name a statement starts with, for messages.
func stmtName(a *analyzer, s *shState, st *syntax.Stmt) string {
	if st == nil {
		return ""
	}
	if c, ok := st.Cmd.(*syntax.CallExpr); ok && len(c.Args) > 0 {
		f := a.fields(s.clone(), c.Args[:1])
		if len(f) > 0 {
			return path.Base(f[0])
		}
	}
	return ""
}

func (a *analyzer) assign(s *shState, as *syntax.Assign) {
	if as == nil || as.Name == nil {
		return
	}
	a.nested(s, as.Value)
	a.nested(s, as.Array)
	name := as.Name.Value
	switch {
	case as.Array != nil:
		var list []string
		for _, e := range as.Array.Elems {
			if e.Value != nil {
				list = append(list, a.fields(s, []*syntax.Word{e.Value})...)
			}
		}
		if as.Append {
			if old, ok := s.vars[name]; ok && old.Kind == expand.Indexed {
				list = append(append([]string(nil), old.List...), list...)
			}
		}
		s.vars[name] = expand.Variable{Set: true, Kind: expand.Indexed, List: list}
	case as.Index != nil:
		s.vars[name] = unknownVar
	case as.Naked:
		if _, ok := s.vars[name]; !ok {
			s.vars[name] = unknownVar
		}
	default:
		v := a.literal(s, as.Value)
		if as.Append {
			if old, ok := s.vars[name]; ok && old.Kind == expand.String {
				v = old.Str + v
			} else {
				v = unknown + v
			}
		}
		s.vars[name] = strVar(v)
	}
}

func (a *analyzer) decl(s *shState, c *syntax.DeclClause) {
	nameref := false
	for _, as := range c.Args {
		if as.Name == nil { // an option or a name built at run time
			a.nested(s, as.Value)
			if o := a.literal(s, as.Value); strings.HasPrefix(o, "-") && strings.Contains(o, "n") {
				nameref = true // declare -n: a reference to another variable
			}
			continue
		}
		a.assign(s, as)
		if nameref {
			// the guard does not follow references: the value is unknown
			s.vars[as.Name.Value] = unknownVar
		}
	}
}

// staticOutput returns what a list of statements prints when that is
// known without running anything: echo, printf, cat of a here-document,
// pwd and a few others.
func (a *analyzer) staticOutput(s *shState, list []*syntax.Stmt) (string, bool) {
	if len(list) != 1 {
		return "", false
	}
	st := list[0]
	c, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(c.Args) == 0 {
		if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
			return "", false
		}
		return "", false
	}
	f := a.fields(s.clone(), c.Args)
	if len(f) == 0 {
		return "", false
	}
	var in *string
	for _, r := range st.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			t := a.heredoc(s, r)
			in = &t
		case syntax.WordHdoc:
			t := a.literal(s, r.Word) + "\n"
			in = &t
		}
	}
	var out string
	switch f[0] {
	case "echo":
		args := f[1:]
		nl := true
		for len(args) > 0 && (args[0] == "-n" || args[0] == "-e" || args[0] == "-E" || args[0] == "-ne" || args[0] == "-en") {
			if strings.Contains(args[0], "n") {
				nl = false
			}
			args = args[1:]
		}
		out = strings.Join(args, " ")
		if nl {
			out += "\n"
		}
	case "printf":
		if len(f) < 2 {
			return "", false
		}
		o, _, err := expand.Format(a.config(s, nil), f[1], f[2:])
		if err != nil {
			return "", false
		}
		out = o
	case "pwd":
		if s.cwd == "" {
			return "", false
		}
		out = s.cwd + "\n"
	case "cat":
		if len(f) != 1 || in == nil {
			return "", false
		}
		out = *in
	case "basename", "dirname":
		if len(f) != 2 {
			return "", false
		}
		if f[0] == "basename" {
			out = path.Base(f[1]) + "\n"
		} else {
			out = path.Dir(f[1]) + "\n"
		}
	case "git":
		switch {
		case len(f) != 3 || f[1] != "rev-parse" || a.project == "":
			return "", false
		case f[2] == "--show-toplevel":
			out = a.project + "\n"
		case f[2] == "--git-dir" || f[2] == "--absolute-git-dir" || f[2] == "--git-common-dir":
			out = a.project + "/.git\n" // the repository's own (git prints it relative at the top)
		default:
			return "", false
		}
	case "readlink", "realpath":
		// readlink -f / realpath: the physical path, resolved as the
		// guard resolves it
		ops := skipOpts(f[1:], "", nil)
		if len(ops) != 1 || (f[0] == "readlink" && len(f) == 2) {
			return "", false
		}
		r, ok := a.fs.real(s.cwd, ops[0], true)
		if !ok {
			return "", false
		}
		out = r + "\n"
	default:
		return "", false
	}
	if isUnknown(out) {
		return "", false
	}
	// command substitution drops trailing newlines; a pipe keeps them
	return out, true
}

// anti denies a read or write of an answer or grading file.
func (a *analyzer) anti(s *shState, p string) bool {
	if p == "" || strings.Contains(p, everything) {
		return false
	}
	if a.antiCheat(s.cwd, p) && !a.broadProbe(p) {
		a.deny(CodeAntiCheat, "the command touches "+clip(printable(p))+", an answer, hidden-test or grading file")
		return true
	}
	return false
}

// broadProbe reports whether p is a probe name of the fake listing that
// appears only because a broad glob matched it (then its twin matched
// too, and p is in the lastFields set).
func (a *analyzer) broadProbe(p string) bool {
	if a.lastFields == nil {
		return false
	}
	segs := strings.Split(p, "/")
	hit := false
	for i, seg := range segs {
		if t, ok := probeTwins[seg]; ok {
			segs[i] = t
			hit = true
		}
	}
	return hit && a.lastFields[strings.Join(segs, "/")]
}

// lexical is the fallback for input the parser rejects: split at shell
// operators, drop quotes and check each simple command.
func (a *analyzer) lexical(src string) {
	for _, view := range []string{src, NormalizeCommand(src)} {
		for _, words := range splitCommands(view) {
			if a.found != nil {
				return
			}
			s := newState(a, "")
			a.run(s, words, stdinNone, nil)
		}
	}
}

// risky reports whether a command holds a word that could destroy work,
// for input that cannot be parsed.
func risky(src string) bool {
	if strings.Contains(src, ">") || strings.Contains(src, ".git") {
		return true
	}
	words := strings.FieldsFunc(strings.ToLower(src), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	})
	for _, w := range words {
		switch w {
		case "rm", "git", "reset", "clean", "push", "eval", "sh", "bash", "zsh", "find", "dd", "mv", "shred", "truncate",
			"xargs", "python", "python3", "perl", "node", "ruby", "rmdir", "unlink", "chmod", "chown", "rsync", "tee", "cp",
			"exec", "source", "sudo", "-rf", "-fr", "--hard", "--force", "-delete":
			return true
		}
	}
	return false
}

func newState(a *analyzer, cwd string) *shState {
	return &shState{vars: map[string]expand.Variable{}, cwd: cwd, funcs: map[string]*syntax.Stmt{},
		aliases: map[string]string{}}
}

// NormalizeCommand URL-decodes twice, joins backslash-newline
// continuations, drops quotes and collapses whitespace (the lexical view
// used when the command cannot be parsed).
func NormalizeCommand(c string) string {
	c = strings.ReplaceAll(c, "\\\r\n", "")
	c = strings.ReplaceAll(c, "\\\n", "")
	c = strings.NewReplacer(`"`, "", `'`, "").Replace(c)
	return strings.Join(strings.Fields(c), " ")
}

// splitCommands splits a command line into simple commands' words at
// shell operators and command substitutions, without interpreting quotes.
func splitCommands(s string) [][]string {
	var out [][]string
	cur := []string{}
	var word bytes.Buffer
	flushWord := func() {
		if word.Len() > 0 {
			cur = append(cur, word.String())
			word.Reset()
		}
	}
	flushCmd := func() {
		flushWord()
		if len(cur) > 0 {
			out = append(out, cur)
			cur = []string{}
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ';', '&', '|', '(', ')', '`', '\n', '{', '}':
			flushCmd()
		case '$':
			if i+1 < len(s) && s[i+1] == '(' {
				flushCmd()
				i++
			} else {
				word.WriteByte(c)
			}
		case ' ', '\t', '\r', '<', '>', '"', '\'':
			flushWord()
		default:
			word.WriteByte(c)
		}
	}
	flushCmd()
	return out
}

// fieldsOfStmt expands the words of a one-command script.
func (a *analyzer) fieldsOfStmt(s *shState, f *syntax.File) []string {
	if len(f.Stmts) != 1 {
		return nil
	}
	c, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok {
		return nil
	}
	return a.fields(s, c.Args)
}
