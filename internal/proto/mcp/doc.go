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
//     header. The handler refuses cross-origin browser requests (403); a
//     401 names the RFC 9728 protected-resource metadata, which Mount also
//     serves.
//   - stdio (ServeStdio): for hosts that launch a command, either over a
//     local relay (the embedded hub) or as a bridge to a remote hub's /mcp.
//     Both eras share the connection (router.go).
//
// The server is an adapter of the hub's contract (Name, Mount, Run).
//
// # Identity and authorization
//
// The MCP host acts as one agent of the hub, and every operation goes to
// the core with the caller's principal, which decides (no store access
// here). An agent's token acts as that agent; the admin token as the
// operator's internal id (OperatorID); a hub with auth off as
// Options.HostAgentID; a privileged caller may name another agent (the
// Switchboard-Agent header, Options.Agent). The host agent is registered
// on first use as a pull-endpoint agent (protocol "mcp"), so answers to it
// are queued for it.
//
// # Tools, resources, prompts
//
// Tools (all with portable input and output schemas; results carry
// structured content): list_agents, get_agent_card, send_message,
// get_receipt, wait_for_reply (a correlated message or the receiver's
// inline answer), check_inbox, ack_messages, reply, list_conversations,
// get_conversation, and amp_tick when an AMP engine is configured.
// Resources: switchboard://agents, switchboard://conversations, the
// templates switchboard://agents/{id} and switchboard://conversations/{id}
// (subscriptions notify on change, driven by the relay's event bus, and
// are accepted only for what the caller may read), and, with AMP, the AMP
// spec document as amp://v0.1/spec and puax://v4/amp. Prompt:
// delegate_task. send_message and wait_for_reply also run as MCP tasks
// (tasks.go); a stdio session bound to an agent is a Claude Code channel
// (channel.go).
//
// Errors are mapped in one place (errors.go): a tool's failure is a
// result with isError, "<kind>: <message>"; everything else is a JSON-RPC
// error whose code follows the core's error kind.
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
