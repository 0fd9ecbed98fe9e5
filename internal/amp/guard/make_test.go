package guard

import (
	"strings"
	"testing"
)

func newTestMakefile(env map[string]string) *makefile {
	return &makefile{dir: "/work/proj", vars: map[string]mkVar{}, overrides: map[string]string{},
		seenShell: map[string]bool{}, env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
}

// TestMakeRecipes checks which recipe lines the guard finds for a
// makefile's goals, with variables resolved ("?" marks an unknown part).
func TestMakeRecipes(t *testing.T) {
	tests := []struct {
		name, text string
		goals      []string
		want       []string
	}{
		{"default goal is the first target", "a:\n\techo a\nb:\n\techo b\n", nil, []string{"echo a"}},
		{"special targets are skipped", ".PHONY: b\nb:\n\techo b\n", nil, []string{"echo b"}},
		{"prerequisites are followed", "a: b c\n\techo a\nb:\n\techo b\nc: ; echo c\nd:\n\techo d\n", nil, []string{"echo a", "echo b", "echo c"}},
		{"order-only prerequisites too", "a: | b\nb:\n\techo b\n", nil, []string{"echo b"}},
		{".DEFAULT_GOAL wins", ".DEFAULT_GOAL := b\na:\n\techo a\nb:\n\techo b\n", nil, []string{"echo b"}},
		{"prefixes are stripped", "a:\n\t@-+ echo a\n", nil, []string{"echo a"}},
		{"simple and recursive variables", "X := rm\nY = $(X) -rf $(Z)\nZ = build\na:\n\t$(Y)\n", nil, []string{"rm -rf build"}},
		{"append", "F = -r\nF += -f\na:\n\trm $(F) x\n", nil, []string{"rm -r -f x"}},
		{"$$ is a shell dollar", "a:\n\techo $$HOME\n", nil, []string{"echo $HOME"}},
		{"automatic variables", "out/a.o: a.c b.c\n\tcc -o $@ $< $^ $(@D)\n", nil, []string{"cc -o out/a.o a.c a.c b.c out"}},
		{"pattern rules", "all: x.o\n%.o: %.c\n\tcc -c $< -o $@ $*\n", nil, []string{"cc -c x.c -o x.o x"}},
		{"functions are unknown", "X = $(wildcard *.c)\na:\n\t$(X) run\n", nil, []string{"? run"}},
		{"?= takes the environment", "T ?= build\na:\n\trm -rf $(T)\n", nil, []string{"rm -rf .git"}},
		{"a conditional makes a variable unknown", "ifdef X\nR = true\nelse\nR = rm\nendif\na:\n\t$(R) -rf .\n", nil, []string{"? -rf ."}},
		{"continuation", "a: \\\n b\nb:\n\techo \\\n\tb\n", nil, []string{"echo b"}},
		{"oneshell", ".ONESHELL:\na:\n\tcd x\n\t@rm -rf y\n", nil, []string{"cd x\nrm -rf y"}},
		{"comments", "# a:\n#\techo no\nb: # c\n\techo b # shell comment\n", nil, []string{"echo b # shell comment"}},
		{"define is unknown", "define R\nrm -rf .git\nendef\na:\n\t$(R)\n", nil, []string{"?"}},
		{"goals given", "a:\n\techo a\nb:\n\techo b\n", []string{"b"}, []string{"echo b"}},
		{"unknown prerequisite: every recipe", "a: $(shell ls)\n\techo a\nz:\n\techo z\n", nil, []string{"echo a", "echo z"}},
		{"static pattern rules", "all: a.o b.o\na.o b.o: %.o: %.c\n\tcc $<\n%.c:\n\tgen $@\n", nil, []string{"cc a.c", "cc b.c", "gen a.c", "gen b.c"}},
		{"second expansion: every recipe", ".SECONDEXPANSION:\nall: $$(T)\n\techo all\nT = x\nx:\n\techo x\n", nil, []string{"echo all", "echo x"}},
		{"unknown .DEFAULT_GOAL: every recipe", ".DEFAULT_GOAL = $(G)\na:\n\techo a\nb:\n\techo b\n", nil, []string{"echo a", "echo b"}},
		{"target-specific variable", "a: R = rm -rf\na:\n\t$(R) x\n", nil, []string{"? x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMakefile(map[string]string{"T": ".git"})
			m.parse(tt.text)
			if m.blind != "" {
				t.Fatalf("blind: %s", m.blind)
			}
			var got []string
			for _, r := range m.toRun(tt.goals, nil) {
				got = append(got, strings.ReplaceAll(r.text, unknown, "?"))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMakeBlind checks the makefiles the guard does not follow.
func TestMakeBlind(t *testing.T) {
	for _, text := range []string{
		"include x.mk\na:\n\techo a\n",
		"-include $(DEPS)\n",
		"sinclude x\n",
		"$(eval a: ; rm -rf .git)\n",
		".RECIPEPREFIX = >\na:\n> rm -rf .git\n",
		"A = $(B)$(B)$(B)$(B)\nB = $(C)$(C)$(C)$(C)\nC = $(D)$(D)$(D)$(D)\nD = $(E)$(E)$(E)$(E)\nE = $(F)$(F)$(F)$(F)\n" +
			"F = $(G)$(G)$(G)$(G)\nG = $(H)$(H)$(H)$(H)\nH = $(I)$(I)$(I)$(I)\nI = x\na:\n\t$(A)\n",
	} {
		m := newTestMakefile(nil)
		m.parse(text)
		m.toRun(nil, nil)
		if m.blind == "" {
			t.Errorf("%q: not blind", text)
		}
	}
}

// FuzzMakefile feeds arbitrary makefiles to the parser and, through
// make -f -, to the guard: no panic, no endless expansion, a consistent
// decision.
func FuzzMakefile(f *testing.F) {
	f.Add("a: b\n\t@$(MAKE) -C x $@\nb: ; rm -rf $(X:.c=.o)\nX := $(shell ls)\n")
	f.Add(".ONESHELL:\n%.o: %.c | d\n\t-cd $(@D) \\\n\t&& $(CC) $<\ndefine Y\nz\nendef\n")
	f.Add("A = $(A)\nB = ${A} $$x $(\na:\n\t$(B)")
	f.Fuzz(func(t *testing.T, text string) {
		m := newTestMakefile(nil)
		m.parse(text)
		m.toRun(nil, nil)
		if strings.Contains(text, "MKEOF") {
			return
		}
		d := Check(Request{Mode: ModeDev, Tool: "Bash", Input: map[string]any{"command": "make -f - <<'MKEOF'\n" + text + "\nMKEOF"},
			Cwd: "/work/proj", ProjectDir: "/work/proj", Home: "/home/u"})
		if d.Code == CodeGuardError {
			t.Fatalf("guard fault: %s", d.Reason)
		}
		if d.Deny != (d.Code != "") {
			t.Fatalf("inconsistent decision: %+v", d)
		}
	})
}
