// Package agenttoken keeps an example agent's bearer token between runs.
//
// A hub with auth on (the default) issues an agent its token once, in the
// answer to its first registration; every later registration of the same
// id needs that token. An example agent therefore takes its token from a
// flag, else its own environment variable (SWITCHBOARD_<ID>_TOKEN, so two
// agents on one machine never share one), else its token file; and when
// the hub issues it a new token, it writes that to the file (mode 0600)
// so that its next run works.
package agenttoken

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvVar is the environment variable of agent id's token:
// SWITCHBOARD_PLANNER_TOKEN for "planner".
func EnvVar(id string) string {
	up := strings.ToUpper(id)
	var b strings.Builder
	for _, r := range up {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return "SWITCHBOARD_" + b.String() + "_TOKEN"
}

// DefaultFile is where agent id keeps its token: <id>.token in the
// current directory.
func DefaultFile(id string) string { return id + ".token" }

// Load returns the token to start with: flagValue, else the environment
// variable, else the file's content ("" when there is none yet).
func Load(id, flagValue, file string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if v := os.Getenv(EnvVar(id)); v != "" {
		return v, nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Save writes a newly issued token to file with mode 0600.
func Save(file, token string) error {
	if dir := filepath.Dir(file); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("save the token: %w", err)
	}
	return nil
}
