package guard

import "strings"

// sed: in-place edits, and the w, e and s///e commands of its scripts.

func (a *analyzer) sed(s *shState, args []string) {
	sp := gnuSpec{value: "efl", long: []string{"expression", "file", "in-place", "quiet", "silent", "regexp-extended",
		"separate", "null-data", "zero-terminated", "debug", "posix", "sandbox", "unbuffered", "line-length", "follow-symlinks"},
		longValue: map[string]bool{"expression": true, "file": true, "line-length": true}}
	// -i takes an optional suffix attached to it: treat -i… as in-place
	var fixed []string
	inPlace := false
	for _, x := range args {
		if len(x) > 1 && x[0] == '-' && x[1] != '-' && strings.Contains(x, "i") {
			before, _, _ := strings.Cut(x[1:], "i")
			if strings.Trim(before, "nEsrzu") == "" {
				inPlace = true
				if before != "" {
					fixed = append(fixed, "-"+before)
				}
				continue
			}
		}
		fixed = append(fixed, x)
	}
	opts, ops := sp.scan(fixed)
	if has(opts, "--in-place") {
		inPlace = true
	}
	var scripts []string
	for i := 0; i < len(fixed); i++ {
		x := fixed[i]
		switch {
		case x == "--":
			i = len(fixed)
		case x == "--expression" && i+1 < len(fixed):
			scripts = append(scripts, fixed[i+1])
			i++
		case strings.HasPrefix(x, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(x, "--expression="))
		case len(x) > 1 && x[0] == '-' && x[1] != '-':
			if _, after, ok := strings.Cut(x[1:], "e"); ok && !strings.ContainsAny(x[1:strings.IndexByte(x, 'e')], "fl") {
				if after != "" {
					scripts = append(scripts, after)
				} else if i+1 < len(fixed) {
					scripts = append(scripts, fixed[i+1])
					i++
				}
			}
		}
	}
	if !has(opts, "-e", "-f", "--expression", "--file") && len(ops) > 0 {
		scripts = append(scripts, ops[0])
		ops = ops[1:]
	}
	for _, sc := range scripts {
		if a.sedScript(s, sc) {
			return
		}
	}
	for _, x := range ops {
		if inPlace {
			if a.writeTo(s, x, "sed -i") {
				return
			}
		} else if a.anti(s, x) {
			return
		}
	}
}

// sedScript checks GNU sed's commands that run programs or write files:
// "e command", the s///e flag, "w file" and the s///w flag. It returns
// true when it denied.
func (a *analyzer) sedScript(s *shState, script string) bool {
	if strings.TrimSpace(strings.ReplaceAll(script, unknown, "")) == "" && isUnknown(script) {
		a.deny(CodeBlind, "a sed script the guard cannot know could run a command (e) or write a file (w)")
		return true
	}
	// A value the guard cannot know, inside a known script, is text
	// (s/version = .*/version = "$V"/): read the script around it.
	script = strings.ReplaceAll(script, unknown, "X")
	for _, line := range strings.Split(script, "\n") {
		rest := line
		for rest != "" {
			cmd := strings.TrimLeft(skipSedAddress(strings.TrimLeft(rest, " \t;{}")), " \t!")
			if cmd == "" {
				break
			}
			switch cmd[0] {
			case 'e':
				c := strings.TrimSpace(cmd[1:])
				if c == "" {
					a.deny(CodeBlind, "sed's e command runs the text it reads as a shell command")
				} else {
					a.eval(s, c)
				}
				return a.found != nil
			case 'w', 'W':
				if f := strings.TrimSpace(cmd[1:]); f != "" {
					return a.writeTo(s, f, "sed w")
				}
				return false
			case 's', 'y':
				end, flags := sedSubst(cmd)
				if cmd[0] == 's' {
					if i := strings.IndexByte(flags, 'w'); i >= 0 {
						return a.writeTo(s, strings.TrimSpace(flags[i+1:]), "sed s///w")
					}
					if strings.ContainsRune(flags, 'e') {
						a.deny(CodeBlind, "sed's s///e runs the substituted text as a shell command")
						return true
					}
				}
				rest = cmd[end:]
				continue
			case 'a', 'i', 'c', 'r', 'R', 'b', 't', 'T', ':', '#':
				// text or a label to the end of the line
			default:
				if i := strings.IndexByte(cmd, ';'); i >= 0 {
					rest = cmd[i+1:]
					continue
				}
			}
			break
		}
	}
	return false
}

// skipSedAddress drops a sed address (number, $, /regex/, \cregexc, with
// an optional second address) from the front of a command.
func skipSedAddress(c string) string {
	for range 2 {
		switch {
		case c == "":
			return c
		case c[0] >= '0' && c[0] <= '9' || c[0] == '$':
			c = strings.TrimLeft(c, "0123456789$~+")
		case c[0] == '/' || c[0] == '\\' && len(c) > 1:
			d := c[0]
			start := 1
			if d == '\\' {
				d, start = c[1], 2
			}
			i := start
			for i < len(c) && c[i] != d {
				if c[i] == '\\' {
					i++
				}
				i++
			}
			c = strings.TrimLeft(c[min(i+1, len(c)):], "IM")
		default:
			return c
		}
		if !strings.HasPrefix(c, ",") {
			return c
		}
		c = c[1:]
	}
	return c
}

// sedSubst finds the end of an s or y command and its flags.
func sedSubst(c string) (end int, flags string) {
	if len(c) < 2 {
		return len(c), ""
	}
	d := c[1]
	i, parts := 2, 0
	for i < len(c) && parts < 2 {
		switch c[i] {
		case '\\':
			i++
		case d:
			parts++
		}
		i++
	}
	j := i
	for j < len(c) && c[j] != ';' && c[j] != '}' {
		j++
	}
	return j, c[min(i, len(c)):j]
}
