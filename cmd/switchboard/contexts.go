package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/switchboard-hub/switchboard/client"
)

func init() {
	register("login", "check a token against a hub and save both as a named context", runLogin)
	register("logout", "forget a context's token", runLogout)
	register("context", "list, show or switch the saved hub contexts (context list | use NAME | remove NAME)", runContext)
}

// hubContext is a saved hub and the token to use with it.
type hubContext struct {
	Hub   string `json:"hub"`
	Token string `json:"token,omitempty"`
	// Principal is who the token was when saved (admin, agent:<id>).
	Principal string `json:"principal,omitempty"`
}

// contextFile is the CLI's saved contexts, kept in
// os.UserConfigDir()/switchboard/contexts.json with mode 0600.
type contextFile struct {
	Current  string                 `json:"current,omitempty"`
	Contexts map[string]*hubContext `json:"contexts"`
}

// contextPath is where contexts are kept: $SWITCHBOARD_CONFIG_DIR, else
// the user's configuration directory (XDG_CONFIG_HOME or ~/.config on
// Linux) / switchboard.
func contextPath() (string, error) {
	dir := os.Getenv("SWITCHBOARD_CONFIG_DIR")
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("no configuration directory: %w", err)
		}
		dir = filepath.Join(base, "switchboard")
	}
	return filepath.Join(dir, "contexts.json"), nil
}

func loadContexts() (*contextFile, string, error) {
	path, err := contextPath()
	if err != nil {
		return nil, "", err
	}
	cf := &contextFile{Contexts: map[string]*hubContext{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return cf, path, nil
	case err != nil:
		return nil, path, err
	}
	if err := json.Unmarshal(b, cf); err != nil {
		return nil, path, fmt.Errorf("%s: %w", path, err)
	}
	if cf.Contexts == nil {
		cf.Contexts = map[string]*hubContext{}
	}
	return cf, path, nil
}

// save writes the contexts with mode 0600 in a 0700 directory, through a
// temporary file so that a crash leaves the old file whole.
func (cf *contextFile) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(cf, "", "  ")
	tmp, err := os.CreateTemp(filepath.Dir(path), ".contexts-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// whoami asks the hub who token is.
func whoami(ctx context.Context, hub, token string) (string, error) {
	c := client.New(hub, client.WithToken(token))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL()+"/v1/whoami", nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %v", client.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		e := &client.Error{StatusCode: resp.StatusCode}
		_ = json.Unmarshal(b, e)
		return "", e
	}
	var w struct {
		Principal string `json:"principal"`
	}
	_ = json.Unmarshal(b, &w)
	return w.Principal, nil
}

func runLogin(ctx context.Context, args []string, s stdio) int {
	fs := newFlagSet("login", `Usage: switchboard login [--hub URL] [--token TOKEN | --token-file FILE] [--name NAME]

Checks a token against a hub (the admin token or an agent's) and saves the
hub and the token as a named context (default "default") in the user's
configuration directory (`+"`switchboard context`"+` shows where), file mode
0600; the context becomes the current one, which every command then uses
unless --hub, --token or their environment variables say otherwise.
Without --token or --token-file the token is read from standard input.
Exit codes: 0 saved, 2 the hub refused the token, 4 hub unreachable.`, s)
	hub := fs.String("hub", envOr("SWITCHBOARD_HUB", defaultHub), "hub base URL (env SWITCHBOARD_HUB)")
	token := fs.String("token", "", "the token (visible to other users in the process list: prefer --token-file or standard input)")
	tokenFile := fs.String("token-file", "", "read the token from this file (e.g. switchboard-data/admin.token)")
	name := fs.String("name", "default", "the context's name")
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	tok := *token
	switch {
	case tok != "" && *tokenFile != "":
		fmt.Fprintln(s.err, "login: --token and --token-file go alone")
		return exitUsage
	case *tokenFile != "":
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(s.err, "login: %v\n", err)
			return exitUsage
		}
		tok = strings.TrimSpace(string(b))
	case tok == "":
		line, err := bufio.NewReader(s.in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintf(s.err, "login: read the token: %v\n", err)
			return exitUsage
		}
		tok = strings.TrimSpace(line)
	}
	if tok == "" {
		fmt.Fprintln(s.err, "login: no token (give --token, --token-file or the token on standard input)")
		return exitUsage
	}
	who, err := whoami(ctx, *hub, tok)
	if err != nil {
		return failure(s, "login", err)
	}
	cf, path, err := loadContexts()
	if err != nil {
		fmt.Fprintf(s.err, "login: %v\n", err)
		return exitFailure
	}
	cf.Contexts[*name] = &hubContext{Hub: strings.TrimRight(*hub, "/"), Token: tok, Principal: who}
	cf.Current = *name
	if err := cf.save(path); err != nil {
		fmt.Fprintf(s.err, "login: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(s.out, "logged in to %s as %s; context %q saved in %s and in use\n", *hub, who, *name, path)
	return exitOK
}

func runLogout(_ context.Context, args []string, s stdio) int {
	fs := newFlagSet("logout", "Usage: switchboard logout [--name NAME]\n\nForgets the token of a saved context (default: the current one); the hub\nURL stays. The token itself stays valid at the hub: `switchboard token\nrevoke` ends an agent's tokens.", s)
	name := fs.String("name", "", "the context (default: the current one)")
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	cf, path, err := loadContexts()
	if err != nil {
		fmt.Fprintf(s.err, "logout: %v\n", err)
		return exitFailure
	}
	n := *name
	if n == "" {
		n = cf.Current
	}
	c := cf.Contexts[n]
	if c == nil {
		fmt.Fprintf(s.err, "logout: no context %q\n", n)
		return exitNotFound
	}
	c.Token, c.Principal = "", ""
	if err := cf.save(path); err != nil {
		fmt.Fprintf(s.err, "logout: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(s.out, "context %q: token forgotten\n", n)
	return exitOK
}

func runContext(_ context.Context, args []string, s stdio) int {
	usage := "Usage: switchboard context [list] [--output table|json]\n       switchboard context use NAME\n       switchboard context remove NAME\n\nLists the saved contexts (hub URL and who its token is; `switchboard\nlogin` saves them) and says which is in use, switches to another, or\nremoves one. Tokens are never printed."
	sub := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	want := 1
	if sub == "list" {
		want = 0
	} else if sub != "use" && sub != "remove" {
		fmt.Fprintf(s.err, "context: unknown subcommand %q\n\n%s\n", sub, usage)
		return exitUsage
	}
	fs := newFlagSet("context "+sub, usage, s)
	var out outputFlag
	if sub == "list" {
		out.add(fs)
	}
	pos, code, ok := parseArgs(fs, args, want)
	if !ok {
		return code
	}
	if err := out.check(); err != nil {
		fmt.Fprintf(s.err, "context: %v\n", err)
		return exitUsage
	}
	cf, path, err := loadContexts()
	if err != nil {
		fmt.Fprintf(s.err, "context: %v\n", err)
		return exitFailure
	}
	switch sub {
	case "use", "remove":
		name := pos[0]
		if cf.Contexts[name] == nil {
			fmt.Fprintf(s.err, "context: no context %q\n", name)
			return exitNotFound
		}
		if sub == "use" {
			cf.Current = name
		} else {
			delete(cf.Contexts, name)
			if cf.Current == name {
				cf.Current = ""
			}
		}
		if err := cf.save(path); err != nil {
			fmt.Fprintf(s.err, "context: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(s.out, "context %q %s\n", name, map[string]string{"use": "in use", "remove": "removed"}[sub])
		return exitOK
	}
	names := make([]string, 0, len(cf.Contexts))
	for n := range cf.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	type row struct {
		Name      string `json:"name"`
		Current   bool   `json:"current"`
		Hub       string `json:"hub"`
		Principal string `json:"principal,omitempty"`
		HasToken  bool   `json:"has_token"`
	}
	rows := make([]row, 0, len(names))
	for _, n := range names {
		c := cf.Contexts[n]
		rows = append(rows, row{n, n == cf.Current, c.Hub, c.Principal, c.Token != ""})
	}
	if out.json() {
		printJSON(s.out, map[string]any{"file": path, "contexts": rows})
		return exitOK
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENT\tNAME\tHUB\tAS")
	for _, r := range rows {
		cur, as := "", r.Principal
		if r.Current {
			cur = "*"
		}
		if !r.HasToken {
			as = "(no token)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cur, r.Name, r.Hub, as)
	}
	tw.Flush()
	fmt.Fprintf(s.out, "(saved in %s)\n", path)
	return exitOK
}
