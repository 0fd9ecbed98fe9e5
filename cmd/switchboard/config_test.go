package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestServeConfigPrecedence: every serve setting comes from a flag, the
// environment or the --config file, in that order, else its default; and
// --print-config says which.
func TestServeConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "switchboard.toml")
	if err := os.WriteFile(file, []byte("addr = \"127.0.0.1:9001\"\nmax-queue = 5000\ndefault-ttl = \"2m\"\nmax-body = 4096\ndev = true\nadmin-token = \"sba_from-file\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want map[string]string // flag → "value  # source"
	}{
		{"defaults", nil, nil, map[string]string{
			"addr": `"127.0.0.1:8080"  # default`, "max-queue": `100000  # default`, "default-ttl": `"1m0s"  # default`, "dev": `false  # default`}},
		{"file over defaults", nil, []string{"--config", file}, map[string]string{
			"addr": `"127.0.0.1:9001"  # file ` + file, "max-queue": `5000  # file ` + file, "default-ttl": `"2m0s"  # file ` + file,
			"dev": `true  # file ` + file, "max-streams": `16  # default`}},
		{"environment over file", map[string]string{"SWITCHBOARD_MAX_QUEUE": "7000", "SWITCHBOARD_CONFIG": file}, nil, map[string]string{
			"max-queue": `7000  # environment SWITCHBOARD_MAX_QUEUE`, "addr": `"127.0.0.1:9001"  # file ` + file}},
		{"flag over environment", map[string]string{"SWITCHBOARD_MAX_QUEUE": "7000", "SWITCHBOARD_MAX_BODY": "8192"},
			[]string{"--config", file, "--max-queue", "9000"}, map[string]string{
				"max-queue": `9000  # flag --max-queue`, "max-body": `8192  # environment SWITCHBOARD_MAX_BODY`}},
		{"the admin token is never printed", nil, []string{"--config", file}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, out, errOut := run(t, "", append([]string{"serve", "--print-config"}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for name, want := range tt.want {
				re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+" = "+want) + `$`)
				if !re.MatchString(out) {
					t.Errorf("want line %q in\n%s", name+" = "+want, out)
				}
			}
			if strings.Contains(out, "sba_from-file") {
				t.Errorf("--print-config shows the admin token:\n%s", out)
			}
		})
	}
}

// TestServeConfigFileRoundTrip: what --print-config prints, --config reads
// back to the same configuration.
func TestServeConfigFileRoundTrip(t *testing.T) {
	_, first, errOut := run(t, "", "serve", "--print-config", "--max-queue", "123", "--retention", "3h", "--rate-limit", "2.5", "--request-log=false")
	if first == "" {
		t.Fatalf("no configuration printed: %s", errOut)
	}
	file := filepath.Join(t.TempDir(), "printed.toml")
	if err := os.WriteFile(file, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	code, second, errOut := run(t, "", "serve", "--print-config", "--config", file)
	if code != exitOK {
		t.Fatalf("reading the printed configuration back: exit %d %s", code, errOut)
	}
	strip := regexp.MustCompile(`  # .*`)
	if a, b := strip.ReplaceAllString(first, ""), strip.ReplaceAllString(second, ""); a != b {
		t.Fatalf("the configuration changed on the way back:\n%s\n---\n%s", a, b)
	}
}

func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown key in the file", []string{"--config", write("unknown.toml", "max-queues = 5\n")}, `"max-queues" not defined`},
		{"bad value in the file", []string{"--config", write("bad.toml", "max-queue = \"lots\"\n")}, "max-queue"},
		{"not TOML", []string{"--config", write("broken.toml", "addr = \n")}, "TOML"},
		{"missing file", []string{"--config", filepath.Join(dir, "nope.toml")}, "nope.toml"},
		{"bad environment value", []string{"--print-config"}, "SWITCHBOARD_MAX_STREAMS"},
		{"stray argument", []string{"now"}, `unexpected argument "now"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "bad environment value" {
				t.Setenv("SWITCHBOARD_MAX_STREAMS", "many")
			}
			code, _, errOut := run(t, "", append([]string{"serve"}, tt.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q in it)", code, exitUsage, errOut, tt.want)
			}
		})
	}
}

// TestHelpOnStdout: help that was asked for goes to standard output, for
// every command; usage after a mistake goes to standard error.
func TestHelpOnStdout(t *testing.T) {
	for name := range commands {
		if hidden[name] {
			continue
		}
		for _, args := range [][]string{{name, "--help"}, {"help", name}, {name, "-h"}} {
			code, out, errOut := run(t, "", args...)
			if code != exitOK || !strings.Contains(strings.ToLower(out), "usage") || errOut != "" {
				t.Errorf("%v: exit %d, %d bytes on stdout, stderr %q", args, code, len(out), errOut)
			}
		}
	}
	code, out, errOut := run(t, "", "agents", "--no-such-flag")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "Usage") {
		t.Errorf("a bad flag: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
