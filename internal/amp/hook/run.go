package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-hub/switchboard/internal/amp"
	"github.com/switchboard-hub/switchboard/internal/amp/guard"
)

// MaxInput bounds the hook payload read from stdin (tool responses can be
// large; anything beyond is ignored).
const MaxInput = 16 << 20

// Environment variables read by the hook CLI.
const (
	// EnvPhrases names a phrase file (see amp.PhrasesFile); by default
	// <state dir>/phrases.json is used if it exists.
	EnvPhrases = "SWITCHBOARD_AMP_PHRASES"
	// EnvNow fixes the clock (RFC 3339), for reproducible runs and tests.
	EnvNow = "SWITCHBOARD_AMP_NOW"
)

// DefaultSessionID is used when the payload has no session_id.
const DefaultSessionID = "default"

// Options configures Run.
type Options struct {
	// StateDir is the state directory (default amp.DefaultStateDir()).
	StateDir string
	// GuardMode is the guard mode (default guard.ModeFromEnv()).
	GuardMode guard.Mode
	// PhrasesFile overrides the phrase lists (default: EnvPhrases, then
	// <state dir>/phrases.json if present).
	PhrasesFile string
	// Clock overrides the clock (default: EnvNow, then time.Now).
	Clock amp.Clock
	// Envelope, if set, receives the tick's AMP envelope as one JSON line.
	Envelope io.Writer
	// NoStopGate turns the Stop confidence gate into a no-op reply.
	NoStopGate bool
	// Log receives diagnostics (default: discarded).
	Log io.Writer
	// Flags are the reference's command-line fields, which win over the
	// payload's (puax hook.js --session-id, --message, --tool, …).
	Flags Flags
}

// Flags are the reference hook's command-line fields. Empty ones leave the
// payload's value.
type Flags struct {
	SessionID string
	// Message is the prompt (UserPromptSubmit) or the agent's last text (Stop).
	Message string
	Tool    string
	// ToolArgs is the tool input as JSON.
	ToolArgs string
	// Result is the tool response: JSON, or text.
	Result string
	Error  string
}

// apply overrides the payload's fields with the flags that are set.
func (f Flags) apply(in *Input) {
	if f.SessionID != "" {
		in.SessionID = f.SessionID
	}
	if f.Message != "" {
		in.Prompt, in.LastAssistantMessage = f.Message, f.Message
	}
	if f.Tool != "" {
		in.ToolName = f.Tool
	}
	if f.ToolArgs != "" {
		var m map[string]any
		if json.Unmarshal([]byte(f.ToolArgs), &m) == nil {
			in.ToolInput = m
		}
	}
	if f.Result != "" {
		if json.Valid([]byte(f.Result)) {
			in.ToolResponse = json.RawMessage(f.Result)
		} else {
			b, _ := json.Marshal(f.Result)
			in.ToolResponse = b
		}
	}
	if f.Error != "" {
		in.Error = f.Error
	}
}

// Run handles one hook invocation for event (session-start, user-prompt,
// pre-tool-use, post-tool-use, post-tool-use-failure, pre-compact, stop, or
// the PascalCase names) and returns the process exit code, which is always
// 0: nothing triggered answers {}, and an internal fault answers {} too,
// except in PreToolUse, where it denies the call (the guard fails closed).
func Run(ctx context.Context, event string, stdin io.Reader, stdout io.Writer, opts Options) (code int) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	ev, known := amp.ParseHostEvent(event)
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(opts.Log, "switchboard hook %s: internal fault: %v\n", event, p)
			if ev == amp.HostPreToolUse {
				writeJSON(stdout, denyReply(guard.CodeGuardError+": internal fault in the guard: "+fmt.Sprint(p)))
			} else {
				io.WriteString(stdout, "{}\n")
			}
			code = 0
		}
	}()
	if !known || ev == amp.HostManual || ev == amp.HostModelOutput {
		fmt.Fprintf(opts.Log, "switchboard hook: unknown event %q\n", event)
		io.WriteString(stdout, "{}\n")
		return 0
	}
	data, err := io.ReadAll(io.LimitReader(stdin, MaxInput))
	if err != nil {
		return fault(stdout, opts, ev, fmt.Errorf("read stdin: %w", err))
	}
	in, err := ParseInput(data)
	if err != nil {
		return fault(stdout, opts, ev, err)
	}
	opts.Flags.apply(&in)
	if opts.GuardMode == "" {
		opts.GuardMode = guard.ModeFromEnv()
	}
	if in.SessionID == "" {
		in.SessionID = DefaultSessionID
	}

	// The guard's verdict comes first and does not depend on the state
	// directory: a store failure never turns a denial into an allow.
	var verdict guard.Decision
	if ev == amp.HostPreToolUse {
		if in.Cwd == "" {
			// The host runs its hooks in the session's directory: without
			// a cwd in the payload, relative paths, symlinks and scripts
			// resolve against the hook's own.
			in.Cwd, _ = os.Getwd()
		}
		verdict = guard.Check(guard.Request{Mode: opts.GuardMode, Tool: in.ToolName, Input: in.ToolInput, Cwd: in.Cwd})
		if !verdict.Deny && opts.Envelope == nil {
			io.WriteString(stdout, "{}\n") // the hot path: no state I/O
			return 0
		}
	}

	engine, err := newEngine(opts)
	var res amp.Result
	if err == nil {
		res, err = engine.Step(ctx, tickInput(ev, in))
	}
	if err != nil {
		if ev == amp.HostPreToolUse {
			// The guard decided; only the bookkeeping failed. Its verdict stands.
			fmt.Fprintf(opts.Log, "switchboard hook %s: %v\n", ev, err)
			if verdict.Deny {
				writeJSON(stdout, denyReply(amp.DenyReason(verdict.Reason)))
			} else {
				io.WriteString(stdout, "{}\n")
			}
			return 0
		}
		return fault(stdout, opts, ev, err)
	}
	if opts.Envelope != nil {
		writeJSON(opts.Envelope, res.Envelope)
	}
	writeJSON(stdout, reply(ev, res, opts))
	return 0
}

// fault answers an internal error: deny for PreToolUse, {} otherwise.
func fault(stdout io.Writer, opts Options, ev amp.HostEvent, err error) int {
	fmt.Fprintf(opts.Log, "switchboard hook %s: %v\n", ev, err)
	if ev == amp.HostPreToolUse {
		writeJSON(stdout, denyReply(guard.CodeGuardError+": the guard could not check this call: "+err.Error()))
		return 0
	}
	io.WriteString(stdout, "{}\n")
	return 0
}

func newEngine(opts Options) (*amp.Engine, error) {
	dir := opts.StateDir
	if dir == "" {
		d, err := amp.DefaultStateDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	eopts := []amp.Option{amp.WithGuardMode(opts.GuardMode)}
	clock := opts.Clock
	if clock == nil {
		if s := os.Getenv(EnvNow); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvNow, err)
			}
			clock = amp.ClockFunc(func() time.Time { return t })
		}
	}
	if clock != nil {
		eopts = append(eopts, amp.WithClock(clock))
	}
	pf := opts.PhrasesFile
	if pf == "" {
		pf = os.Getenv(EnvPhrases)
	}
	if pf == "" {
		if cand := filepath.Join(dir, "phrases.json"); fileExists(cand) {
			pf = cand
		}
	}
	if pf != "" {
		p, err := amp.LoadPhrases(pf)
		if err != nil {
			fmt.Fprintf(opts.Log, "switchboard hook: %v (using the built-in phrases)\n", err)
		} else {
			eopts = append(eopts, amp.WithPhrases(p))
		}
	}
	return amp.New(amp.NewFileStore(dir), eopts...), nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// handler is how the hook answers one host event: what the event takes
// from the payload into the engine's tick, and how the tick's result is
// rendered for the host. Every event is dispatched through handlers, so a
// feature that adds to some events' replies (such as an inbox of unread
// messages at SessionStart, UserPromptSubmit and Stop) wraps their
// entries here and nothing else.
type handler struct {
	input func(in Input, t *amp.TickInput)
	reply func(res amp.Result, opts Options) output
}

// contextReply injects the tick's text as additionalContext.
func contextReply(ev amp.HostEvent) func(amp.Result, Options) output {
	return func(res amp.Result, _ Options) output {
		if res.Injection == "" {
			return output{}
		}
		return output{HookSpecificOutput: &hookSpecific{HookEventName: string(ev), AdditionalContext: res.Injection}}
	}
}

func toolInput(in Input, t *amp.TickInput) { t.ToolName, t.ToolInput = in.ToolName, in.ToolInput }

func toolResult(in Input, t *amp.TickInput) {
	toolInput(in, t)
	t.Result = in.ToolResult()
}

var handlers = map[amp.HostEvent]handler{
	amp.HostSessionStart: {
		input: func(in Input, t *amp.TickInput) { t.Source = in.Source },
		reply: contextReply(amp.HostSessionStart),
	},
	amp.HostUserPromptSubmit: {
		input: func(in Input, t *amp.TickInput) { t.Message = in.Prompt },
		reply: contextReply(amp.HostUserPromptSubmit),
	},
	amp.HostPreToolUse: {
		input: toolInput,
		reply: func(res amp.Result, _ Options) output {
			if res.Deny {
				return denyReply(res.Reason)
			}
			return output{}
		},
	},
	amp.HostPostToolUse:        {input: toolResult, reply: contextReply(amp.HostPostToolUse)},
	amp.HostPostToolUseFailure: {input: toolResult, reply: contextReply(amp.HostPostToolUseFailure)},
	amp.HostPreCompact: {
		input: func(in Input, t *amp.TickInput) {
			t.Trigger = in.Trigger
			summary := TranscriptSummary(in.TranscriptPath, amp.MaxSummary)
			if in.CustomInstructions != "" {
				summary = "Compaction instructions: " + in.CustomInstructions + "\n" + summary
			}
			t.Summary = summary
		},
		reply: func(amp.Result, Options) output { return output{} }, // the checkpoint is the work
	},
	amp.HostStop: {
		input: func(in Input, t *amp.TickInput) {
			t.Message = in.LastAssistantMessage
			t.StopHookActive = in.StopHookActive
		},
		reply: func(res amp.Result, opts Options) output {
			if res.Block && !opts.NoStopGate {
				return output{Decision: "block", Reason: res.Reason}
			}
			return output{}
		},
	},
}

// tickInput maps a hook payload to an engine input.
func tickInput(ev amp.HostEvent, in Input) amp.TickInput {
	t := amp.TickInput{SessionID: in.SessionID, Event: ev, Cwd: in.Cwd}
	if h, ok := handlers[ev]; ok {
		h.input(in, &t)
	}
	return t
}

// hookSpecific is Claude Code's hookSpecificOutput object.
type hookSpecific struct {
	HookEventName            string `json:"hookEventName"`
	AdditionalContext        string `json:"additionalContext,omitempty"`
	PermissionDecision       string `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
}

// output is a Claude Code hook reply.
type output struct {
	Decision           string        `json:"decision,omitempty"`
	Reason             string        `json:"reason,omitempty"`
	HookSpecificOutput *hookSpecific `json:"hookSpecificOutput,omitempty"`
}

func denyReply(reason string) output {
	return output{HookSpecificOutput: &hookSpecific{HookEventName: string(amp.HostPreToolUse),
		PermissionDecision: "deny", PermissionDecisionReason: reason}}
}

// reply renders a tick result in Claude Code's current hook contract.
func reply(ev amp.HostEvent, res amp.Result, opts Options) output {
	if h, ok := handlers[ev]; ok {
		return h.reply(res, opts)
	}
	return output{}
}

// writeJSON writes v as one line of JSON without HTML escaping.
func writeJSON(w io.Writer, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		buf.WriteString("{}\n")
	}
	w.Write(buf.Bytes())
}

// ErrUnknownHost is returned by install for a host other than claude-code.
var ErrUnknownHost = errors.New("hook: unknown host")
