// Calf's web chat: talks to the server's WebSocket bridge (/v1/ws) and its
// sessions API. A run's events come from the server's event log, numbered,
// so that after a reload or a dropped connection the page follows the run
// from the last event it showed. A session's runs that ended are shown from
// its turns (GET /v1/sessions/{id}) through the same rendering as their
// events: an answer looks the same live and after a reload.
//
// On a server with conversations, the page also opens conversations
// (?conversation=ID): the user's messages go to the conversation's entry
// instance over the bridge ("say"), its user-facing history comes from
// GET /v1/conversations/{id} and then over the bridge, each message once
// (by its sequence number), and the events of the instance's runs show as
// their progress, folded once the answer is there.
//
// The follow-ups an agent scheduled in the session shown (its tool
// schedule_wakeup) are listed from GET /v1/sessions/{id}/wakeups, each
// with a button that cancels it (DELETE /v1/sessions/{id}/wakeups/{wakeup}).
'use strict';

const state = {
  session: localStorage.getItem('calf.session') || '',
  bridge: null, // the WebSocket bridge, made by start
  runs: {}, // run id → {el, textEl, seq, tools, lastStep, ended}
  current: null, // the run in progress
  opening: 0, // counts the sessions opened, the last one shown
  conversation: new URLSearchParams(location.search).get('conversation') || '', // the conversation shown, if any
  convSeq: 0, // the last message of its history shown
  progress: {}, // its runs' progress, by run id: run views in folded details
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

// textView returns an element for a model call's text, shown as Markdown
// (markdown.js); its source is kept in its src.
function textView(src) {
  const e = el('div', 'text');
  setText(e, src || '');
  return e;
}

function setText(e, src) {
  e.src = src;
  renderMarkdown(e, src);
}

function textOf(m) {
  return (m.parts || []).map((p) => p.text || '').join('');
}

function runView(run) {
  let r = state.runs[run];
  if (!r) {
    const box = el('div', 'msg assistant');
    box.dataset.run = run;
    const text = textView();
    box.append(text);
    $('log').append(box);
    r = state.runs[run] = { el: box, textEl: text, seq: 0, tools: {} };
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
  if (kind === 'output') {
    // The answer is the output of the run itself, or of the run it handed
    // off to; a team member's or a subagent's output is a step of it,
    // whose text its stream showed.
    const of = (m.key || '').split('/')[0];
    if (of && of !== (r.watch || run)) return;
    if (data.status === 'handoff' && data.handoff && data.handoff.run_id) r.watch = data.handoff.run_id;
  }
  render(r, kind, data);
  if (state.current === run) savePending();
  scroll();
}

// render shows in the run view r an event of the run, of kind (the
// channel's suffix: input, stream, tool_call…, tool_result, approval,
// output) with its data.
function render(r, kind, data) {
  if (kind === 'input' && r.resumed && !r.promptShown) {
    r.promptShown = true;
    $('log').insertBefore(el('div', 'msg user', data.content || ''), r.el);
  } else if (kind === 'stream' && data.delta && data.delta.text) {
    // Each model call's text in an element of its own, after the tool
    // calls of the calls before it.
    if (r.lastStep !== data.step && (r.textEl.src || r.textEl !== r.el.lastElementChild)) {
      r.textEl = textView();
      r.el.append(r.textEl);
    }
    r.lastStep = data.step;
    setText(r.textEl, r.textEl.src + data.delta.text);
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
    d.append(el('pre', 'result', `${data.status}: ${textOf(data.result || {})}`));
    d.querySelector('summary').textContent += data.status === 'success' ? ' ✓' : ' ✗';
  } else if (kind === 'approval') {
    showApproval(r, data);
  } else if (kind === 'output') {
    r.el.querySelectorAll('.text:empty').forEach((e) => e !== r.textEl && e.remove());
    if (data.status === 'complete') {
      // An agent's or a team's answer is its content, a workflow's its
      // final state.
      const value = data.content !== undefined ? data.content : data.state;
      const out = typeof value === 'string' ? value : JSON.stringify(value);
      if (r.textEl.src !== out) {
        // The model did not stream the answer: show it whole, last.
        r.textEl = textView(out);
        r.el.append(r.textEl);
      }
    } else if (data.status !== 'handoff') {
      r.el.append(el('div', 'error', `${data.status}: ${data.error || ''}`));
    }
    r.el.append(el('div', 'usage', usageLine(data.usage || {}, data.cost)));
  }
}

// approvalLine returns the line that stands for an answered approval
// request, with the id of its card.
function approvalLine(id, a) {
  let s = `approval of ${a.tool_name}: ${a.status}`;
  if (a.approved_arguments) s += ` with ${JSON.stringify(a.approved_arguments)}`;
  if (a.status === 'denied' && a.message) s += ` (${a.message})`;
  const line = el('div', 'usage answered', s);
  line.id = id;
  return line;
}

function showApproval(r, a) {
  const id = 'approval-' + a.id.replace(/[^A-Za-z0-9_-]/g, '_');
  let card = document.getElementById(id);
  if (a.status !== 'pending') {
    if (card) card.replaceWith(approvalLine(id, a));
    else r.el.append(approvalLine(id, a));
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
    card.replaceWith(approvalLine(id, { tool_name: a.tool_name, status: 'approved', approved_arguments: changed ? edited : undefined }));
  };
  deny.onclick = () => {
    const message = 'denied in the web chat';
    send({ type: 'approve', approval: a.id, approve: false, message });
    card.replaceWith(approvalLine(id, { tool_name: a.tool_name, status: 'denied', message }));
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
  if (state.conversation) {
    send({ type: 'conversation', conversation: state.conversation, after: state.convSeq });
    return;
  }
  const pending = JSON.parse(localStorage.getItem('calf.pending') || 'null');
  if (pending && pending.session === state.session && state.runs[pending.run] && state.runs[pending.run].ended) {
    // It ended before the page opened its session: shown from its turn.
    localStorage.removeItem('calf.pending');
  } else if (pending && pending.session === state.session) {
    state.current = pending.run;
    const r = runView(pending.run);
    r.seq = 0; // the history shows the earlier runs; this one from its start
    r.resumed = true;
    send({ type: 'follow', run: pending.run, after: 0 });
    $('stop').disabled = false;
  }
}

function onMessage(m) {
  if (m.conversation !== undefined) {
    onConversationMessage(m);
  } else if (m.type === 'started') {
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
      refreshWakeUps();
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
    for (const li of $('sessions').children) li.classList.toggle('current', !state.conversation && li.dataset.session === state.session);
    for (const s of list.sessions) {
      if (s.id === state.session) $('cost').textContent = `this chat: ${usageLine(s.usage || {}, s.cost)}`;
    }
  } catch (e) {
    setStatus(e.message, true);
  }
}

// refreshWakeUps lists the follow-ups pending in the session shown, the
// earliest first; the list is hidden when there are none, or while a
// conversation is shown.
async function refreshWakeUps() {
  const session = state.session;
  let list;
  try {
    list = await api('/v1/sessions/' + encodeURIComponent(session) + '/wakeups');
  } catch (e) {
    list = { wakeups: [] }; // a new session, not stored yet: none
  }
  if (session !== state.session) return; // another session shown since
  const ups = state.conversation ? [] : list.wakeups;
  $('wakebox').hidden = !ups.length;
  renderList($('wakeups'), ups, (w) => w.id, (w) => {
    const li = el('li');
    li.title = w.id;
    li.append(el('small', '', new Date(w.due).toLocaleString()), el('div', '', w.note));
    const b = el('button', '', 'Cancel');
    b.onclick = async () => {
      b.disabled = true;
      try {
        await api('/v1/sessions/' + encodeURIComponent(session) + '/wakeups/' + encodeURIComponent(w.id), 'DELETE');
      } catch (e) {
        setStatus(e.message, true);
      }
      refreshWakeUps();
    };
    li.append(b);
    return li;
  });
}

async function openSession(id) {
  const opening = ++state.opening;
  leaveConversation();
  state.session = id;
  localStorage.setItem('calf.session', id);
  state.runs = {};
  $('log').textContent = '';
  let s;
  try {
    s = await api('/v1/sessions/' + encodeURIComponent(id));
  } catch (e) {
    s = {}; // a new session has nothing to show yet
  }
  if (opening !== state.opening) return; // another opened since: it shows its own
  const msgs = s.messages || [];
  const turns = s.turns || [];
  // The messages before the turns' (older runs', whose records are
  // gone): an answer for each question, without its usage.
  const older = msgs.slice(0, turns.length ? turns[0].first : msgs.length);
  let prev = null;
  for (let i = 0, n = 0; i < older.length; n++) {
    let j = i + 1;
    while (j < older.length && older[j].role !== 'user') j++;
    prev = showTurn({ run: `older-${n}` }, older.slice(i, j), prev);
    i = j;
  }
  for (const t of turns) prev = showTurn(t, t.count ? msgs.slice(t.first, t.first + t.count) : t.messages || [], prev);
  refreshSessions();
  refreshWakeUps();
  scroll();
}

// The output status of each status a run ends with.
const outputStatus = { complete: 'complete', failed: 'error', cancelled: 'cancelled', handed_off: 'handoff' };

// answered returns the approval request a of a run that ended: one still
// pending was never answered.
function answered(a) {
  return a.status === 'pending' ? { ...a, status: 'never answered' } : a;
}

// showTurn shows a run of the session that ended, t (a turn of the
// sessions API), with its messages msgs, as its events showed it live: its
// question, then in one answer its text, its tool calls with their
// results, its approvals, and its output with its usage. A run that
// continues another (a handoff, which asks no question) goes in the
// answer prev, as its events do. It returns the answer's run view.
function showTurn(t, msgs, prev) {
  const asks = msgs.length > 0 && msgs[0].role === 'user';
  let r = prev;
  if (asks || !r) {
    if (asks) $('log').append(el('div', 'msg user', textOf(msgs[0])));
    r = runView(t.run);
  }
  state.runs[t.run] = r;
  r.ended = true;
  const approvals = t.approvals || [];
  const shown = new Set();
  let step = 0;
  for (const m of msgs) {
    if (m.role === 'assistant') {
      step++;
      const text = textOf(m);
      if (text) render(r, 'stream', { step: `${t.run}/${step}`, delta: { text } });
      const calls = m.tool_calls || [];
      for (const c of calls) render(r, 'tool_call', { tool_call_id: c.id, tool_name: c.name, arguments: c.arguments });
      for (const a of approvals) {
        if (a.run_id === t.run && calls.some((c) => c.id === a.tool_call_id)) {
          render(r, 'approval', answered(a));
          shown.add(a.id);
        }
      }
    } else if (m.role === 'tool') {
      render(r, 'tool_result', { tool_call_id: m.tool_call_id, tool_name: m.tool_name, status: m.is_error ? 'error' : 'success', result: m });
    }
  }
  for (const a of approvals) if (!shown.has(a.id)) render(r, 'approval', answered(a)); // its subagents'
  if (t.status) {
    render(r, 'output', { status: outputStatus[t.status] || t.status, content: t.output, error: t.error, usage: t.usage, cost: t.cost });
    return r;
  }
  // An older run's: no output to show.
  r.el.querySelectorAll('.text').forEach((e) => !e.src && e.remove());
  if (r.el.childElementCount) return r;
  r.el.remove();
  return null;
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
  await refreshConversations();
  if (state.conversation) await openConversation(state.conversation);
  else await openSession(state.session);
  if (!state.bridge.isOpen) setStatus('connecting…');
  state.bridge.open();
}

$('send').onsubmit = (e) => {
  e.preventDefault();
  const text = $('prompt').value.trim();
  if (text && state.conversation) {
    // Shown when it comes back in the conversation's history.
    $('prompt').value = '';
    send({ type: 'say', conversation: state.conversation, text });
    return;
  }
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
$('newconv').onclick = async () => {
  try {
    const c = await api('/v1/conversations', 'POST', {});
    await openConversation(c.id);
  } catch (e) {
    setStatus(e.message, true);
  }
};
$('stop').onclick = () => {
  if (state.current) send({ type: 'cancel', agent: $('agent').value, run: state.current });
};

// The conversations.

// refreshConversations lists the user's conversations, and shows the list
// only on a server that has some to offer.
async function refreshConversations() {
  let list;
  try {
    list = await api('/v1/conversations');
  } catch (e) {
    $('convbox').hidden = true; // a server without conversations
    return;
  }
  $('convbox').hidden = false;
  renderList($('conversations'), list.conversations, (c) => c.id, (c) => {
    const title = c.description || `conversation of ${new Date(c.created).toLocaleString()}`;
    const li = el('li', c.status === 'stopped' ? 'stopped' : '', c.status === 'stopped' ? `${title} (stopped)` : title);
    li.dataset.conversation = c.id;
    li.title = c.id;
    li.onclick = () => openConversation(c.id);
    return li;
  });
  for (const li of $('conversations').children) li.classList.toggle('current', li.dataset.conversation === state.conversation);
}

// leaveConversation goes back to the sessions' chat.
function leaveConversation() {
  if (!state.conversation) return;
  state.conversation = '';
  history.replaceState(null, '', location.pathname);
  $('agent').disabled = false;
  for (const li of $('conversations').children) li.classList.remove('current');
}

// openConversation shows the conversation id: its history, then what the
// bridge brings.
async function openConversation(id) {
  const opening = ++state.opening;
  state.conversation = id;
  state.convSeq = 0;
  state.progress = {};
  state.current = null;
  state.runs = {};
  history.replaceState(null, '', '?conversation=' + encodeURIComponent(id));
  $('agent').disabled = true;
  $('stop').disabled = true;
  $('wakebox').hidden = true;
  $('log').textContent = '';
  let c;
  try {
    c = await api('/v1/conversations/' + encodeURIComponent(id));
  } catch (e) {
    if (opening !== state.opening) return;
    $('log').append(el('div', 'msg error', e.message));
    return;
  }
  if (opening !== state.opening) return;
  for (const e of c.messages) showEntry(e);
  if (c.conversation.status === 'stopped') $('log').append(el('div', 'usage', 'This conversation is stopped.'));
  refreshConversations();
  refreshSessions();
  scroll();
  // Each message after the last one shown, and the runs' progress.
  if (state.bridge.isOpen) send({ type: 'conversation', conversation: id, after: state.convSeq });
}

function onConversationMessage(m) {
  if (m.conversation !== state.conversation) return; // one left since
  if (m.type === 'conversation_message') {
    showEntry(m.entry);
    scroll();
  } else if (m.type === 'event') {
    const r = progressView(m.run);
    if (m.event.seq <= r.seq) return;
    r.seq = m.event.seq;
    const msg = m.event.message;
    const kind = msg.channel.split('.').slice(3).join('.');
    if (kind !== 'input') render(r, kind, msg.data || {});
    if (kind === 'output') fold(r);
    scroll();
  } else if (m.type === 'error') {
    $('log').append(el('div', 'msg error', m.message));
    scroll();
  }
}

// showEntry shows a message of the conversation's history, once: the
// user's as typed, an answer rendered as Markdown.
function showEntry(e) {
  if (e.seq <= state.convSeq) return;
  state.convSeq = e.seq;
  if (e.from === 'user') {
    const words = e.command && e.command.length ? ` [${e.command.join(' ')}]` : '';
    $('log').append(el('div', 'msg user', e.message + words));
    return;
  }
  // The answer ends the work shown before it.
  for (const p of Object.values(state.progress)) fold(p);
  const box = el('div', 'msg assistant');
  box.dataset.seq = e.seq;
  if (e.error) box.append(el('div', 'error', e.message));
  else box.append(textView(e.message));
  $('log').append(box);
}

// fold folds the progress p of a run that ended or was answered, under
// the count of its tool calls; a run that called none has nothing more to
// show than its answer, and goes.
function fold(p) {
  if (p.folded) return;
  p.folded = true;
  p.box.open = false;
  const n = Object.keys(p.tools).length;
  if (n) p.box.querySelector('summary').textContent = `⚙ ${n} tool call${n > 1 ? 's' : ''}`;
  else p.box.remove();
}

// progressView returns the view of a run of the conversation's entry
// instance: its events, rendered as a chat's run is, in a details element
// that folds once the answer is there.
function progressView(run) {
  let p = state.progress[run];
  if (!p) {
    const box = el('details', 'progress');
    box.open = true;
    box.dataset.run = run;
    box.append(el('summary', '', 'working…'));
    const body = el('div');
    const text = textView();
    body.append(text);
    box.append(body);
    $('log').append(box);
    p = state.progress[run] = { box, el: body, textEl: text, seq: 0, tools: {} };
  }
  return p;
}

// A follow-up fires, or another page cancels one: the list follows.
setInterval(() => { if (!state.conversation) refreshWakeUps(); }, 15000);
start();
