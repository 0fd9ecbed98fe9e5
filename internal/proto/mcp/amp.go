package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/amp"
)

// AMP spec document URIs: the AMP 0.1 name and the reference
// implementation's alias.
const (
	AMPSpecURI      = "amp://v0.1/spec"
	AMPSpecAliasURI = "puax://v4/amp"
)

func (s *Server) ampURIs() []string {
	uris := []string{AMPSpecURI, AMPSpecAliasURI}
	if amp.SpecResourceURI != AMPSpecURI && amp.SpecResourceURI != AMPSpecAliasURI {
		uris = append(uris, amp.SpecResourceURI)
	}
	return uris
}

func (s *Server) isAMPURI(uri string) bool {
	if s.opt.AMP == nil {
		return false
	}
	for _, u := range s.ampURIs() {
		if u == uri {
			return true
		}
	}
	return false
}

func (s *Server) addAMP() {
	for i, uri := range s.ampURIs() {
		name := "amp-spec"
		if i > 0 {
			name = fmt.Sprintf("amp-spec-alias-%d", i)
		}
		s.srv.AddResource(&sdk.Resource{URI: uri, Name: name, Title: "AMP 0.1 specification",
			Description: "The AMP 0.1 spec document: events, blocks, gates, state and hooks (JSON).",
			MIMEType:    "application/json"},
			func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI,
					MIMEType: "application/json", Text: string(amp.SpecDocumentJSON())}}}, nil
			})
	}
	tool(s, &sdk.Tool{Name: "amp_tick", Title: "AMP tick",
		Description: "Run one AMP 0.1 tick for a session: give the host event (and the message, tool call or " +
			"result it carries) and get the AMP envelope and what the host should do (inject, deny, block)."}, s.ampTick)
}

// AMPTickInput is amp_tick's input: one host event.
type AMPTickInput struct {
	SessionID        string          `json:"session_id,omitempty" jsonschema:"the AMP session (default: the MCP session, else your agent id)"`
	Event            string          `json:"event,omitempty" jsonschema:"SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, PostToolUseFailure, PreCompact, Stop, ModelOutput or Manual (default)"`
	Message          string          `json:"message,omitempty" jsonschema:"the user's prompt or the agent's text"`
	ToolName         string          `json:"tool_name,omitempty"`
	ToolInput        map[string]any  `json:"tool_input,omitempty"`
	Result           *amp.ToolResult `json:"tool_result,omitempty"`
	Success          *bool           `json:"success,omitempty" jsonschema:"an external verifier's verdict"`
	Source           string          `json:"source,omitempty" jsonschema:"SessionStart's source: startup, resume, clear or compact"`
	Trigger          string          `json:"trigger,omitempty" jsonschema:"PreCompact's trigger: manual or auto"`
	Summary          string          `json:"summary,omitempty" jsonschema:"the reasoning summary to keep at PreCompact"`
	Force            bool            `json:"force,omitempty" jsonschema:"bypass the cooldowns"`
	DetectedTriggers []string        `json:"detected_triggers,omitempty" jsonschema:"triggers the host detected itself: giving_up_language, user_frustration, premature_convergence, creative_block, consecutive_failures, …"`
}

// AMPTickOutput is amp_tick's output.
type AMPTickOutput struct {
	SessionID string         `json:"session_id"`
	Envelope  map[string]any `json:"amp" jsonschema:"the AMP 0.1 envelope"`
	Injection string         `json:"injection,omitempty" jsonschema:"text to add to the agent's context"`
	Deny      bool           `json:"deny,omitempty"`
	Block     bool           `json:"block,omitempty"`
	Reason    string         `json:"reason,omitempty"`
}

func (s *Server) ampTick(ctx context.Context, req *sdk.CallToolRequest, in AMPTickInput) (*sdk.CallToolResult, AMPTickOutput, error) {
	sid := in.SessionID
	if sid == "" && req.Session != nil {
		sid = req.Session.ID()
	}
	if sid == "" {
		sid = s.callerOf(req.Extra).agentID
	}
	// Each credential has its own AMP sessions (local transports and dev
	// mode have no credential and share one namespace).
	r, err := s.opt.AMP.Step(ctx, amp.TickInput{SessionID: sid, Owner: s.ampOwner(req.Extra), Event: amp.HostEvent(in.Event), Message: in.Message,
		ToolName: in.ToolName, ToolInput: in.ToolInput, Result: in.Result, Success: in.Success, Source: in.Source,
		Trigger: in.Trigger, Summary: in.Summary, Force: in.Force, DetectedTriggers: in.DetectedTriggers})
	if errors.Is(err, amp.ErrUnknownEvent) || errors.Is(err, amp.ErrUnknownTrigger) {
		return nil, AMPTickOutput{}, invalid("%v", err)
	}
	if err != nil {
		return nil, AMPTickOutput{}, err
	}
	b, err := json.Marshal(r.Envelope)
	if err != nil {
		return nil, AMPTickOutput{}, err
	}
	out := AMPTickOutput{SessionID: sid, Injection: r.Injection, Deny: r.Deny, Block: r.Block, Reason: r.Reason}
	if err := json.Unmarshal(b, &out.Envelope); err != nil {
		return nil, AMPTickOutput{}, err
	}
	return nil, out, nil
}

// ampOwner names the credential a tool call comes with: its principal's
// key ("" for dev mode and for local transports acting in dev mode).
func (s *Server) ampOwner(extra *sdk.RequestExtra) string {
	return s.callerOf(extra).p.Key()
}
