// A coding-agent host built on the official TypeScript SDK that launches
// `switchboard mcp --embedded --dev --agent reviewer` on stdio, as Claude
// Code launches a channel server. Driven by mcp_test.go; prints one JSON
// line per step on stdout.
//
//   node channel_host.mjs channel <switchboard-binary> <data-dir>
//     An ATP agent sends the session's agent a message; the host gets the
//     notifications/claude/channel event, answers with the reply tool, and
//     the ATP agent reads the answer.
//   node channel_host.mjs tasks <switchboard-binary> <data-dir>
//     The host runs send_message and wait_for_reply as MCP tasks (2025-11-25)
//     with the SDK's experimental tasks client, and lists them.
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { z } from "zod";

const [mode, binary, dataDir] = process.argv.slice(2);
const t0 = Date.now();
const out = (obj) => process.stdout.write(JSON.stringify({ ...obj, ms: Date.now() - t0 }) + "\n");

// The channel event, as Claude Code's channels reference defines it.
const ChannelNotification = z.object({
  method: z.literal("notifications/claude/channel"),
  params: z.object({ content: z.string(), meta: z.record(z.string(), z.string()) }),
});

async function start(args) {
  const transport = new StdioClientTransport({ command: binary, args, stderr: "pipe" });
  const hub = new Promise((resolve, reject) => {
    let buf = "";
    transport.stderr.on("data", (chunk) => {
      buf += chunk.toString();
      const m = buf.match(/listening on (http:\/\/[0-9.:]+)/);
      if (m) resolve(m[1]);
    });
    setTimeout(() => reject(new Error("the embedded hub did not report its address: " + buf)), 20000).unref();
  });
  const client = new Client(
    { name: "switchboard-interop-channel-host", version: "1.0.0" },
    { capabilities: { experimental: { "claude/channel": {} } } },
  );
  const events = [];
  let wake = () => {};
  client.setNotificationHandler(ChannelNotification, (n) => {
    events.push(n.params);
    wake();
  });
  await client.connect(transport);
  const url = await hub;
  out({ step: "connected", hub: url, capabilities: client.getServerCapabilities() });
  const nextEvent = () =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no channel event within 30 s")), 30000);
      const check = () => {
        if (events.length > 0) {
          clearTimeout(timer);
          resolve(events.shift());
        }
      };
      wake = check;
      check();
    });
  return { client, url, nextEvent };
}

async function post(url, body) {
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!r.ok) throw new Error(url + ": " + r.status + " " + (await r.text()));
  return r.json();
}

async function channel() {
  const { client, url, nextEvent } = await start(["mcp", "--embedded", "--dev", "--agent", "reviewer", "--addr", "127.0.0.1:0", "--data", dataDir]);
  await post(url + "/atp/register", { agent_id: "author", capabilities: ["code"] });
  await post(url + "/atp/send", {
    message_id: "review-req-1", sender: "author", receiver: "reviewer", type: "task", conversation_id: "pr-7",
    payload: { text: "Please review PR 7." },
  });
  const ev = await nextEvent();
  out({ step: "event", event: ev });
  const reply = await client.callTool({ name: "reply", arguments: { message_id: ev.meta.message_id, text: "PR 7: approved." } });
  if (reply.isError) throw new Error("reply: " + JSON.stringify(reply.content));
  out({ step: "replied", result: reply.structuredContent });
  const r = await fetch(url + "/atp/results/review-req-1?wait_ms=20000");
  out({ step: "answer", results: (await r.json()).results });
  await client.close();
}

async function tasks() {
  const { client, url } = await start(["mcp", "--embedded", "--dev", "--addr", "127.0.0.1:0", "--data", dataDir]);
  // A worker that answers inline, as the ATP tutorial's worker does.
  const worker = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const env = JSON.parse(body);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ status: "accepted", result: { text: "reversed: " + [...env.payload.text].reverse().join("") } }));
    });
  });
  await new Promise((r) => worker.listen(0, "127.0.0.1", r));
  await post(url + "/atp/register", { agent_id: "reverser", callback_url: "http://127.0.0.1:" + worker.address().port });
  await client.listTools(); // learns which tools run as tasks
  const run = async (name, args) => {
    const seen = [];
    let result;
    for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args }, undefined, { task: { ttl: 60000 } })) {
      seen.push(m.type);
      if (m.type === "taskCreated") out({ step: "taskCreated", tool: name, task: m.task });
      if (m.type === "result") result = m.result;
      if (m.type === "error") throw m.error;
    }
    return { seen, result };
  };
  const sent = await run("send_message", { to: "reverser", text: "abc" });
  out({ step: "send", seen: sent.seen, result: sent.result.structuredContent });
  const waited = await run("wait_for_reply", { message_id: sent.result.structuredContent.message_id, timeout_ms: 20000 });
  out({ step: "wait", seen: waited.seen, result: waited.result.structuredContent });
  const list = await client.experimental.tasks.listTasks();
  out({ step: "list", tasks: list.tasks });
  worker.close();
  await client.close();
}

(mode === "channel" ? channel() : tasks()).catch((err) => {
  out({ step: "error", error: String(err && err.stack ? err.stack : err) });
  process.exit(1);
});
