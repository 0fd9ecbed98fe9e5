// Drives an agent on a Switchboard hub with the @a2a-js/sdk client and
// prints one JSON summary line. Usage:
//   node client.mjs MODE WORKER_BASE SLOW_BASE PUSH_URL
// MODE: v1 (default client, JSON-RPC), compat (legacyCompat on,
// agent-card.json: the SDK picks the 1.0 interface), legacy (legacyCompat
// on, the 0.3 card agent.json: the SDK's v0.3 JSON-RPC transport), rest
// (the HTTP+JSON transport, 1.0), rest-legacy (HTTP+JSON, legacyCompat on,
// the 0.3 card: 0.3's REST paths).
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const [mode, workerBase, slowBase, pushUrl] = process.argv.slice(2);
const out = { mode };

function factory() {
  if (mode === 'v1') return new ClientFactory();
  if (mode === 'rest') return new ClientFactory({ ...ClientFactoryOptions.default, transports: [new RestTransportFactory()] });
  const compat = { legacyCompat: { enabled: true } };
  const transport = mode === 'rest-legacy' ? new RestTransportFactory(compat) : new JsonRpcTransportFactory(compat);
  return new ClientFactory({ ...ClientFactoryOptions.default, transports: [transport],
    cardResolver: new DefaultAgentCardResolver(compat) });
}
// The resolver resolves a card path against the origin, so pass whole card URLs.
const legacy = mode === 'legacy' || mode === 'rest-legacy';
const cardPath = legacy ? '/.well-known/agent.json' : '/.well-known/agent-card.json';
const state = (s) => TaskState[s];
const texts = (parts) => (parts || []).filter((p) => p.content && p.content.$case === 'text').map((p) => p.content.value);
const msg = (t, extra = {}) => ({ messageId: `${mode}-${t}-${Date.now()}-${Math.random()}`, role: Role.ROLE_USER, contextId: '', taskId: '',
  parts: [{ content: { $case: 'text', value: t }, metadata: undefined, filename: '', mediaType: '' }], metadata: undefined,
  extensions: [], referenceTaskIds: [], ...extra });

const f = factory();
const worker = await f.createFromUrl(workerBase + cardPath, '');
const slow = await f.createFromUrl(slowBase + cardPath, '');
out.protocolVersion = worker.protocolVersion;

// send (blocking)
const sent = await worker.sendMessage({ message: msg('hello'), tenant: '', metadata: undefined });
out.send = { state: state(sent.status.state), artifacts: sent.artifacts.flatMap((a) => texts(a.parts)), history: sent.history.length };

// stream
const kinds = [];
let last;
for await (const ev of worker.sendMessageStream({ message: msg('streamed'), tenant: '', metadata: undefined })) {
  const p = ev.payload ?? { $case: ev.kind ?? 'unknown', value: ev };
  if (p.$case === 'statusUpdate') kinds.push('status:' + state(p.value.status.state));
  else if (p.$case === 'artifactUpdate') kinds.push('artifact:' + texts(p.value.artifact.parts).join(''));
  else kinds.push(p.$case);
  last = p;
}
out.stream = kinds;

// get (with history length)
const got = await worker.getTask({ id: sent.id, historyLength: 1, tenant: '' });
out.get = { state: state(got.status.state), history: got.history.length, id: got.id === sent.id };

// unknown task
try {
  await worker.getTask({ id: 'no-such-task', tenant: '' });
  out.unknownTask = 'no error';
} catch (e) {
  out.unknownTask = e.constructor.name + ':' + (e.envelopeCode ?? e.code ?? '');
}

// a task that stays working; push config; cancel
const pending = await slow.sendMessage({ message: msg('wait'), tenant: '', metadata: undefined,
  configuration: { acceptedOutputModes: [], returnImmediately: true, historyLength: undefined, taskPushNotificationConfig: undefined } });
out.pending = state(pending.status.state);
const cfg = await slow.createTaskPushNotificationConfig({ tenant: '', taskId: pending.id, id: 'cfg1', url: pushUrl, token: 'tok-' + mode,
  authentication: { scheme: 'Bearer', credentials: 'secret-' + mode } });
out.pushCreate = { id: cfg.id, url: cfg.url === pushUrl, token: cfg.token };
const g = await slow.getTaskPushNotificationConfig({ tenant: '', taskId: pending.id, id: 'cfg1' });
out.pushGet = g.id;
const l = await slow.listTaskPushNotificationConfig({ tenant: '', taskId: pending.id, pageSize: 0, pageToken: '' });
out.pushList = l.configs.map((c) => c.id);
const canceled = await slow.cancelTask({ id: pending.id, tenant: '', metadata: undefined });
out.cancel = state(canceled.status.state);
try {
  await slow.cancelTask({ id: pending.id, tenant: '', metadata: undefined });
  out.cancelAgain = 'no error';
} catch (e) {
  out.cancelAgain = e.constructor.name + ':' + (e.envelopeCode ?? e.code ?? '');
}
await slow.deleteTaskPushNotificationConfig({ tenant: '', taskId: pending.id, id: 'cfg1' });
const l2 = await slow.listTaskPushNotificationConfig({ tenant: '', taskId: pending.id, pageSize: 0, pageToken: '' });
out.pushAfterDelete = l2.configs.length;
out.taskId = pending.id;
if (!legacy) {
  const lt = await worker.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, statusTimestampAfter: undefined, pageSize: 10, pageToken: '', historyLength: 0, includeArtifacts: false });
  out.listTasks = lt.tasks.length;
}
console.log(JSON.stringify(out));
