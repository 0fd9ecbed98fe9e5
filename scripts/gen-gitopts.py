"""Generate internal/amp/guard/gitopts_gen.go from git's own option lists.

Usage: python3 scripts/gen-gitopts.py > internal/amp/guard/gitopts_gen.go
(run with the git whose rules the guard should follow; the committed file
comes from git 2.39.5).
"""
import subprocess, re, sys, tempfile
subs = "reset clean push checkout restore switch branch commit gc prune update-ref merge rebase am cherry-pick revert pull rm config checkout-index read-tree send-pack fetch".split()
repo = tempfile.mkdtemp()
subprocess.run(["git", "init", "-q", repo], check=True)
out = []
out.append("// Code generated from the option lists git 2.39.5 prints for \"git <command> -h\" (scripts/gen-gitopts.py); DO NOT EDIT.\n")
out.append("package guard\n")
out.append("// gitOptions lists each git subcommand's options: short letter (0 if")
out.append("// none), long name, and whether it takes a value (argNone, argRequired,")
out.append("// argOptional: only as --name=value or attached to the short letter).")
out.append("var gitOptions = map[string][]gitOpt{")
for s in subs:
    r = subprocess.run(["git", s, "-h"], capture_output=True, text=True, cwd=repo)
    text = r.stdout + r.stderr
    opts = []
    for line in text.splitlines():
        m = re.match(r'^\s+(-.*)$', line)
        if not m: continue
        spec = re.split(r'\s{2,}', m.group(1).strip())[0]
        short = ""; long = ""; arg = "argNone"
        mm = re.match(r'^-([A-Za-z0-9]), (.*)$', spec)
        rest = spec
        if mm:
            short = mm.group(1); rest = mm.group(2)
        elif re.match(r'^-([A-Za-z0-9])( |$)', spec):
            short = spec[1]; rest = spec[2:].strip()
            if rest.startswith('<') or rest.startswith('...'): arg = "argRequired"
            elif rest.startswith('[') : arg = "argOptional"
            rest = ""
        if rest.startswith('--'):
            m2 = re.match(r'^--([a-z0-9][a-z0-9-]*)(.*)$', rest)
            if not m2: continue
            long = m2.group(1); tail = m2.group(2).strip()
            if tail.startswith('[='): arg = "argOptional"
            elif tail: arg = "argRequired"
        if not short and not long: continue
        sc = "'%s'" % short if short else "0"
        opts.append('{%s, "%s", %s}' % (sc, long, arg))
    out.append('\t"%s": {%s},' % (s, ", ".join(opts)))
out.append("}")
print("\n".join(out))
