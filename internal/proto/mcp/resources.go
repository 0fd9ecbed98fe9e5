package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Resource URIs.
const (
	AgentsURI               = "switchboard://agents"
	AgentURITemplate        = "switchboard://agents/{id}"
	ConversationsURI        = "switchboard://conversations"
	ConversationURITemplate = "switchboard://conversations/{id}"
	agentPrefix             = "switchboard://agents/"
	conversationPrefix      = "switchboard://conversations/"
)

// ResourceKind is what a switchboard:// URI names.
type ResourceKind int

// Resource kinds.
const (
	ResourceAgents ResourceKind = iota + 1
	ResourceAgent
	ResourceConversations
	ResourceConversation
)

// ErrBadURI reports a URI that names none of the hub's resources.
var ErrBadURI = errors.New("not a switchboard resource URI")

// ParseURI parses a switchboard:// resource URI into its kind and id.
func ParseURI(uri string) (ResourceKind, string, error) {
	switch uri {
	case AgentsURI:
		return ResourceAgents, "", nil
	case ConversationsURI:
		return ResourceConversations, "", nil
	}
	kind := ResourceAgent
	rest, ok := strings.CutPrefix(uri, agentPrefix)
	if !ok {
		kind = ResourceConversation
		if rest, ok = strings.CutPrefix(uri, conversationPrefix); !ok {
			return 0, "", fmt.Errorf("%w: %q", ErrBadURI, uri)
		}
	}
	id, err := url.PathUnescape(rest)
	if err != nil || id == "" || strings.ContainsAny(id, "/?#") {
		return 0, "", fmt.Errorf("%w: %q has no valid id", ErrBadURI, uri)
	}
	if kind == ResourceAgent && !core.ValidAgentID(id) {
		return 0, "", fmt.Errorf("%w: %q is not a valid agent id", ErrBadURI, id)
	}
	if kind == ResourceConversation && len(id) > 200 {
		return 0, "", fmt.Errorf("%w: conversation id longer than 200 characters", ErrBadURI)
	}
	return kind, id, nil
}

// AgentURI is the resource URI of an agent.
func AgentURI(id string) string { return agentPrefix + url.PathEscape(id) }

// ConversationURI is the resource URI of a conversation.
func ConversationURI(id string) string { return conversationPrefix + url.PathEscape(id) }

func (s *Server) addResources() {
	s.srv.AddResource(&sdk.Resource{URI: AgentsURI, Name: "agents", Title: "Agents",
		Description: "Every agent registered on the hub (JSON).", MIMEType: "application/json"}, s.readResource)
	s.srv.AddResource(&sdk.Resource{URI: ConversationsURI, Name: "conversations", Title: "Conversations",
		Description: "Your conversations, most recent first (JSON).", MIMEType: "application/json"}, s.readResource)
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: AgentURITemplate, Name: "agent", Title: "Agent card",
		Description: "One agent and its card (JSON).", MIMEType: "application/json"}, s.readResource)
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: ConversationURITemplate, Name: "conversation",
		Title: "Conversation", Description: "A conversation and its messages (JSON).", MIMEType: "application/json"}, s.readResource)
}

func (s *Server) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	v, err := s.resource(ctx, s.callerOf(req.Extra), uri)
	switch {
	case core.KindOf(err) == core.KindNotFound:
		return nil, sdk.ResourceNotFoundError(uri)
	case err != nil:
		return nil, s.rpcError(err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, s.rpcError(err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// resource reads switchboard:// resource uri for c: what the core lets c
// see of it. A hidden agent, an unknown one and a conversation c is not a
// member of are all not found.
func (s *Server) resource(ctx context.Context, c caller, uri string) (any, error) {
	kind, id, err := ParseURI(uri)
	if err != nil {
		return nil, notFound("%v", err)
	}
	switch kind {
	case ResourceAgents:
		agents, err := s.agents(ctx, c, "", false, 1000)
		if err != nil {
			return nil, err
		}
		return map[string]any{"agents": agents}, nil
	case ResourceAgent:
		a, err := s.relay.LookupAgent(ctx, c.p, id)
		if err != nil {
			return nil, err
		}
		return agentView(s.relay, a, true), nil
	case ResourceConversations:
		list, err := s.conversations(ctx, c, c.agentID, 100)
		if err != nil {
			return nil, err
		}
		return map[string]any{"conversations": list}, nil
	}
	return s.conversation(ctx, c, id, 0, 1000)
}

// authorizeSubscriptions is a receiving middleware: a subscription to a
// resource (resources/subscribe before 2026-07-28, subscriptions/listen
// after) is accepted only for a resource the caller may read, so that
// nobody is notified of changes to a conversation it is not a member of
// or an agent it may not see; the refusal is the one an unknown resource
// gets.
func (s *Server) authorizeSubscriptions(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		var uris []string
		switch r := req.(type) {
		case *sdk.SubscribeRequest:
			uris = []string{r.Params.URI}
		case *sdk.SubscriptionsListenRequest:
			if r.Params != nil && r.Params.Notifications != nil {
				uris = r.Params.Notifications.ResourceSubscriptions
			}
		default:
			return next(ctx, method, req)
		}
		c := s.callerOf(req.GetExtra())
		for _, uri := range uris {
			if s.isAMPURI(uri) {
				continue
			}
			if _, err := s.resource(ctx, c, uri); err != nil {
				if core.KindOf(err) == core.KindNotFound {
					return nil, sdk.ResourceNotFoundError(uri)
				}
				return nil, s.rpcError(err)
			}
		}
		return next(ctx, method, req)
	}
}

// Watch publishes resource-updated notifications to subscribed sessions,
// driven by the relay's events, until ctx ends: agent registrations change
// switchboard://agents and the agent's resource; messages of a
// conversation change its resource and switchboard://conversations.
func (s *Server) Watch(ctx context.Context) {
	events, stop := s.relay.Events().Subscribe(1024)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-events:
			for _, uri := range updatedBy(e) {
				if err := s.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil && ctx.Err() == nil {
					s.opt.Logger.Debug("mcp: resource updated notification", "uri", uri, "err", err)
				}
			}
		}
	}
}

// updatedBy lists the resources an event changes.
func updatedBy(e core.Event) []string {
	switch e.Type {
	case core.EventRegistered, core.EventDeregistered:
		return []string{AgentsURI, AgentURI(e.Agent)}
	case core.EventAccepted, core.EventDelivered, core.EventRejected, core.EventTimeout, core.EventReplayed:
		if e.ConversationID != "" {
			return []string{ConversationURI(e.ConversationID), ConversationsURI}
		}
	}
	return nil
}

func (s *Server) addPrompts() {
	s.srv.AddPrompt(&sdk.Prompt{Name: "delegate_task", Title: "Delegate a task",
		Description: "Pick a live agent that offers a capability and hand it a task, then wait for its answer.",
		Arguments: []*sdk.PromptArgument{
			{Name: "capability", Description: "the capability the task needs (see list_agents)", Required: true},
			{Name: "task", Description: "what the agent should do", Required: true},
			{Name: "agent_id", Description: "a specific agent to use instead of picking one"},
		}}, s.delegateTask)
}

func (s *Server) delegateTask(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	args := req.Params.Arguments
	capability, task := strings.TrimSpace(args["capability"]), strings.TrimSpace(args["task"])
	if capability == "" || task == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "delegate_task needs the capability and task arguments"}
	}
	c := s.callerOf(req.Extra)
	var agent *core.Agent
	if id := strings.TrimSpace(args["agent_id"]); id != "" {
		if !core.ValidAgentID(id) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("agent %q is not registered on this hub", id)}
		}
		a, err := s.relay.LookupAgent(ctx, c.p, id)
		if core.KindOf(err) == core.KindNotFound {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("agent %q is not registered on this hub", id)}
		}
		if err != nil {
			return nil, s.rpcError(err)
		}
		agent = a
	} else {
		list, err := s.relay.ListAgents(ctx, c.p, core.AgentFilter{Capability: capability, AliveAt: s.relay.Clock().Now(), Limit: 100})
		if err != nil {
			return nil, s.rpcError(err)
		}
		// Prefer the agent seen most recently.
		for _, a := range list {
			if agent == nil || a.LastSeen.After(agent.LastSeen) {
				agent = a
			}
		}
		if agent == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("no live agent offers capability %q; call list_agents to see what is available", capability)}
		}
	}
	card, _ := json.MarshalIndent(agentView(s.relay, agent, true), "", "  ")
	text := fmt.Sprintf(`Delegate this task to the agent %q on the Switchboard hub (it offers %q).

Task:
%s

Steps:
1. Call the send_message tool with to=%q and the task as text (add parts for files or images).
2. Call wait_for_reply with the message_id it returns; call it again while the outcome is "timeout".
3. If the outcome is "undeliverable", call list_agents with capability=%q and try another agent.
4. Report the agent's reply.`, agent.ID, capability, task, agent.ID, capability)
	return &sdk.GetPromptResult{
		Description: fmt.Sprintf("Delegate a %s task to %s", capability, agent.ID),
		Messages: []*sdk.PromptMessage{
			{Role: "user", Content: &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: AgentURI(agent.ID),
				MIMEType: "application/json", Text: string(card)}}},
			{Role: "user", Content: &sdk.TextContent{Text: text}},
		},
	}, nil
}

// complete offers completions for delegate_task's arguments and the
// agent resource template's id.
func (s *Server) complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	ref, arg := req.Params.Ref, req.Params.Argument
	var values []string
	if ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion needs a ref"}
	}
	agents, err := s.relay.ListAgents(ctx, s.callerOf(req.Extra).p, core.AgentFilter{Limit: 1000})
	if err != nil {
		return nil, s.rpcError(err)
	}
	switch {
	case ref.Type == "ref/prompt" && ref.Name == "delegate_task" && arg.Name == "capability":
		for _, a := range agents {
			for _, c := range a.Capabilities {
				if strings.HasPrefix(c, arg.Value) && !slices.Contains(values, c) {
					values = append(values, c)
				}
			}
		}
	case (ref.Type == "ref/prompt" && ref.Name == "delegate_task" && arg.Name == "agent_id") ||
		(ref.Type == "ref/resource" && ref.URI == AgentURITemplate && arg.Name == "id"):
		for _, a := range agents {
			if strings.HasPrefix(a.ID, arg.Value) {
				values = append(values, a.ID)
			}
		}
	}
	slices.Sort(values)
	total := len(values)
	if len(values) > 100 {
		values = values[:100]
	}
	return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: nonNilStrings(values), Total: total, HasMore: total > len(values)}}, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
