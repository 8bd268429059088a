// A tool agent of Calf's conversations in Node.js, written against the wire
// format alone (docs/conversations.md, "Agents in other languages"): the
// external prototype "calc-agent", a calculator, served from NATS JetStream.
//
//   node agent.mjs [--server URL] [--stream CALF] [--prefix calfbus]
//                  [--partitions 16] [--prototype calc-agent]
//
// It consumes the requests the conversation host forwards on the prototype's
// channel, calf.conv.external.{prototype}, from that channel's consumer group
// (the durable consumers the host created, one per partition), answers each
// on the request's reply channel with its correlation id, and acknowledges
// the request only once the answer is stored. Commands: add N..., sub A B,
// mul N..., div A B, sleep MS; anything else is answered with an error
// ("error: ..."). It prints a JSON line for each thing it does: ready,
// received, answered, failed.
import { connect } from 'nats';
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
  options: {
    server: { type: 'string', default: 'nats://127.0.0.1:4222' },
    stream: { type: 'string', default: 'CALF' },
    prefix: { type: 'string', default: 'calfbus' },
    partitions: { type: 'string', default: '16' },
    prototype: { type: 'string', default: 'calc-agent' },
  },
});
const partitions = Number(opts.partitions);
// The prototype's channel, and the name of its consumer group.
const channel = `calf.conv.external.${opts.prototype}`;

const log = (event, fields = {}) => console.log(JSON.stringify({ event, ...fields }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// consumerName is broker/nats.ConsumerName: the durable consumer of a
// group's partition.
function consumerName(group, p) {
  let clean = '';
  for (const ch of group) {
    if (clean.length >= 32) break;
    clean += /^[A-Za-z0-9_-]$/.test(ch) ? ch : '_';
  }
  const sum = createHash('sha256').update(group).digest('hex').slice(0, 12);
  return `${clean}_${sum}_p${p}`;
}

// partition is broker/nats.Partition: FNV-1a (32 bits) of the key, modulo
// the partitions.
function partition(key) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(key, 'utf8')) {
    h = Math.imul(h ^ b, 0x01000193) >>> 0;
  }
  return h % partitions;
}

// derive is a deterministic id of parts, as Calf derives its own: 32 hex
// digits of the SHA-256 of the parts, each followed by a zero byte.
function derive(...parts) {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 32);
}

class CommandError extends Error {}

function number(s) {
  const n = Number(s);
  if (s === undefined || s.trim() === '' || !Number.isFinite(n)) {
    throw new CommandError(`not a number: ${JSON.stringify(s ?? '')}`);
  }
  return n;
}

function exactly(args, n, usage) {
  if (args.length !== n) throw new CommandError(`usage: ${usage}`);
}

// calc carries out a command (its name and arguments) and returns the
// answer's text; a CommandError is the sender's mistake.
async function calc([name, ...args]) {
  switch (name) {
    case 'add':
      if (args.length === 0) throw new CommandError('usage: add N...');
      return String(args.map(number).reduce((a, b) => a + b, 0));
    case 'mul':
      if (args.length === 0) throw new CommandError('usage: mul N...');
      return String(args.map(number).reduce((a, b) => a * b, 1));
    case 'sub':
      exactly(args, 2, 'sub A B');
      return String(number(args[0]) - number(args[1]));
    case 'div': {
      exactly(args, 2, 'div A B');
      const [a, b] = args.map(number);
      if (b === 0) throw new CommandError('division by zero');
      return String(a / b);
    }
    case 'sleep': {
      exactly(args, 1, 'sleep MS');
      const ms = number(args[0]);
      if (ms < 0 || ms > 60000) throw new CommandError('sleep between 0 and 60000 ms');
      await sleep(ms);
      return `slept ${ms} ms`;
    }
    case undefined:
      throw new CommandError('no command: commands are add, sub, mul, div, sleep');
    default:
      throw new CommandError(`unknown command ${JSON.stringify(name)}: commands are add, sub, mul, div, sleep`);
  }
}

const nc = await connect({ servers: opts.server, name: `calf-${opts.prototype}` });
const js = nc.jetstream();

// answer publishes the answer's text on the request's reply channel, with
// its correlation id, and returns once the stream has stored it. Its id is
// derived from the request's, so that an answer sent again (the request
// delivered again before its acknowledgement) is the same message.
async function answer(envelope, req, text) {
  const conv = req.message.conversation_id;
  const corr = req.message.correlation_id;
  const data = {
    conversation_id: conv,
    user_id: null,
    agent_id: req.instance,
    message: text,
    timestamp: new Date().toISOString(),
    ...(corr ? { correlation_id: corr } : {}),
  };
  const id = derive('answer', envelope.id);
  const out = {
    id,
    channel: req.reply_channel,
    key: conv,
    data,
    metadata: { ...(corr ? { correlation_id: corr } : {}), causation_id: envelope.id, time: data.timestamp },
  };
  await js.publish(`${opts.prefix}.${partition(conv)}.${req.reply_channel}`, JSON.stringify(out), { msgID: id });
}

// handle serves one request: answered, then acknowledged. While it works it
// tells the server the request is in progress, since the consumers give a
// request back to another process after their ack wait (2 s by default).
async function handle(m) {
  let envelope;
  let req;
  try {
    envelope = m.json();
    req = envelope.data;
    if (!req?.message?.conversation_id || !req.reply_channel?.startsWith('calf.conv.') || !req.instance) {
      throw new Error('not a conversation request');
    }
  } catch (e) {
    log('failed', { error: `malformed request: ${e.message}` });
    m.term(); // it can never be answered
    return;
  }
  const msg = req.message;
  const words = msg.command?.length ? msg.command : (msg.message ?? '').trim().split(/\s+/).filter(Boolean);
  log('received', {
    id: envelope.id,
    correlation_id: msg.correlation_id ?? null,
    from: req.from,
    command: words,
    redelivered: m.redelivered,
    deliveries: m.info.deliveryCount,
    seq: m.seq,
  });
  const heartbeat = setInterval(() => m.working(), 500);
  try {
    let text;
    try {
      text = await calc(words);
    } catch (e) {
      if (!(e instanceof CommandError)) throw e;
      text = `error: ${e.message}`;
    }
    await answer(envelope, req, text);
    await m.ackAck();
    log('answered', { id: envelope.id, correlation_id: msg.correlation_id ?? null, message: text });
  } catch (e) {
    log('failed', { id: envelope.id, error: String(e) });
    m.nak(1000); // delivered again in a second
  } finally {
    clearInterval(heartbeat);
  }
}

// Requests are keyed by conversation: a conversation's requests are handled
// one at a time, in order, and those of different conversations at once.
const lanes = new Map();
function dispatch(m) {
  let conv = '';
  try {
    conv = String(m.json().key ?? '');
  } catch {
    // handle() terms it
  }
  const next = (lanes.get(conv) ?? Promise.resolve()).then(() => handle(m));
  lanes.set(conv, next);
  next.finally(() => {
    if (lanes.get(conv) === next) lanes.delete(conv);
  });
}

// consume starts reading partition p's consumer, once the host has
// created it, and returns the loop that reads it.
async function consume(p) {
  const name = consumerName(channel, p);
  let consumer;
  for (let tries = 0; ; tries++) {
    try {
      consumer = await js.consumers.get(opts.stream, name);
      break;
    } catch (e) {
      if (tries === 0) log('waiting', { consumer: name, error: String(e) });
      await sleep(500);
    }
  }
  const msgs = await consumer.consume({ max_messages: 64 });
  // Wrapped: an async function returning a promise would wait for it.
  return {
    done: (async () => {
      for await (const m of msgs) dispatch(m);
    })(),
  };
}

const loops = [];
for (let p = 0; p < partitions; p++) loops.push((await consume(p)).done);
log('ready', { channel, stream: opts.stream, partitions });

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, async () => {
    await nc.drain();
    process.exit(0);
  });
}
await Promise.all(loops);
