// An MCP host built on the official TypeScript SDK: it connects to
// Switchboard, lists the tools, sends a message to an agent and waits for its
// reply. Driven by mcp_test.go; prints one JSON line per step on stdout.
//
//   node client.mjs http <mcp-url> <agent>
//   node client.mjs stdio-bridge <switchboard-binary> <hub-url> <agent>
//   node client.mjs stdio-embedded <switchboard-binary> <data-dir> <agent> <agent-callback-url>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...args] = process.argv.slice(2);
const t0 = Date.now();
const out = (obj) => process.stdout.write(JSON.stringify({ ...obj, ms: Date.now() - t0 }) + "\n");

async function transportFor() {
  switch (mode) {
    case "http":
      return { transport: new StreamableHTTPClientTransport(new URL(args[0])), agent: args[1] };
    case "stdio-bridge":
      return {
        transport: new StdioClientTransport({ command: args[0], args: ["mcp", "--hub", args[1]], stderr: "inherit" }),
        agent: args[2],
      };
    case "stdio-embedded": {
      const [binary, dataDir, agent, callback] = args;
      const transport = new StdioClientTransport({
        command: binary,
        args: ["mcp", "--embedded", "--dev", "--addr", "127.0.0.1:0", "--data", dataDir],
        stderr: "pipe",
      });
      // The embedded hub says where it listens on stderr; the agent
      // registers there once it is known.
      const hub = new Promise((resolve, reject) => {
        let buf = "";
        transport.stderr.on("data", (chunk) => {
          buf += chunk.toString();
          const m = buf.match(/listening on (http:\/\/[0-9.:]+)/);
          if (m) resolve(m[1]);
        });
        setTimeout(() => reject(new Error("embedded hub did not report its address: " + buf)), 20000).unref();
      });
      return { transport, agent, hub, callback };
    }
    default:
      throw new Error("unknown mode " + mode);
  }
}

async function main() {
  const { transport, agent, hub, callback } = await transportFor();
  const client = new Client({ name: "switchboard-interop-ts", version: "1.0.0" });
  await client.connect(transport);
  out({ step: "connected", protocolVersion: transport.protocolVersion ?? null, server: client.getServerVersion() });
  if (hub) {
    const url = await hub;
    out({ step: "hub", url });
    const r = await fetch(url + "/atp/register", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent_id: agent, callback_url: callback, capabilities: ["echo"] }),
    });
    if (!r.ok) throw new Error("register: " + r.status + " " + (await r.text()));
  }
  const { tools } = await client.listTools();
  out({ step: "tools", names: tools.map((t) => t.name), withOutputSchema: tools.filter((t) => t.outputSchema).length });

  const sent = await client.callTool({ name: "send_message", arguments: { to: agent, text: "ping from the TypeScript SDK" } });
  if (sent.isError) throw new Error("send_message: " + JSON.stringify(sent.content));
  out({ step: "sent", result: sent.structuredContent });

  let progress = 0;
  const reply = await client.callTool(
    { name: "wait_for_reply", arguments: { message_id: sent.structuredContent.message_id, timeout_ms: 30000 } },
    undefined,
    { onprogress: () => progress++, timeout: 60000, resetTimeoutOnProgress: true },
  );
  if (reply.isError) throw new Error("wait_for_reply: " + JSON.stringify(reply.content));
  out({ step: "reply", result: reply.structuredContent, text: reply.content.filter((c) => c.type === "text").map((c) => c.text), progress });
  await client.close();
}

main().catch((err) => {
  out({ step: "error", error: String(err && err.stack ? err.stack : err) });
  process.exit(1);
});
