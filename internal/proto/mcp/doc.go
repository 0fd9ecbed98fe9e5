// Package mcp is the MCP (Model Context Protocol) adapter: it serves the hub
// as an MCP server, so that any MCP host (an IDE, a desktop assistant, an
// agent framework) can find the hub's agents and message them, whatever
// protocol they speak. It is built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk); no JSON-RPC is written here.
//
// # Transports
//
//   - Streamable HTTP at /mcp (Server.Handler, Server.Mount): sessions
//     (Mcp-Session-Id, standalone SSE stream, resource subscriptions) for
//     protocol revisions up to 2025-11-25, and the sessionless 2026-07-28
//     revision (server/discover, per-request _meta, subscriptions/listen)
//     on the same path, chosen per request by the MCP-Protocol-Version
//     header. The handler refuses cross-origin browser requests (403).
//   - stdio (ServeStdio): for hosts that launch a command, either over a
//     local relay (the embedded hub) or as a bridge to a remote hub's /mcp.
//
// # Identity
//
// The MCP host acts as one agent of the hub. Without authentication (dev
// mode, stdio with an embedded hub) it is Options.HostAgentID ("mcp-host"
// by default). With authentication on, it is the agent whose bearer token
// the host presents; the operator's admin token acts as HostAgentID. The
// host agent is registered on first use as a pull-endpoint agent (protocol
// "mcp"), so messages sent to it (replies) are queued for it and
// wait_for_reply returns them to the MCP session; an agent that already
// exists (for example an ATP agent using its own token) is left as it is.
//
// # Tools, resources, prompts
//
// Tools (all with input and output schemas; results carry structured
// content): list_agents, get_agent_card, send_message, get_receipt,
// wait_for_reply, list_conversations, get_conversation, and amp_tick when
// an AMP engine is configured. Resources: switchboard://agents,
// switchboard://conversations, the templates switchboard://agents/{id}
// and switchboard://conversations/{id} (subscriptions notify on change,
// driven by the relay's event bus), and, with AMP, the AMP spec document
// as amp://v0.1/spec and puax://v4/amp. Prompt: delegate_task.
//
// Failures of a tool's work (unknown agent, refused content, bad
// arguments) are tool results with isError set; protocol failures (unknown
// tool, malformed request, unknown resource) are JSON-RPC errors.
//
// # Translation rules
//
// MCP → core (send_message): "text" becomes one text part; "parts" are
// canonical parts (kind text|image|file|code|data) where binary content is
// "bytes_base64" and structured content is "data" (any JSON value); when
// both are given the text part comes first. The message's protocol is
// "mcp", its sender the host agent, its default type "task".
//
// core → MCP (wait_for_reply, get_conversation): the structured output
// carries the canonical parts as above. The unstructured content maps
// each part: text → text content; code → text content in a fenced block;
// data → text content holding the JSON; image with bytes → image content;
// file with bytes → embedded resource (blob); image or file by URL →
// resource link.
package mcp
