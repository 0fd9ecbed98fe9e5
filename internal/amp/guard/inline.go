package guard

import (
	"path"
	"strings"
)

// Inline code of script interpreters (python -c, perl -e, node -e …) is
// not parsed; the guard looks for the calls that run shell commands or
// delete and write files, and checks their string arguments. Where such a
// call takes anything but string literals, the guard cannot know what it
// does and denies (fail closed).

// shellCalls run their argument as a shell command (or spawn a program).
var shellCalls = []string{
	"os.system", "os.popen", "subprocess.", "pty.spawn", "os.exec", "os.spawn", "commands.getoutput", "commands.getstatusoutput",
	"system(", "system ", "exec(", "exec ", "qx", "%x", "IO.popen", "Open3", "spawn(", "spawnSync", "execSync", "execFileSync",
	"execFile(", "child_process", "Deno.run", "Deno.Command", "Bun.spawn", "Bun.$", "shell_exec", "passthru", "proc_open",
	"popen", "os.execute", "io.popen", "do shell script", "Kernel.exec", "Process.spawn", "sh(", "run(", "eval(", "Function(",
	"getline",
}

// treeCalls delete or move whole trees.
var treeCalls = []string{
	"rmtree", "remove_tree", "rm_rf", "rm_r", "rmSync", "rmdirSync", "rimraf", "emptyDir", "removedirs", "remove_dir",
	"remove_entry", "fs.rm(", "fs.rmdir(", "promises.rm", "shutil.move", "os.rename", "os.replace", "renameSync", "File.rename",
	"FileUtils.mv", "move(", "rename(", "rmdir(", "fse.remove", "removeSync", "deleteSync", "Deno.remove",
}

// fileCalls delete or write single files.
var fileCalls = []string{
	"os.remove", "os.unlink", "unlink", "File.delete", "write_text", "write_bytes", "writeFile", "truncate", "open(",
	"File.write", "file_put_contents", "fopen(", "Deno.writeTextFile", "Bun.write", "copyfile", "copy(", "cp(",
}

// inlineInterpreters maps interpreter names to the flag that gives code.
var inlineInterpreters = map[string]string{
	"python": "-c", "python2": "-c", "python3": "-c", "pypy": "-c", "pypy3": "-c", "perl": "-e", "ruby": "-e",
	"node": "-e", "nodejs": "-e", "bun": "-e", "php": "-r", "lua": "-e", "luajit": "-e", "rscript": "-e",
	"osascript": "-e", "deno": "eval", "awk": "", "gawk": "", "mawk": "", "nawk": "", "tclsh": "", "pwsh": "-c",
	"powershell": "-c", "jshell": "", "irb": "", "julia": "-e", "elixir": "-e", "groovy": "-e",
}

func interpreterName(base string) (string, bool) {
	n := strings.ToLower(base)
	if _, ok := inlineInterpreters[n]; ok {
		return n, true
	}
	// python3.12, perl5.36 …
	for _, p := range []string{"python", "pypy", "perl", "ruby", "node", "php", "lua"} {
		if strings.HasPrefix(n, p) && strings.Trim(n[len(p):], "0123456789.") == "" {
			return p, true
		}
	}
	return "", false
}

// interpreter checks a script interpreter's inline code (or its code on
// standard input).
func (a *analyzer) interpreter(s *shState, base string, args []string, in input) {
	lang, ok := interpreterName(base)
	if !ok {
		return
	}
	flag := inlineInterpreters[lang]
	var code []string
	var files []string
	inPlace := false
	codeSeen := false
	switch {
	case strings.HasSuffix(lang, "awk"):
		progGiven := false
		for i := 0; i < len(args); i++ {
			x := args[i]
			if x == "-f" || strings.HasPrefix(x, "--file") {
				progGiven = true
				i++
				continue
			}
			if x == "-v" || x == "-F" {
				i++
				continue
			}
			if strings.HasPrefix(x, "-") && !codeSeen && x != "-" {
				continue
			}
			if !progGiven && !codeSeen {
				code = append(code, x)
				codeSeen = true
				continue
			}
			files = append(files, x)
		}
	case flag == "eval":
		if len(args) > 1 && args[0] == "eval" {
			code = append(code, args[1])
			codeSeen = true
		}
	default:
		for i := 0; i < len(args); i++ {
			x := args[i]
			if codeSeen && !strings.HasPrefix(x, "-") {
				files = append(files, x)
				continue
			}
			switch {
			case x == flag || x == "--eval" || x == "--print" || x == "-p" && (lang == "node" || lang == "nodejs") ||
				(x == "-E" && lang == "perl") || strings.EqualFold(x, "-Command"):
				if i+1 < len(args) {
					code = append(code, args[i+1])
					codeSeen = true
					i++
				}
			case strings.HasPrefix(x, "--eval=") || strings.HasPrefix(x, "--print="):
				_, v, _ := strings.Cut(x, "=")
				code = append(code, v)
				codeSeen = true
			case len(x) > 2 && x[0] == '-' && x[1] != '-' && (lang == "perl" || lang == "ruby"):
				// perl -pie, -ne, -le …: the code follows the cluster's e
				cl := x[1:]
				if k := strings.IndexAny(cl, "eE"); k >= 0 {
					if strings.ContainsRune(cl[:k], 'i') {
						inPlace = true
					}
					if rest := cl[k+1:]; rest != "" {
						code = append(code, rest)
					} else if i+1 < len(args) {
						code = append(code, args[i+1])
						i++
					}
					codeSeen = true
				} else if strings.ContainsRune(cl, 'i') {
					inPlace = true
				}
			case x == "-" && !codeSeen:
				if in.present {
					code = append(code, stdinCode(in))
					codeSeen = true
				}
			case strings.HasPrefix(x, "-m") && strings.HasPrefix(lang, "py"):
				mod := strings.TrimPrefix(x, "-m")
				if mod == "" && i+1 < len(args) {
					mod = args[i+1]
				}
				a.pythonModule(s, base, mod)
				return
			case valueOpts[family(lang)][x]:
				// an option taking a value; node -r/--import run theirs
				if i+1 < len(args) {
					i++
					if v := args[i]; (lang == "node" || lang == "nodejs") && x != "-C" && x != "--conditions" &&
						(strings.HasPrefix(v, ".") || strings.HasPrefix(v, "/")) {
						a.interpreterFile(s, base, v)
						if a.found != nil {
							return
						}
					}
				}
			case !strings.HasPrefix(x, "-") && !codeSeen:
				// A script file: its code gets the same checks as
				// inline code.
				a.interpreterFile(s, base, x)
				return
			}
		}
		if !codeSeen && in.present && len(args) == 0 {
			code = append(code, stdinCode(in))
		}
	}
	if inPlace {
		for _, f := range files {
			if a.writeTo(s, f, base+" -i") {
				return
			}
		}
	}
	for _, c := range code {
		a.inlineCode(s, base, c)
		if a.found != nil {
			return
		}
	}
}

// valueOpts are interpreter options whose value is the next argument
// (not the script).
var valueOpts = map[string]map[string]bool{
	"python": {"-W": true, "-X": true, "-Q": true},
	"pypy":   {"-W": true, "-X": true},
	"node": {"-r": true, "--require": true, "--import": true, "--loader": true, "--experimental-loader": true,
		"-C": true, "--conditions": true},
	"ruby": {"-I": true, "-r": true},
}

// family is an interpreter's name without version or suffix (python3.12
// → python, nodejs → node).
func family(lang string) string {
	f := strings.TrimRight(lang, "0123456789.")
	if f == "nodejs" {
		return "node"
	}
	return f
}

// pythonModule checks python -m MODULE when the module is a file of the
// working directory (python puts it first on sys.path).
func (a *analyzer) pythonModule(s *shState, lang, mod string) {
	if mod == "" {
		return
	}
	if isUnknown(mod) {
		a.deny(CodeBlind, lang+" -m runs a module whose name the guard cannot know ("+clip(printable(mod))+")")
		return
	}
	if s.cwd == "" {
		return
	}
	rel := strings.ReplaceAll(mod, ".", "/")
	for _, p := range []string{rel + ".py", rel + "/__main__.py"} {
		if fileExists(path.Join(s.cwd, p)) || a.fs.written[path.Join(s.cwd, p)] {
			a.interpreterFile(s, lang, p)
			return
		}
	}
}

// interpreterFile checks a script file an interpreter runs (python3 x.py,
// perl x.pl, node x.js, ./x.py with a #! line) with the checks of inline
// code. A script written by the same command, too large or unreadable is
// denied; one that does not exist runs nothing.
func (a *analyzer) interpreterFile(s *shState, lang, p string) {
	if a.found != nil {
		return
	}
	data, ok := a.readScript(s, p, lang)
	if !ok {
		return
	}
	a.inlineCode(s, lang, string(data))
	if a.found != nil {
		a.found.Reason += " (in the script " + clip(printable(p)) + ")"
		return
	}
	if !mayWrite(string(data)) {
		a.quietRun = true
		return
	}
	// the files the script names may be ones it writes
	for _, l := range literals(string(data)) {
		if !l.dynamic {
			a.fs.mentions = append(a.fs.mentions, l.val)
		}
	}
}

// mayWrite reports whether interpreter code has a call that writes,
// deletes or moves files or runs a command.
func mayWrite(code string) bool {
	for _, list := range [][]string{shellCalls, treeCalls, fileCalls} {
		for _, c := range list {
			if strings.Contains(code, c) {
				return true
			}
		}
	}
	extraShell, extraFile := moduleAliases(code)
	return len(extraShell) > 0 || len(extraFile) > 0 || strings.Contains(code, "import") && (strings.Contains(code, "pathlib") ||
		strings.Contains(code, "shutil") || strings.Contains(code, "tempfile")) || strings.Contains(code, "require(") ||
		strings.Contains(code, "__file__") || strings.Contains(code, "$0") || strings.Contains(code, "print(") && strings.Contains(code, "file=")
}

func stdinCode(in input) string {
	if in.known {
		return in.text
	}
	return unknown
}

// inlineCode checks one piece of interpreter code.
func (a *analyzer) inlineCode(s *shState, lang, code string) {
	if strings.TrimSpace(strings.ReplaceAll(code, unknown, "")) == "" && isUnknown(code) {
		a.deny(CodeBlind, lang+" runs code the guard cannot see")
		return
	}
	lits := literals(code)
	for _, l := range lits {
		if strings.ContainsAny(l.val, "/.") && !l.dynamic && a.anti(s, l.val) {
			return
		}
	}
	// Shell commands run from the code.
	extraShell, extraFile := moduleAliases(code)
	checked := map[string]bool{} // subprocess.run( matches "subprocess." and "run(": one call
	for _, call := range append(append([]string(nil), shellCalls...), extraShell...) {
		for _, arg := range callArgs(code, call) {
			if checked[arg] {
				continue
			}
			checked[arg] = true
			if a.checkCallArg(s, lang, arg, "runs a shell command") {
				return
			}
		}
	}
	for _, l := range lits {
		if l.quote == '`' && (lang == "perl" || lang == "ruby" || lang == "php") {
			if l.dynamic {
				a.deny(CodeBlind, lang+" runs a shell command built at run time: "+clip(l.val))
				return
			}
			a.eval(s, l.val)
			if a.found != nil {
				return
			}
		}
	}
	// Trees deleted or moved.
	for _, call := range treeCalls {
		for _, arg := range callArgs(code, call) {
			ls := literals(arg)
			if len(ls) == 0 || residue(arg) {
				a.deny(CodeBlind, lang+" deletes or moves a tree the guard cannot name ("+clip(strings.TrimSpace(call+arg))+")")
				return
			}
			for _, l := range ls {
				if l.dynamic {
					a.deny(CodeBlind, lang+" deletes or moves a tree the guard cannot name ("+clip(l.val)+")")
					return
				}
				if why := a.deletion(s.cwd, l.val, true); why != "" {
					a.deny(CodeDestructive, lang+" "+strings.TrimSuffix(call, "(")+" of "+l.val+" is blocked: "+why)
					return
				}
			}
		}
	}
	// Files deleted or written inside .git.
	writes := false
	for _, call := range append(append([]string(nil), fileCalls...), extraFile...) {
		if strings.Contains(code, call) {
			writes = true
		}
	}
	if writes {
		for _, l := range lits {
			abs, _ := resolve(s.cwd, l.val)
			if isGit, inside := gitSegments(abs); (isGit || inside) && !strings.HasSuffix(abs, ".lock") {
				a.deny(CodeDestructive, lang+" writes or deletes "+l.val+" inside .git (the repository's history)")
				return
			}
			if l.dynamic || isUnknown(l.val) || l.val == "" {
				continue
			}
			if r, ok := a.fs.real(s.cwd, l.val, true); ok {
				if why := a.hardLinkIntoGit(r); why != "" {
					a.deny(CodeDestructive, lang+" writes "+l.val+": "+why)
					return
				}
			}
		}
	}
}

// checkCallArg checks the argument text of a call that runs a shell
// command.
func (a *analyzer) checkCallArg(s *shState, lang, arg, what string) bool {
	ls := literals(arg)
	if residue(arg) {
		a.deny(CodeBlind, lang+" "+what+" built at run time ("+clip(strings.TrimSpace(arg))+"): the guard cannot know it")
		return true
	}
	var parts []string
	for _, l := range ls {
		if l.dynamic {
			a.deny(CodeBlind, lang+" "+what+" built at run time ("+clip(l.val)+"): the guard cannot know it")
			return true
		}
		parts = append(parts, l.val)
	}
	// A list of arguments (subprocess.run(["rm", "-rf", "."])) or one string.
	// The readings are alternatives, not a sequence: what one of them
	// mentions is no earlier writer of the files another runs.
	n := len(a.fs.mentions)
	var kept []string
	if len(parts) > 1 {
		a.run(s.clone(), parts, stdinNone, nil)
		kept = append(kept, a.fs.mentions[n:]...)
		a.fs.mentions = a.fs.mentions[:n]
	}
	for _, p := range append(parts, strings.Join(parts, ""), strings.Join(parts, " ")) {
		if a.found != nil {
			break
		}
		a.eval(s, p)
		kept = append(kept, a.fs.mentions[n:]...)
		a.fs.mentions = a.fs.mentions[:n]
	}
	a.fs.mentions = append(a.fs.mentions, kept...)
	return a.found != nil
}

// lit is a string literal in interpreter code.
type lit struct {
	val     string
	quote   byte
	dynamic bool // interpolation: f-strings, ${…}, #{…}, $var in perl
}

// literals returns the string literals of code (', ", `, triple quotes).
func literals(code string) []lit {
	var out []lit
	for i := 0; i < len(code); i++ {
		q := code[i]
		if q != '\'' && q != '"' && q != '`' {
			continue
		}
		prefix := byte(0)
		if i > 0 {
			prefix = code[i-1]
		}
		triple := strings.HasPrefix(code[i:], strings.Repeat(string(q), 3))
		start := i + 1
		if triple {
			start = i + 3
		}
		var b strings.Builder
		j := start
		closed := false
		for j < len(code) {
			c := code[j]
			if c == '\\' && j+1 < len(code) {
				switch code[j+1] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					b.WriteByte(code[j+1])
				}
				j += 2
				continue
			}
			if triple && strings.HasPrefix(code[j:], strings.Repeat(string(q), 3)) {
				closed = true
				j += 3
				break
			}
			if !triple && c == q {
				closed = true
				j++
				break
			}
			b.WriteByte(c)
			j++
		}
		v := b.String()
		l := lit{val: v, quote: q}
		switch {
		case prefix == 'f' || prefix == 'F':
			l.dynamic = strings.Contains(v, "{")
		case q == '`':
			l.dynamic = strings.Contains(v, "${") || strings.Contains(v, "#{") || strings.Contains(v, "$")
		case q == '"':
			l.dynamic = strings.Contains(v, "#{") || (strings.Contains(v, "$") && !strings.Contains(v, "$'"))
		}
		if isUnknown(v) {
			l.dynamic = true
		}
		out = append(out, l)
		if !closed {
			break
		}
		i = j - 1
	}
	return out
}

// callArgs returns the argument text of every call of name in code: the
// balanced parentheses after it, or for keyword forms (perl's system
// LIST) the rest of the statement.
func callArgs(code, name string) []string {
	var out []string
	for from := 0; ; {
		k := strings.Index(code[from:], name)
		if k < 0 {
			return out
		}
		k += from
		from = k + len(name)
		if k > 0 && isIdent(code[k-1]) && !strings.HasPrefix(name, ".") && !strings.Contains(name, ".") {
			continue // part of a longer name (ecosystem(, filesystem)
		}
		rest := code[from:]
		if strings.HasSuffix(name, "(") {
			rest = "(" + rest
		} else {
			// subprocess.run(…), os.execvp(…): skip the rest of the name
			t := strings.TrimLeft(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789.")
			rest = strings.TrimLeft(t, " \t")
		}
		if strings.HasPrefix(rest, "(") {
			depth := 0
			inQ := byte(0)
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if inQ != 0 {
					if c == '\\' {
						j++
					} else if c == inQ {
						inQ = 0
					}
					continue
				}
				switch c {
				case '\'', '"', '`':
					inQ = c
				case '(':
					depth++
				case ')':
					depth--
					if depth == 0 {
						out = append(out, rest[1:j])
						j = len(rest)
					}
				}
			}
			if depth > 0 {
				out = append(out, rest[1:])
			}
			continue
		}
		if end := strings.IndexAny(rest, ";\n}"); end >= 0 {
			rest = rest[:end]
		}
		if strings.TrimSpace(rest) != "" && (rest[0] == '\'' || rest[0] == '"' || rest[0] == '[' || rest[0] == '$' || isIdent(rest[0])) {
			out = append(out, rest)
		}
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// residue reports whether argument text holds anything but string
// literals, punctuation and keyword flags (shell=True, check=True, …).
func residue(arg string) bool {
	var b strings.Builder
	inQ := byte(0)
	for j := 0; j < len(arg); j++ {
		c := arg[j]
		if inQ != 0 {
			if c == '\\' {
				j++
			} else if c == inQ {
				inQ = 0
			}
			continue
		}
		switch c {
		case '\'', '"', '`':
			inQ = c
			// a string prefix such as f"…", r'…', b"…" belongs to it
			s := b.String()
			if n := len(s); n > 0 && strings.ContainsRune("rRbBuU", rune(s[n-1])) && (n == 1 || !isIdent(s[n-2])) {
				b.Reset()
				b.WriteString(s[:n-1])
			}
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	for _, tok := range strings.FieldsFunc(b.String(), func(r rune) bool { return strings.ContainsRune(" \t\n,[](){}:;", r) }) {
		k, v, isKw := strings.Cut(tok, "=")
		if isKw {
			if v == "" || v == "True" || v == "False" || v == "None" || v == "true" || v == "false" || v == "nil" ||
				strings.Trim(v, "0123456789") == "" {
				_ = k
				continue
			}
			return true
		}
		switch tok {
		case "true", "false", "True", "False", "None", "nil", "null", "shell", "check", "stdio", "inherit", "recursive", "force",
			"encoding", "utf8", "utf-8", "+", "=>", "->":
			continue
		}
		if strings.Trim(tok, "0123456789") == "" {
			continue
		}
		return true
	}
	return false
}

// moduleAliases returns the extra calls that run commands or write files
// when code names Python's modules another way: subprocess reached through
// __import__ or an alias (import subprocess as sp; sp.call(…)), os as an
// alias (import os as o; o.system(…)).
func moduleAliases(code string) (shell, file []string) {
	if !strings.Contains(code, "subprocess") && !strings.Contains(code, " as ") {
		return nil, nil
	}
	subprocessCalls := []string{".call(", ".run(", ".Popen(", ".check_output(", ".check_call(", ".getoutput(", ".getstatusoutput("}
	if strings.Contains(code, "subprocess") {
		shell = append(shell, subprocessCalls...)
	}
	for _, mod := range []string{"os", "subprocess", "shutil", "pty"} {
		rest := code
		for {
			i := strings.Index(rest, "import "+mod+" as ")
			if i < 0 {
				break
			}
			rest = rest[i+len("import "+mod+" as "):]
			j := 0
			for j < len(rest) && isIdent(rest[j]) {
				j++
			}
			if j == 0 {
				continue
			}
			alias := rest[:j]
			switch mod {
			case "os":
				shell = append(shell, alias+".system(", alias+".popen(", alias+".exec", alias+".spawn")
				file = append(file, alias+".remove(", alias+".unlink(", alias+".rmdir(", alias+".truncate(")
			case "pty":
				shell = append(shell, alias+".spawn(")
			}
		}
	}
	return shell, file
}
