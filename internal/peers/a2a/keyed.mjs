// Sends one message three times under one messageId with the
// @a2a-js/sdk client (send, stream, send), then another message under
// that messageId: node keyed.mjs URL TRANSPORT (JSONRPC or HTTP+JSON).
// Prints one JSON line per step: send1, stream2, send3, other.
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const [url, transport] = process.argv.slice(2);
const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory(), new RestTransportFactory()],
  preferredTransports: [transport],
});
const client = await factory.createFromUrl(url);

const id = randomUUID();
const request = (text) => ({
  tenant: '', configuration: undefined, metadata: undefined,
  message: {
    messageId: id, contextId: '', taskId: '', role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text } }], metadata: undefined, extensions: [], referenceTaskIds: [],
  },
});
const text = (task) => (task.artifacts ?? []).flatMap((a) => a.parts).map((p) => p.content?.$case === 'text' ? p.content.value : '').join('');
const out = (o) => console.log(JSON.stringify(o));

for (const step of ['send1', 'stream2', 'send3']) {
  if (step.startsWith('send')) {
    const sent = await client.sendMessage(request('keyed from js'));
    const task = sent.payload?.value ?? sent;
    out({ step, id: task.id, state: TaskState[task.status?.state], text: text(task) });
    continue;
  }
  let tid = '';
  let streamed = '';
  const kinds = [];
  for await (const ev of client.sendMessageStream(request('keyed from js'))) {
    const c = ev.payload?.$case;
    kinds.push(c);
    const v = ev.payload?.value;
    if (c === 'task') { tid = v.id; if (text(v)) streamed = text(v); }
    if (c === 'artifactUpdate') { tid = v.taskId; streamed += v.artifact.parts.map((p) => p.content?.value ?? '').join(''); }
    if (c === 'statusUpdate') tid = v.taskId;
  }
  out({ step, id: tid, kinds, text: streamed });
}

try {
  await client.sendMessage(request('another message'));
  out({ step: 'other', error: '' });
} catch (e) {
  out({ step: 'other', error: String(e?.message ?? e) });
}
