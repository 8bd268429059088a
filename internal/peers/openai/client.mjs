// Drives an OpenAI-compatible server with the official openai client:
// node client.mjs BASE_URL API_KEY MODEL. Prints one JSON line per step.
import OpenAI from 'openai';

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));

const models = await client.models.list();
out('models', { ids: models.data.map((m) => m.id) });

const chat = await client.chat.completions.create({
  model,
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'my name is Ada' },
    { role: 'assistant', content: 'hello Ada' },
    { role: 'user', content: 'chat plain' },
  ],
});
out('chat', { text: chat.choices[0].message.content, finish: chat.choices[0].finish_reason, usage: chat.usage });

const stream = await client.chat.completions.create({
  model,
  messages: [{ role: 'user', content: 'chat streamed' }],
  stream: true,
  stream_options: { include_usage: true },
});
let text = '';
let chunks = 0;
let usage = null;
for await (const chunk of stream) {
  chunks++;
  text += chunk.choices[0]?.delta?.content ?? '';
  if (chunk.usage) usage = chunk.usage;
}
out('chat-stream', { text, chunks, usage });

const resp = await client.responses.create({ model, instructions: 'Be brief.', input: 'responses plain' });
out('responses', { text: resp.output_text, status: resp.status, usage: resp.usage });

const rstream = await client.responses.create({ model, input: [{ role: 'user', content: 'responses streamed' }], stream: true });
let deltas = '';
let types = [];
let final = null;
for await (const ev of rstream) {
  types.push(ev.type);
  if (ev.type === 'response.output_text.delta') deltas += ev.delta;
  if (ev.type === 'response.completed') final = ev.response;
}
out('responses-stream', { text: deltas, types, final: final?.output_text ?? final?.output?.[0]?.content?.[0]?.text, status: final?.status });

const runner = client.responses.stream({ model, input: 'responses helper' });
const done = await runner.finalResponse();
out('responses-helper', { text: done.output_text });

for (const session of ['peer-session', 'peer-session']) {
  const r = await client.chat.completions.create(
    { model, messages: [{ role: 'user', content: 'in session' }] },
    { headers: { 'Calf-Session-Id': session } },
  );
  out('session', { text: r.choices[0].message.content });
}

try {
  await client.chat.completions.create({ model: 'no-such-agent', messages: [{ role: 'user', content: 'x' }] });
  out('unknown-model', { error: null });
} catch (e) {
  out('unknown-model', { status: e.status, code: e.code, message: e.message });
}

try {
  const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'fail' }], stream: true });
  for await (const _ of s) { /* drain */ }
  out('failed-stream', { error: null });
} catch (e) {
  out('failed-stream', { message: e.message });
}

const bad = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
try {
  await bad.models.list();
  out('wrong-key', { error: null });
} catch (e) {
  out('wrong-key', { status: e.status });
}
