package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/switchboard-hub/switchboard/client"
)

func init() {
	register("token", "rotate or revoke an agent's bearer tokens (token rotate AGENT | token revoke AGENT)", runToken)
}

func runToken(ctx context.Context, args []string, s stdio) int {
	usage := `Usage: switchboard token rotate [flags] AGENT_ID
       switchboard token revoke [flags] AGENT_ID

rotate revokes every token of the agent and issues it one new token, which
it prints (once: keep it, e.g. with --write FILE, mode 0600). revoke ends
every token of the agent: it can no longer act until the operator rotates
it a new one. Both need the admin token or the agent's own, and are
written to the hub's audit log.
Exit codes: 0 done, 2 not allowed, 3 unknown agent, 4 hub unreachable.`
	if len(args) == 0 || (args[0] != "rotate" && args[0] != "revoke") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(s.err, usage)
			return exitOK
		}
		if len(args) > 0 {
			fmt.Fprintf(s.err, "token: unknown subcommand %q\n\n", args[0])
		}
		fmt.Fprintln(s.err, usage)
		return exitUsage
	}
	sub := args[0]
	fs := newFlagSet("token "+sub, usage, s)
	var h hubFlags
	h.add(fs)
	var write *string
	if sub == "rotate" {
		write = fs.String("write", "", "write the new token to this file (mode 0600) instead of printing it")
	}
	pos, code, ok := parseArgs(fs, args[1:], 1)
	if !ok {
		return code
	}
	c, err := h.client()
	if err != nil {
		return usageError(s, "token", err)
	}
	method := http.MethodPost
	if sub == "revoke" {
		method = http.MethodDelete
	}
	body, err := opsCall(ctx, c, method, "/v1/agents/"+url.PathEscape(pos[0])+"/token")
	if err != nil {
		return failure(s, "token "+sub, err)
	}
	if sub == "revoke" {
		if h.json() {
			fmt.Fprintln(s.out, strings.TrimSpace(string(body)))
		} else {
			fmt.Fprintf(s.out, "%s: every token revoked\n", pos[0])
		}
		return exitOK
	}
	var ans struct {
		AgentID string `json:"agent_id"`
		Token   string `json:"token"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.Token == "" {
		return failure(s, "token rotate", fmt.Errorf("unexpected answer %q", body))
	}
	if *write != "" {
		if err := os.WriteFile(*write, []byte(ans.Token+"\n"), 0o600); err != nil {
			fmt.Fprintf(s.err, "token rotate: %v (the new token is %s)\n", err, ans.Token)
			return exitFailure
		}
		fmt.Fprintf(s.out, "%s: new token written to %s; the old ones are revoked\n", ans.AgentID, *write)
		return exitOK
	}
	if h.json() {
		printJSON(s.out, ans)
		return exitOK
	}
	fmt.Fprintln(s.out, ans.Token)
	fmt.Fprintf(s.err, "%s: new token above (shown once); the old ones are revoked\n", ans.AgentID)
	return exitOK
}

// opsCall makes an operator request with c's hub and token and returns the
// body of a 2xx answer.
func opsCall(ctx context.Context, c *client.Client, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL()+path, nil)
	if err != nil {
		return nil, err
	}
	if c.Token() != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", client.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		e := &client.Error{StatusCode: resp.StatusCode}
		_ = json.Unmarshal(b, e)
		return nil, e
	}
	return b, nil
}
