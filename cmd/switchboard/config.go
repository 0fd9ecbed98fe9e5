package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/fftoml"
)

// secretFlags are printed by --print-config only as set or not.
var secretFlags = map[string]bool{"admin-token": true}

// printServeConfig writes the configuration fs holds after parsing args,
// as a TOML file that --config reads back, naming where each value came
// from: flag, environment, file or default.
func printServeConfig(w io.Writer, fs *flag.FlagSet, args []string) error {
	fromFlag := map[string]bool{}
	for _, a := range args {
		if a == "--" {
			break
		}
		name := strings.TrimLeft(a, "-")
		if name == a || name == "" {
			continue
		}
		if i := strings.IndexByte(name, '='); i >= 0 {
			name = name[:i]
		}
		fromFlag[name] = true
	}
	fromFile := map[string]bool{}
	file := fs.Lookup("config").Value.String()
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := fftoml.Parser(f, func(name, _ string) error { fromFile[name] = true; return nil }); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "# switchboard serve: the configuration in force (flag > environment > file > default).")
	fmt.Fprintln(w, "# Save it as a file and pass it with --config to start the same hub.")
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "config" && f.Name != "print-config" {
			names = append(names, f.Name)
		}
	})
	sort.Strings(names)
	for _, name := range names {
		f := fs.Lookup(name)
		env := envPrefix + "_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
		source := "default"
		switch {
		case fromFlag[name]:
			source = "flag --" + name
		case os.Getenv(env) != "":
			source = "environment " + env
		case fromFile[name]:
			source = "file " + file
		}
		if secretFlags[name] {
			state := "not set"
			if f.Value.String() != "" {
				state = "set, not shown"
			}
			fmt.Fprintf(w, "# %s = (%s)  # %s\n", name, state, source)
			continue
		}
		fmt.Fprintf(w, "%s = %s  # %s\n", name, tomlValue(f), source)
	}
	return nil
}

// tomlValue writes a flag's value as a TOML value: numbers and booleans
// bare, everything else (durations too) as a string.
func tomlValue(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return strconv.Quote(f.Value.String())
	}
	switch v := g.Get().(type) {
	case bool, int, int64, uint, uint64:
		return fmt.Sprint(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case time.Duration:
		return strconv.Quote(v.String())
	}
	return strconv.Quote(f.Value.String())
}
