// Calf's web chat: talks to the server's WebSocket bridge (/v1/ws) and its
// sessions API. A run's events come from the server's event log, numbered,
// so that after a reload or a dropped connection the page follows the run
// from the last event it showed.
'use strict';

const state = {
  session: localStorage.getItem('calf.session') || '',
  bridge: null, // the WebSocket bridge, made by start
  runs: {}, // run id → {el, text, step, seq, tools}
  current: null, // the run in progress
  opening: 0, // counts the sessions opened, the last one shown
};

function newSessionID() {
  const a = new Uint8Array(6);
  crypto.getRandomValues(a);
  return 'web-' + Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
}

function scroll() {
  $('log').scrollTop = $('log').scrollHeight;
}

function usageLine(u, cost) {
  let s = `${u.input_tokens || 0} tokens in, ${u.output_tokens || 0} out`;
  if (cost && cost.usd > 0) s += ` · $${cost.usd.toFixed(4)}`;
  return s;
}

// The pending run, kept across reloads: its id and the last event shown.
function savePending() {
  const r = state.current && state.runs[state.current];
  if (r) localStorage.setItem('calf.pending', JSON.stringify({ run: state.current, seq: r.seq, session: state.session }));
  else localStorage.removeItem('calf.pending');
}

function runView(run) {
  let r = state.runs[run];
  if (!r) {
    const box = el('div', 'msg assistant');
    box.dataset.run = run;
    const text = el('div', 'text');
    box.append(text);
    $('log').append(box);
    r = state.runs[run] = { el: box, textEl: text, seq: 0, steps: {}, tools: {} };
  }
  return r;
}

function showEvent(run, ev) {
  const r = runView(run);
  if (ev.seq <= r.seq) return; // shown already
  r.seq = ev.seq;
  const m = ev.message;
  const kind = m.channel.split('.').slice(3).join('.');
  const data = m.data || {};
  if (kind === 'input' && r.resumed && !r.promptShown) {
    r.promptShown = true;
    $('log').insertBefore(el('div', 'msg user', data.content || ''), r.el);
  } else if (kind === 'stream' && data.delta && data.delta.text) {
    // Each model call's text in an element of its own, after the tool
    // calls of the calls before it.
    if (r.lastStep !== data.step && (r.textEl.textContent || r.textEl !== r.el.lastElementChild)) {
      r.textEl = el('div', 'text');
      r.el.append(r.textEl);
    }
    r.lastStep = data.step;
    r.textEl.textContent += data.delta.text;
  } else if (kind.startsWith('tool_call')) {
    const d = el('details', 'tool');
    d.dataset.call = data.tool_call_id;
    d.append(el('summary', '', `⚙ ${data.tool_name} ${data.arguments}`));
    r.el.append(d);
    r.tools[data.tool_call_id] = d;
  } else if (kind === 'tool_result') {
    let d = r.tools[data.tool_call_id];
    if (!d) {
      d = el('details', 'tool');
      d.append(el('summary', '', `⚙ ${data.tool_name}`));
      r.el.append(d);
      r.tools[data.tool_call_id] = d;
    }
    const parts = (data.result && data.result.parts) || [];
    const text = parts.map((p) => p.text || '').join('');
    d.append(el('pre', 'result', `${data.status}: ${text}`));
    d.querySelector('summary').textContent += data.status === 'success' ? ' ✓' : ' ✗';
  } else if (kind === 'approval') {
    showApproval(r, data);
  } else if (kind === 'output') {
    r.el.querySelectorAll('.text:empty').forEach((e) => e !== r.textEl && e.remove());
    if (data.status === 'complete') {
      const out = typeof data.content === 'string' ? data.content : JSON.stringify(data.content);
      if (r.textEl.textContent !== out) {
        // The model did not stream the answer: show it whole, last.
        r.textEl = el('div', 'text', out);
        r.el.append(r.textEl);
      }
    } else if (data.status !== 'handoff') {
      r.el.append(el('div', 'error', `${data.status}: ${data.error || ''}`));
    }
    r.el.append(el('div', 'usage', usageLine(data.usage || {}, data.cost)));
  }
  if (state.current === run) savePending();
  scroll();
}

function showApproval(r, a) {
  const id = 'approval-' + a.id.replace(/[^A-Za-z0-9_-]/g, '_');
  let card = document.getElementById(id);
  if (a.status !== 'pending') {
    if (card) card.replaceWith(el('div', 'usage', `${a.tool_name}: ${a.status}`));
    return;
  }
  if (card) return;
  card = el('div', 'approval');
  card.id = id;
  card.append(el('div', '', `${a.tool_name} needs approval: ${a.reason}`));
  const args = el('textarea');
  args.rows = 2;
  args.value = JSON.stringify(a.arguments);
  args.setAttribute('aria-label', 'arguments');
  const approve = el('button', 'approve', 'Approve');
  const deny = el('button', 'deny', 'Deny');
  approve.onclick = () => {
    let edited;
    try {
      edited = JSON.parse(args.value);
    } catch (e) {
      alert('the arguments are not valid JSON');
      return;
    }
    const changed = JSON.stringify(edited) !== JSON.stringify(a.arguments);
    send({ type: 'approve', approval: a.id, approve: true, arguments: changed ? edited : undefined });
    card.replaceWith(el('div', 'usage', `${a.tool_name}: approved`));
  };
  deny.onclick = () => {
    send({ type: 'approve', approval: a.id, approve: false, message: 'denied in the web chat' });
    card.replaceWith(el('div', 'usage', `${a.tool_name}: denied`));
  };
  card.append(args, approve, deny);
  r.el.append(card);
}

function send(msg) {
  state.bridge.send(msg);
}

// onOpen follows the pending run, if any, when the bridge opens.
function onOpen() {
  setStatus('connected');
  const pending = JSON.parse(localStorage.getItem('calf.pending') || 'null');
  if (pending && pending.session === state.session) {
    state.current = pending.run;
    const r = runView(pending.run);
    r.seq = 0; // the history shows the earlier runs; this one from its start
    r.resumed = true;
    send({ type: 'follow', run: pending.run, after: 0 });
    $('stop').disabled = false;
  }
}

function onMessage(m) {
  if (m.type === 'started') {
    state.current = m.run;
    runView(m.run);
    savePending();
    $('stop').disabled = false;
  } else if (m.type === 'event') {
    showEvent(m.run, m.event);
  } else if (m.type === 'end') {
    if (state.current === m.run) {
      state.current = null;
      savePending();
      $('stop').disabled = true;
      refreshSessions();
    }
  } else if (m.type === 'error') {
    $('log').append(el('div', 'msg error', m.message));
    scroll();
  }
}

async function refreshSessions() {
  try {
    const list = await api('/v1/sessions');
    renderList($('sessions'), list.sessions, (s) => s.id, (s) => {
      const li = el('li', s.id === state.session ? 'current' : '', s.title || s.id);
      li.dataset.session = s.id;
      li.onclick = () => openSession(s.id);
      return li;
    });
    for (const li of $('sessions').children) li.classList.toggle('current', li.dataset.session === state.session);
    for (const s of list.sessions) {
      if (s.id === state.session) $('cost').textContent = `this chat: ${usageLine(s.usage || {}, s.cost)}`;
    }
  } catch (e) {
    setStatus(e.message, true);
  }
}

async function openSession(id) {
  const opening = ++state.opening;
  state.session = id;
  localStorage.setItem('calf.session', id);
  state.runs = {};
  $('log').textContent = '';
  try {
    const s = await api('/v1/sessions/' + encodeURIComponent(id));
    if (opening !== state.opening) return; // another opened since: it shows its own
    for (const m of s.messages || []) {
      const text = (m.parts || []).map((p) => p.text || '').join('');
      if (m.role === 'user') $('log').append(el('div', 'msg user', text));
      else if (m.role === 'assistant' && text) $('log').append(el('div', 'msg assistant', text));
    }
  } catch (e) {
    // A new session has nothing to show yet.
  }
  refreshSessions();
  scroll();
}

async function start() {
  state.bridge = newBridge({
    open: onOpen,
    message: onMessage,
    close: () => setStatus('disconnected: reconnecting…', true),
  });
  $('token').value = auth.token;
  $('token').onchange = () => {
    setToken($('token').value.trim());
    state.bridge.reset();
    init();
  };
  init();
}

async function init() {
  try {
    const models = await api('/v1/models');
    $('agent').textContent = '';
    for (const m of models.data) $('agent').append(el('option', '', m.id));
    setStatus('');
  } catch (e) {
    setStatus(e.message, true);
    return;
  }
  if (!state.session) {
    state.session = newSessionID();
    localStorage.setItem('calf.session', state.session);
  }
  await openSession(state.session);
  if (!state.bridge.isOpen) setStatus('connecting…');
  state.bridge.open();
}

$('send').onsubmit = (e) => {
  e.preventDefault();
  const text = $('prompt').value.trim();
  if (!text || state.current) return;
  $('log').append(el('div', 'msg user', text));
  $('prompt').value = '';
  send({ type: 'run', agent: $('agent').value, session: state.session, text });
  scroll();
};
$('prompt').onkeydown = (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('send').requestSubmit();
  }
};
$('new').onclick = () => {
  state.current = null;
  savePending();
  openSession(newSessionID());
};
$('stop').onclick = () => {
  if (state.current) send({ type: 'cancel', agent: $('agent').value, run: state.current });
};

start();
