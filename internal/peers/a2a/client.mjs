// Drives an A2A server with the @a2a-js/sdk client: node client.mjs URL TRANSPORT
// (JSONRPC or HTTP+JSON). Prints one JSON line per step: send, stream,
// get, cancel.
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const [url, transport, token] = process.argv.slice(2);
const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory(), new RestTransportFactory()],
  preferredTransports: [transport],
});
const client = await factory.createFromUrl(url);
const opts = token ? { serviceParameters: { Authorization: `Bearer ${token}` } } : undefined;

const message = (text) => ({
  messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text } }], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const request = (text, configuration) => ({ tenant: '', message: message(text), configuration, metadata: undefined });
const state = (s) => TaskState[s];
const text = (task) => (task.artifacts ?? []).flatMap((a) => a.parts).map((p) => p.content?.$case === 'text' ? p.content.value : '').join('');
const out = (o) => console.log(JSON.stringify(o));

const sent = await client.sendMessage(request('hello from js'), opts);
const task = sent.payload?.value ?? sent;
out({ step: 'send', kind: sent.payload?.$case, state: state(task.status?.state), text: text(task), id: task.id });

const kinds = [];
let streamed = '';
let last = '';
for await (const ev of client.sendMessageStream(request('stream from js'), opts)) {
  const c = ev.payload?.$case;
  kinds.push(c);
  if (c === 'artifactUpdate') streamed += ev.payload.value.artifact.parts.map((p) => p.content?.value ?? '').join('');
  if (c === 'statusUpdate') last = state(ev.payload.value.status.state);
}
out({ step: 'stream', kinds, text: streamed, last });

const got = await client.getTask({ tenant: '', id: task.id, historyLength: undefined }, opts);
out({ step: 'get', state: state(got.status?.state), text: text(got) });

const waiting = await client.sendMessage(request('wait', { acceptedOutputModes: [], returnImmediately: true, historyLength: undefined, taskPushNotificationConfig: undefined }), opts);
const wid = (waiting.payload?.value ?? waiting).id;
await new Promise((r) => setTimeout(r, 300));
const cancelled = await client.cancelTask({ tenant: '', id: wid, metadata: undefined }, opts);
out({ step: 'cancel', state: state(cancelled.status?.state), id: wid });

try {
  await client.getTask({ tenant: '', id: 'no-such-task', historyLength: undefined }, opts);
  out({ step: 'unknown', error: '' });
} catch (e) {
  out({ step: 'unknown', error: String(e?.message ?? e) });
}
