// An A2A agent built with the @a2a-js/sdk server (JSON-RPC, v1.0 with the
// v0.3 compatibility layer on). It answers every message with a completed
// task whose artifact is "echo: <text>". It prints "LISTENING <port>" once
// ready and "RECEIVED <json>" for each message it gets.
import express from 'express';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { Role, TaskState } from '@a2a-js/sdk';

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const port = server.address().port;
  base = `http://127.0.0.1:${port}`;
  console.log(`LISTENING ${port}`);
});
let base = '';

const card = () => ({
  name: 'Remote Echo Agent',
  description: 'An @a2a-js/sdk agent that echoes text',
  version: '1.0.0',
  supportedInterfaces: [
    { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
    { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '0.3', tenant: '' },
  ],
  capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain', 'application/json'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'echo', description: 'echoes text', tags: ['echo'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
});

const text = (p) => (p.content && p.content.$case === 'text' ? p.content.value : '');

const executor = {
  async execute(ctx, bus) {
    const msg = ctx.userMessage;
    console.log('RECEIVED ' + JSON.stringify({ messageId: msg.messageId, contextId: ctx.contextId, parts: msg.parts, metadata: msg.metadata }));
    const said = msg.parts.map(text).filter(Boolean).join(' ');
    const now = new Date().toISOString();
    bus.publish(AgentEvent.task({
      id: ctx.taskId, contextId: ctx.contextId, history: [msg], artifacts: [], metadata: undefined,
      status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now },
    }));
    bus.publish(AgentEvent.artifactUpdate({
      taskId: ctx.taskId, contextId: ctx.contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: 'echo-1', name: 'echo', description: '', extensions: [], metadata: undefined,
        parts: [{ content: { $case: 'text', value: 'echo: ' + said }, metadata: undefined, filename: '', mediaType: 'text/plain' }] },
    }));
    bus.publish(AgentEvent.statusUpdate({
      taskId: ctx.taskId, contextId: ctx.contextId, metadata: undefined,
      status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: new Date().toISOString(),
        message: { messageId: 'reply-' + msg.messageId, role: Role.ROLE_AGENT, contextId: ctx.contextId, taskId: ctx.taskId,
          parts: [{ content: { $case: 'text', value: 'echo: ' + said }, metadata: undefined, filename: '', mediaType: '' }],
          metadata: undefined, extensions: [], referenceTaskIds: [] } },
    }));
    bus.finished();
  },
  async cancelTask() {},
};

// The handler reads capabilities and modes from the card; the served card
// (with the real port in its URLs) comes from agentCardHandler.
const handler = new DefaultRequestHandler(card(), new InMemoryTaskStore(), executor);
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: async () => card() }));
app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
