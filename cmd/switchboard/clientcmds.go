package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/proto/mamp"
)

func init() {
	register("agents", "list registered agents, or deregister one (agents [list] | agents deregister ID)", runAgents)
	register("send", "send a message and optionally wait for its receipt", runSend)
	register("receipts", "show a message's receipt", runReceipts)
	register("dlq", "list or replay dead letters (dlq list | dlq replay ID)", runDLQ)
	register("tail", "follow the live message flow", runTail)
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// defaultHub is the hub a client command talks to when nothing names one.
const defaultHub = "http://127.0.0.1:8080"

// outputFlag is --output table|json (and --json, its short form).
type outputFlag struct {
	format string
	asJSON bool
}

func (o *outputFlag) add(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "output", "table", "output format: table (for people) or json")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON (the same as --output json)")
}

// check refuses an unknown --output.
func (o *outputFlag) check() error {
	if o.format != "" && o.format != "table" && o.format != "json" {
		return fmt.Errorf("--output %q: want table or json", o.format)
	}
	return nil
}

func (o *outputFlag) json() bool { return o.asJSON || o.format == "json" }

// hubFlags are the flags every client command shares.
type hubFlags struct {
	hub, token, context string
	outputFlag
}

func (h *hubFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&h.hub, "hub", "", "hub base URL (env SWITCHBOARD_HUB; default: the context's, else "+defaultHub+")")
	fs.StringVar(&h.token, "token", "", "bearer token: an agent's credential or the admin token (env SWITCHBOARD_TOKEN; default: the context's, else admin.token in $SWITCHBOARD_DATA or ./switchboard-data, if readable)")
	fs.StringVar(&h.context, "context", "", "the saved context to use (env SWITCHBOARD_CONTEXT; default: the current one; see switchboard login)")
	h.outputFlag.add(fs)
}

// resolve finds the hub and the token: a flag, else its environment
// variable, else the context (the named one, or the current one), else
// the defaults. A context's token is used only with the context's own hub.
func (h *hubFlags) resolve() (hub, token string, err error) {
	if err := h.check(); err != nil {
		return "", "", err
	}
	hub, token = cmp.Or(h.hub, os.Getenv("SWITCHBOARD_HUB")), cmp.Or(h.token, os.Getenv("SWITCHBOARD_TOKEN"))
	name := cmp.Or(h.context, os.Getenv("SWITCHBOARD_CONTEXT"))
	cf, path, lerr := loadContexts()
	if lerr != nil && name != "" {
		return "", "", lerr
	}
	if cf != nil {
		c := cf.Contexts[cmp.Or(name, cf.Current)]
		if c == nil && name != "" {
			return "", "", fmt.Errorf("no context %q in %s (switchboard login --name %s saves one)", name, path, name)
		}
		if c != nil {
			if hub == "" {
				hub = c.Hub
			}
			if token == "" && strings.TrimRight(hub, "/") == c.Hub {
				token = c.Token
			}
		}
	}
	hub = cmp.Or(hub, defaultHub)
	if token == "" {
		if b, err := os.ReadFile(filepath.Join(envOr("SWITCHBOARD_DATA", "./switchboard-data"), "admin.token")); err == nil {
			token = strings.TrimSpace(string(b))
		}
	}
	return hub, token, nil
}

// client returns a client of the resolved hub with the resolved token.
func (h *hubFlags) client(opts ...client.Option) (*client.Client, error) {
	hub, tok, err := h.resolve()
	if err != nil {
		return nil, err
	}
	return client.New(hub, append([]client.Option{client.WithToken(tok)}, opts...)...), nil
}

// usageError prints a command-line problem and returns exitUsage.
func usageError(s stdio, cmd string, err error) int {
	fmt.Fprintf(s.err, "%s: %v\n", cmd, err)
	return exitUsage
}

// failure prints err and maps it to an exit code: 4 when the hub cannot be
// reached, 3 for 404, 2 for the other refusals of the request itself (400,
// 401, 403, 413, 422: fix the command line or the token), 1 otherwise.
func failure(s stdio, cmd string, err error) int {
	fmt.Fprintf(s.err, "%s: %v\n", cmd, err)
	var he *client.Error
	switch {
	case errors.Is(err, client.ErrUnavailable):
		return exitUnavail
	case errors.As(err, &he) && he.StatusCode == http.StatusNotFound:
		return exitNotFound
	case errors.As(err, &he) && he.StatusCode == http.StatusTooManyRequests:
		return exitFailure // the request was fine; try again later
	case errors.As(err, &he) && he.StatusCode == http.StatusConflict:
		return exitFailure // well formed, but the state forbids it (an id taken, not a dead letter)
	case errors.As(err, &he) && he.StatusCode >= 400 && he.StatusCode < 500:
		return exitUsage
	}
	return exitFailure
}

func newFlagSet(name, usage string, s stdio) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(s.err)
	fs.Usage = func() {
		fmt.Fprintln(s.err, usage+"\n\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func runAgents(ctx context.Context, args []string, s stdio) int {
	if len(args) > 0 && args[0] == "deregister" {
		return runDeregister(ctx, args[1:], s)
	}
	if len(args) > 0 && args[0] == "list" {
		args = args[1:]
	}
	fs := newFlagSet("agents", "Usage: switchboard agents [list] [flags]\n       switchboard agents deregister [flags] AGENT_ID\n\nLists registered agents, optionally by capability (needs a credential:\nany agent's or the admin token), or deregisters one (see\n\"switchboard agents deregister --help\").", s)
	var h hubFlags
	h.add(fs)
	capability := fs.String("capability", "", "only agents with this capability")
	alive := fs.Bool("alive", false, "only agents whose lease is current")
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	c, err := h.client()
	if err != nil {
		return usageError(s, "agents", err)
	}
	agents, err := c.Agents(ctx, *capability, *alive)
	if err != nil {
		return failure(s, "agents", err)
	}
	if h.json() {
		printJSON(s.out, agents)
		return exitOK
	}
	ids := make([]string, 0, len(agents))
	for id := range agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tALIVE\tENDPOINT\tCAPABILITIES\tLAST SEEN")
	for _, id := range ids {
		a := agents[id]
		seen := time.UnixMicro(int64(a.LastSeen * 1e6)).UTC().Format(time.RFC3339)
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\n", id, a.Alive, a.Endpoint, strings.Join(a.Capabilities, ","), seen)
	}
	tw.Flush()
	return exitOK
}

func runDeregister(ctx context.Context, args []string, s stdio) int {
	fs := newFlagSet("agents deregister", `Usage: switchboard agents deregister [flags] AGENT_ID

Deregisters an agent: it leaves every listing and stops receiving; its
queued messages end as dead letters (see docs/atp.md). Needs the admin
token or the agent's own.
Exit codes: 0 deregistered, 2 not allowed, 3 unknown agent, 4 hub unreachable.`, s)
	var h hubFlags
	h.add(fs)
	pos, code, ok := parseArgs(fs, args, 1)
	if !ok {
		return code
	}
	c, err := h.client()
	if err != nil {
		return usageError(s, "agents deregister", err)
	}
	if err := c.Deregister(ctx, pos[0]); err != nil {
		return failure(s, "agents deregister", err)
	}
	if h.json() {
		printJSON(s.out, map[string]any{"agent_id": pos[0], "deregistered": true})
	} else {
		fmt.Fprintf(s.out, "%s deregistered\n", pos[0])
	}
	return exitOK
}

func runSend(ctx context.Context, args []string, s stdio) int {
	fs := newFlagSet("send", `Usage: switchboard send --from SENDER --to RECEIVER [--text TEXT | --payload JSON] [flags]

Sends a message through the hub. Content is --text, optionally with --image
and --file attachments (multimodal: an MAMP or A2A receiver gets real image
and file parts; an ATP receiver gets {"text", "parts"}), or a --payload
object. Without --wait it returns once the hub has stored the message
(status queued). With --wait it waits, all told, up to that long for the
terminal status and exits 0 if delivered, 1 if rejected, timed out or
expired, or still queued when the wait runs out. When the hub cannot be
reached, the connection drops or the hub answers 429, 500, 502, 503, 504 or
507, the send is tried again (--retries times, backing off from 100 ms or as
Retry-After asks) with the same message id, so the hub stores it once.
Exit codes: 0 ok, 1 failed (also: the message id was used for another
message, by another sender, to another receiver or with other content),
2 usage (also: refused as malformed, too large or unauthorised),
3 unknown receiver, 4 hub unreachable.`, s)
	var h hubFlags
	h.add(fs)
	from := fs.String("from", "", "sender agent id (required)")
	to := fs.String("to", "", "receiver agent id (required)")
	typ := fs.String("type", "task.request", "message type")
	text := fs.String("text", "", "text content")
	payload := fs.String("payload", "", "payload as a JSON object (instead of --text); - reads standard input")
	id := fs.String("id", "", "message id (default random; reuse it to retry the same message safely)")
	corr := fs.String("correlation-id", "", "id of the message this one answers")
	conv := fs.String("conversation-id", "", "conversation id")
	var images, files multiFlag
	fs.Var(&images, "image", "attach an image file (its media type is taken from its bytes); repeatable")
	fs.Var(&files, "file", "attach a file (media type from its extension, checked against its bytes); repeatable")
	ttl := fs.Duration("ttl", 0, "time to live (default: the hub's --default-ttl, 1m unless set)")
	wait := fs.Duration("wait", 0, "wait up to this long for a terminal status")
	retries := fs.Int("retries", client.DefaultRetries, "times to try again after a failure that may pass (0: none)")
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	if *from == "" || *to == "" {
		fmt.Fprintln(s.err, "send: --from and --to are required")
		return exitUsage
	}
	var body any = map[string]any{"text": *text}
	if *payload != "" {
		raw := []byte(*payload)
		if *payload == "-" {
			var err error
			if raw, err = io.ReadAll(bufio.NewReader(s.in)); err != nil {
				fmt.Fprintf(s.err, "send: read payload: %v\n", err)
				return exitUsage
			}
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			fmt.Fprintf(s.err, "send: --payload must be a JSON object: %v\n", err)
			return exitUsage
		}
		body = obj
	}
	if len(images)+len(files) > 0 {
		if *payload != "" {
			fmt.Fprintln(s.err, "send: --image/--file go with --text, not --payload")
			return exitUsage
		}
		parts := []core.Part{}
		if *text != "" {
			parts = append(parts, mamp.TextPart(*text))
		}
		for _, list := range []struct {
			paths []string
			mk    func(string) (core.Part, error)
		}{{images, mamp.ImagePart}, {files, mamp.FilePart}} {
			for _, p := range list.paths {
				part, err := list.mk(p)
				if err != nil {
					fmt.Fprintf(s.err, "send: %v\n", err)
					return exitUsage
				}
				parts = append(parts, part)
			}
		}
		body = map[string]any{"text": *text, "parts": parts}
	}
	if *retries < 0 {
		fmt.Fprintln(s.err, "send: --retries must be 0 or more")
		return exitUsage
	}
	c, err := h.client(client.WithRetries(*retries))
	if err != nil {
		return usageError(s, "send", err)
	}
	m := client.Message{MessageID: *id, Sender: *from, Receiver: *to, Type: *typ, TTL: *ttl,
		CorrelationID: *corr, ConversationID: *conv, Payload: body}
	// One deadline for the whole wait: the hub waits with the send (up to
	// its own cap), and whatever is left of --wait after that is spent
	// watching the receipt.
	deadline := time.Now().Add(*wait)
	res, err := c.Send(ctx, m, *wait)
	if err != nil {
		return failure(s, "send", err)
	}
	status := res.Status
	if *wait > 0 && status == "queued" && time.Until(deadline) > 0 {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		rc, err := c.WaitReceipt(wctx, res.MessageID)
		cancel()
		if err == nil {
			status = rc.Status
			res.Receipt = rc.Receipt
		}
	}
	res.Status = status
	if h.json() {
		printJSON(s.out, res)
	} else {
		fmt.Fprintf(s.out, "%s %s", res.MessageID, status)
		if res.Duplicate {
			fmt.Fprint(s.out, " (duplicate)")
		}
		if len(res.Receipt) > 0 && string(res.Receipt) != "null" {
			fmt.Fprintf(s.out, " %s", res.Receipt)
		}
		fmt.Fprintln(s.out)
	}
	switch {
	case status == "delivered", status == "queued" && *wait == 0:
		return exitOK
	case status == "queued":
		// Still pending: it may yet be delivered, but not within the wait
		// the caller asked for.
		fmt.Fprintf(s.err, "switchboard send: %s not delivered within %v; it stays queued (see: switchboard receipts %s)\n", res.MessageID, *wait, res.MessageID)
	}
	return exitFailure
}

// historyTime prints a receipt event's time at a fixed width (microseconds,
// UTC), so that the history's columns line up.
const historyTime = "2006-01-02T15:04:05.000000Z"

func runReceipts(ctx context.Context, args []string, s stdio) int {
	fs := newFlagSet("receipts", "Usage: switchboard receipts [flags] MESSAGE_ID\n\nShows a message's receipt: status, attempts, history.\nExit codes: 0 found, 2 usage (or a token not allowed to read it), 3 unknown message, 4 hub unreachable.", s)
	var h hubFlags
	h.add(fs)
	pos, code, ok := parseArgs(fs, args, 1)
	if !ok {
		return code
	}
	c, err := h.client()
	if err != nil {
		return usageError(s, "receipts", err)
	}
	rc, err := c.Receipt(ctx, pos[0])
	if err != nil {
		return failure(s, "receipts", err)
	}
	if h.json() {
		printJSON(s.out, rc)
		return exitOK
	}
	fmt.Fprintf(s.out, "message   %s\nstatus    %s\nfrom      %s\nto        %s\nattempts  %d\n", rc.MessageID, rc.Status, rc.Sender, rc.Receiver, rc.Attempts)
	if rc.Code != 0 {
		fmt.Fprintf(s.out, "code      %d\n", rc.Code)
	}
	if rc.LastError != "" {
		fmt.Fprintf(s.out, "error     %s\n", rc.LastError)
	}
	if len(rc.Receipt) > 0 && string(rc.Receipt) != "null" {
		fmt.Fprintf(s.out, "reply     %s\n", rc.Receipt)
	}
	for _, e := range rc.History {
		line := fmt.Sprintf("  %s  %-11s  %s", e.At.UTC().Format(historyTime), e.Status, e.Detail)
		fmt.Fprintln(s.out, strings.TrimRight(line, " "))
	}
	return exitOK
}

func runDLQ(ctx context.Context, args []string, s stdio) int {
	usage := "Usage: switchboard dlq list [flags]\n       switchboard dlq replay [flags] MESSAGE_ID\n\nLists dead letters (messages that ended timeout or rejected) or re-queues one\nwith a fresh TTL. Needs the admin token.\nRun \"switchboard dlq list --help\" or \"switchboard dlq replay --help\" for flags."
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(s.err, usage)
			return exitOK
		}
		if len(args) > 0 {
			fmt.Fprintf(s.err, "dlq: unknown subcommand %q\n\n", args[0])
		}
		fmt.Fprintln(s.err, usage)
		return exitUsage
	}
	sub := args[0]
	var fs *flag.FlagSet
	var h hubFlags
	var receiver *string
	var limit *int
	var ttl *time.Duration
	want := 0
	if sub == "replay" {
		fs = newFlagSet("dlq replay", "Usage: switchboard dlq replay [flags] MESSAGE_ID\n\nRe-queues a dead letter (timeout or rejected) with a fresh TTL. Needs the admin token.\nExit codes: 0 queued, 1 not a dead letter, 2 usage, 3 unknown message, 4 hub unreachable.", s)
		ttl = fs.Duration("ttl", 0, "new TTL (default: the message's own)")
		want = 1
	} else {
		fs = newFlagSet("dlq list", "Usage: switchboard dlq list [flags]\n\nLists dead letters (messages that ended timeout or rejected), newest first. Needs the admin token.", s)
		receiver = fs.String("receiver", "", "only dead letters for this receiver")
		limit = fs.Int("limit", 100, "at most this many")
	}
	h.add(fs)
	pos, code, ok := parseArgs(fs, args[1:], want)
	if !ok {
		return code
	}
	c, err := h.client()
	if err != nil {
		return usageError(s, "dlq", err)
	}
	if sub == "replay" {
		rc, err := c.Replay(ctx, pos[0], *ttl)
		if err != nil {
			return failure(s, "dlq replay", err)
		}
		if h.json() {
			fmt.Fprintln(s.out, string(rc))
		} else {
			fmt.Fprintf(s.out, "%s queued\n", pos[0])
		}
		return exitOK
	}
	list, err := c.DeadLetters(ctx, *receiver, *limit)
	if err != nil {
		return failure(s, "dlq list", err)
	}
	if h.json() {
		printJSON(s.out, list)
		return exitOK
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MESSAGE\tSTATUS\tFROM\tTO\tATTEMPTS\tCODE\tLAST ERROR")
	for _, raw := range list {
		var r struct {
			MessageID string `json:"message_id"`
			Status    string `json:"status"`
			Sender    string `json:"sender"`
			Receiver  string `json:"receiver"`
			Attempts  int    `json:"attempts"`
			Code      int    `json:"code"`
			LastError string `json:"last_error"`
		}
		_ = json.Unmarshal(raw, &r)
		code := "-"
		if r.Code != 0 {
			code = strconv.Itoa(r.Code)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.MessageID, r.Status, r.Sender, r.Receiver, r.Attempts, code, cmp.Or(r.LastError, "-"))
	}
	tw.Flush()
	return exitOK
}

func runTail(ctx context.Context, args []string, s stdio) int {
	fs := newFlagSet("tail", "Usage: switchboard tail [flags]\n\nFollows the live message flow (accepted, delivered, retried, rejected, timed\nout) until interrupted, or -n events. Needs the admin token. Exits 4 if the\nhub closes the stream first (it stopped or restarted).", s)
	var h hubFlags
	h.add(fs)
	agent := fs.String("agent", "", "only events of this agent (as sender or receiver)")
	typ := fs.String("type", "", "only events of this type (accepted, delivered, retry, rejected, timeout, …)")
	count := fs.Int("n", 0, "exit after this many events (0: follow forever)")
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	c, err := h.client()
	if err != nil {
		return usageError(s, "tail", err)
	}
	q := []string{}
	if *agent != "" {
		q = append(q, "agent="+*agent)
	}
	if *typ != "" {
		q = append(q, "type="+*typ)
	}
	url := c.BaseURL() + "/v1/events?" + strings.Join(q, "&")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return failure(s, "tail", err)
	}
	if c.Token() != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		return failure(s, "tail", fmt.Errorf("%w: %v", client.ErrUnavailable, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		e := &client.Error{StatusCode: resp.StatusCode}
		_ = json.Unmarshal(b, e)
		return failure(s, "tail", e)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		data := strings.TrimPrefix(line, "data: ")
		if h.json() {
			fmt.Fprintln(s.out, data)
		} else {
			var e struct {
				Type      string    `json:"type"`
				At        time.Time `json:"at"`
				MessageID string    `json:"message_id"`
				Sender    string    `json:"sender"`
				Receiver  string    `json:"receiver"`
				Agent     string    `json:"agent"`
				Protocol  string    `json:"protocol"`
				Attempts  int       `json:"attempts"`
				Detail    string    `json:"detail"`
				Error     string    `json:"error"`
			}
			_ = json.Unmarshal([]byte(data), &e)
			who := e.Sender + " → " + e.Receiver
			if e.Agent != "" {
				who = e.Agent
			}
			extra := strings.TrimSpace(e.Detail + " " + e.Error)
			fmt.Fprintf(s.out, "%s  %-12s %-30s %s %s\n", e.At.Format("15:04:05.000"), e.Type, who, e.MessageID, extra)
		}
		seen++
		if *count > 0 && seen >= *count {
			return exitOK
		}
	}
	if ctx.Err() != nil {
		return exitOK // interrupted
	}
	// The hub went away (or restarted): say so, rather than end as if
	// the flow, or the -n events asked for, had been followed.
	events := "events"
	if seen == 1 {
		events = "event"
	}
	cause := fmt.Sprintf("the hub closed the event stream after %d %s", seen, events)
	if err := sc.Err(); err != nil {
		cause += " (" + err.Error() + ")"
	}
	return failure(s, "tail", fmt.Errorf("%w: %s", client.ErrUnavailable, cause))
}
