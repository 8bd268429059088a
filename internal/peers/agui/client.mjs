// Drives an AG-UI endpoint with the official @ag-ui/client HttpAgent:
// node client.mjs URL TOKEN. A run that asks for an approval ends with an
// interrupt; the next run answers it. Prints one JSON line per run.
import { HttpAgent } from '@ag-ui/client';

const [url, token, decision] = process.argv.slice(2);
const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` }, threadId: `agui-${Date.now()}` });
agent.addMessage({ id: 'u1', role: 'user', content: 'add 2 and 3' });
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));

let types = [];
let finished = null;
const subscriber = {
  onEvent: ({ event }) => { types.push(event.type); },
  onRunFinishedEvent: ({ event }) => { finished = event; },
};
await agent.runAgent({ runId: 'run-1' }, subscriber);
out('first', { types, outcome: finished?.outcome ?? null, pending: agent.pendingInterrupts });

types = [];
finished = null;
const approved = decision !== 'deny';
const resume = agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: 'resolved', payload: { approved, message: approved ? undefined : 'not now' } }));
await agent.runAgent({ runId: 'run-2', resume }, subscriber);
out('second', {
  types,
  outcome: finished?.outcome ?? null,
  pending: agent.pendingInterrupts,
  messages: agent.messages.map((m) => ({ role: m.role, content: m.content, toolCalls: m.toolCalls?.map((c) => c.function.name) })),
});
