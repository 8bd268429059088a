// Calf's run inspector: the user's runs (GET /v1/runs), one run's events
// as they are logged (followed over the WebSocket bridge, /v1/ws), drawn as
// a topology whose nodes are the agents, models, tools, teams and
// workflows that handle them and whose edges are the events, in order;
// the dead letters of the user's runs, with replay; and the user's
// schedules (GET /v1/schedules): what each runs and when, paused or not,
// its next firing and its last ones, linked to the runs they started.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const state = {
  bridge: null, // the WebSocket bridge
  run: null, // the run shown
  events: [], // its events, in log order
  byID: {}, // message id → event
  nodes: {}, // node id → {id, label, kind, depth, row}
  layers: [], // depth → node ids
  edges: [], // {ev, from, to, el}
  deltas: 0,
  selected: null,
};

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function when(t) {
  return t ? new Date(t).toLocaleString() : '';
}

// ---- runs and dead letters

async function refreshRuns() {
  const q = new URLSearchParams();
  if ($('agent').value) q.set('agent', $('agent').value);
  if ($('runstatus').value) q.set('status', $('runstatus').value);
  try {
    const list = await api('/v1/runs?' + q);
    renderList($('runs'), list.runs, (r) => r.id, (r) => {
      const li = el('li', r.status + (r.id === state.run ? ' current' : ''));
      li.dataset.run = r.id;
      li.append(el('span', 'st', r.status), el('div', '', r.name), el('small', '', `${when(r.started)} · ${r.id.slice(0, 8)}`));
      li.onclick = () => { location.hash = 'run=' + encodeURIComponent(r.id); };
      return li;
    }, 'no runs');
    for (const li of $('runs').children) li.classList.toggle('current', li.dataset.run === state.run);
    setStatus('');
  } catch (e) {
    setStatus(e.message, true);
  }
}

async function refreshLetters() {
  try {
    const list = await api('/v1/deadletters');
    renderList($('letters'), list.dead_letters, (d) => d.id, (d) => {
      const li = el('li');
      const m = d.message || {};
      li.append(el('span', 'st', `${d.attempts}×`), el('div', '', m.channel || d.id), el('small', 'error', d.error));
      const b = el('button', '', d.replayed_at ? 'replayed' : 'Replay');
      b.disabled = !!d.replayed_at;
      b.onclick = async (e) => {
        e.stopPropagation();
        try {
          await api('/v1/deadletters/' + encodeURIComponent(d.id) + '/replay', 'POST');
          refreshLetters();
        } catch (err) {
          setStatus(err.message, true);
        }
      };
      li.append(el('br'), b);
      const run = m.metadata && (m.metadata.correlation_id || m.metadata.run_id);
      if (run) li.onclick = () => { location.hash = 'run=' + encodeURIComponent(run); };
      return li;
    }, 'none');
  } catch (e) {
    setStatus(e.message, true);
  }
}

// scheduleAction returns a button that posts the action (pause, resume,
// trigger) of the schedule name, then shows the schedules again.
function scheduleAction(name, action, label) {
  const b = el('button', '', label);
  b.onclick = async () => {
    b.disabled = true;
    try {
      await api('/v1/schedules/' + encodeURIComponent(name) + '/' + action, 'POST');
    } catch (err) {
      setStatus(err.message, true);
    }
    refreshSchedules();
  };
  return b;
}

async function refreshSchedules() {
  try {
    const list = await api('/v1/schedules');
    renderList($('schedules'), list.schedules, (s) => s.name, (s) => {
      const li = el('li', s.paused ? 'paused' : '');
      const every = s.every ? `every ${s.every}` : s.cron + (s.time_zone ? ` (${s.time_zone})` : '');
      li.append(
        el('span', 'st', s.paused ? 'paused' : 'on'),
        el('div', '', s.name),
        el('small', '', `${s.kind} ${s.runner} · ${every}`),
        el('small', 'next', s.paused ? 'next: none while paused' : `next: ${when(s.next)}`),
      );
      // The last firings, the latest first: each a link to the run it
      // started, or why it started none.
      const fired = el('ol', 'firings');
      for (const f of (s.history || []).slice(-5).reverse()) {
        const item = el('li');
        if (f.run_id) {
          const a = el('a', '', when(f.at) + (f.trigger ? ' (triggered)' : ''));
          a.href = '#run=' + encodeURIComponent(f.run_id);
          a.title = f.run_id;
          item.append(a);
        } else {
          item.append(el('span', 'skipped', `${when(f.at)}: skipped (${f.skipped})`));
        }
        fired.append(item);
      }
      if (!fired.childElementCount) fired.append(el('li', 'skipped', 'not fired yet'));
      li.append(fired,
        s.paused ? scheduleAction(s.name, 'resume', 'Resume') : scheduleAction(s.name, 'pause', 'Pause'),
        scheduleAction(s.name, 'trigger', 'Run now'));
      return li;
    }, 'none');
  } catch (e) {
    setStatus(e.message, true);
  }
}

// ---- one run

// nodeOf returns the node that handles the message m: an agent (its input
// and tool results), its model (inference), one of its tools (a tool
// call), a team, a workflow or one of its nodes (a step); an output goes
// back to the caller.
function nodeOf(m) {
  const ch = m.channel;
  const p = ch.split('.');
  if (ch === 'calf.deadletter') return { id: 'dead', label: 'dead letters', kind: 'dead' };
  if (p[0] !== 'calf' || p.length < 4) return { id: 'ch:' + ch, label: ch, kind: 'other' };
  const [, kind, name, suffix] = p;
  if (suffix === 'output') return { id: 'caller', label: 'caller', kind: 'caller' };
  if (kind === 'agent') {
    if (suffix === 'inference') return { id: 'model:' + name, label: name + ' · model', kind: 'model' };
    if (suffix === 'tool_call') {
      const tool = p.slice(4).join('.');
      return { id: 'tool:' + name + '/' + tool, label: tool, kind: 'tool' };
    }
    return { id: 'agent:' + name, label: name, kind: 'agent' };
  }
  if (kind === 'workflow' && suffix === 'step' && m.data && m.data.node) {
    // A workflow's step runs one of its nodes.
    return { id: 'node:' + name + '/' + m.data.node, label: `${name} · ${m.data.node}`, kind: 'tool' };
  }
  return { id: kind + ':' + name, label: `${name} (${kind})`, kind: 'agent' };
}

function addNode(n, depth) {
  if (state.nodes[n.id]) return state.nodes[n.id];
  while (state.layers.length <= depth) state.layers.push([]);
  n.depth = depth;
  n.row = state.layers[depth].length;
  state.layers[depth].push(n.id);
  state.nodes[n.id] = n;
  return n;
}

function shortName(ch) {
  const p = ch.split('.');
  return p[0] === 'calf' && p.length >= 4 ? p.slice(3).join('.') : ch;
}

function resetRun(run) {
  Object.assign(state, { run, events: [], byID: {}, nodes: {}, layers: [], edges: [], deltas: 0, selected: null });
  addNode({ id: 'caller', label: 'caller', kind: 'caller' }, 0);
  $('topology').textContent = '';
  $('events').tBodies[0].textContent = '';
  $('payload').textContent = '';
}

async function openRun(run) {
  resetRun(run);
  for (const li of $('runs').children) li.classList.toggle('current', li.dataset.run === run);
  await showHead(run);
  // A bridge not yet open follows the run shown when it opens.
  if (state.bridge.isOpen && state.run === run) state.bridge.send({ type: 'follow', run, after: 0 });
}

// showHead shows the run's kind, name, status and duration.
async function showHead(run) {
  try {
    const s = await api('/v1/runs/' + encodeURIComponent(run));
    $('runhead').textContent = `${s.kind} ${s.name} · run ${s.id} · ${s.status}` + (s.reason ? ` (${s.reason})` : '') + ` · started ${when(s.started)}` + (s.ended ? ` · ${((new Date(s.ended) - new Date(s.started)) / 1000).toFixed(2)} s` : '');
  } catch (e) {
    $('runhead').textContent = `run ${run}: ${e.message}`;
  }
}

// addEvent adds a logged event of the run shown: an edge from the node
// that handled its cause to the node that handles it, and a row.
function addEvent(ev) {
  const m = ev.message;
  if (state.byID[m.id]) return; // a follow started again
  state.byID[m.id] = ev;
  state.events.push(ev);
  if (m.channel.endsWith('.stream')) {
    state.deltas++;
    return; // deltas are counted, not drawn
  }
  const cause = state.byID[m.metadata.causation_id];
  const from = cause ? state.nodes[nodeOf(cause.message).id] || addNode(nodeOf(cause.message), 1) : state.nodes.caller;
  const to = addNode(nodeOf(m), from.depth + 1);
  const edge = { ev, from, to };
  state.edges.push(edge);
  ev.edge = edge;
  const tr = el('tr', 'ev');
  tr.dataset.seq = ev.seq;
  const start = new Date(state.events[0].message.metadata.time);
  tr.append(
    el('td', '', String(ev.seq)),
    el('td', '', `+${new Date(m.metadata.time) - start} ms`),
    el('td', '', shortName(m.channel)),
    el('td', '', `${from.label} → ${to.label}`),
    el('td', '', m.metadata.producer || ''),
  );
  tr.onclick = () => select(ev);
  $('events').tBodies[0].append(tr);
  draw();
}

const W = 150, H = 34, GX = 70, GY = 26;

function pos(n) {
  return { x: 12 + n.depth * (W + GX), y: 44 + n.row * (H + GY) };
}

// draw lays the nodes out in columns by their distance from the caller, in
// the order they appeared, and the events as numbered edges between them.
function draw() {
  const g = $('topology');
  g.textContent = '';
  const defs = svg('defs');
  const mk = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: '10', refY: '5', markerWidth: '7', markerHeight: '7', orient: 'auto-start-reverse' });
  mk.append(svg('path', { d: 'M0,0 L10,5 L0,10 z' }));
  defs.append(mk);
  g.append(defs);
  let w = 0, h = 0;
  for (const n of Object.values(state.nodes)) {
    const p = pos(n);
    w = Math.max(w, p.x + W + 12);
    h = Math.max(h, p.y + H + 90); // room for the edges back, below
  }
  g.setAttribute('viewBox', `0 0 ${w} ${h}`);
  g.setAttribute('height', String(Math.max(h, 120)));
  const pairs = {};
  const labels = [];
  for (const e of state.edges) {
    const key = e.from.id + '>' + e.to.id;
    const k = (pairs[key] = (pairs[key] || 0) + 1);
    const a = pos(e.from), b = pos(e.to);
    const self = e.from === e.to;
    const x1 = a.x + W / 2, y1 = a.y + H / 2, x2 = b.x + W / 2, y2 = b.y + H / 2;
    const grp = svg('g', { class: 'edge' + (state.selected === e.ev ? ' selected' : ''), 'data-seq': e.ev.seq });
    let d, lx, ly;
    if (self) {
      const r = 14 + 8 * k;
      d = `M${x1 - 20},${a.y} C${x1 - 20},${a.y - r} ${x1 + 20},${a.y - r} ${x1 + 20},${a.y}`;
      lx = x1; ly = a.y - r * 0.75;
    } else if (x2 > x1) {
      // Forward edges go side to side, above the line; repeated ones bend
      // more.
      const sx = a.x + W, ex = b.x, bend = (k - 1) * 16;
      const mx = (sx + ex) / 2, my = (y1 + y2) / 2 - bend * 2;
      d = `M${sx},${y1} Q${mx},${my} ${ex},${y2}`;
      lx = mx; ly = (y1 + y2) / 2 - bend - 4;
    } else {
      // Edges back go below the boxes.
      const sx = x1 - 20, ex = x2 + 20, sy = a.y + H, ey = b.y + H, dip = 24 + (k - 1) * 16;
      const mx = (sx + ex) / 2, my = Math.max(sy, ey) + dip * 2;
      d = `M${sx},${sy} Q${mx},${my} ${ex},${ey}`;
      lx = mx; ly = Math.max(sy, ey) + dip + 4;
    }
    grp.append(svg('path', { d, 'marker-end': 'url(#arrow)' }));
    grp.onclick = () => select(e.ev);
    g.append(grp);
    // The numbers go on top of every line and box, where a click finds them.
    const lab = svg('g', { class: 'edge label' + (state.selected === e.ev ? ' selected' : ''), 'data-seq': e.ev.seq });
    lab.append(svg('circle', { cx: String(lx), cy: String(ly - 3), r: '8' }));
    lab.append(svg('text', { x: String(lx), y: String(ly), 'text-anchor': 'middle' }, String(e.ev.seq)));
    lab.onclick = () => select(e.ev);
    labels.push(lab);
  }
  for (const n of Object.values(state.nodes)) {
    const p = pos(n);
    const grp = svg('g', { class: 'node ' + n.kind, 'data-node': n.id });
    grp.append(svg('rect', { x: String(p.x), y: String(p.y), width: String(W), height: String(H), rx: '6' }));
    let label = n.label;
    if (n.kind === 'model' && state.deltas) label += ` (${state.deltas} Δ)`;
    grp.append(svg('text', { x: String(p.x + W / 2), y: String(p.y + H / 2 + 4), 'text-anchor': 'middle' }, label.length > 24 ? label.slice(0, 23) + '…' : label));
    g.append(grp);
  }
  for (const lab of labels) g.append(lab);
}

// select shows an event's payload, its timings and the workers involved.
function select(ev) {
  state.selected = ev;
  for (const tr of $('events').tBodies[0].rows) tr.classList.toggle('selected', tr.dataset.seq === String(ev.seq));
  draw();
  const m = ev.message, md = m.metadata;
  const cause = state.byID[md.causation_id];
  const handledBy = [...new Set(state.events.filter((e) => e.message.metadata.causation_id === m.id).map((e) => e.message.metadata.producer || '?'))];
  const t = new Date(md.time);
  const rows = [
    ['event', `${ev.seq} · ${m.channel}`],
    ['id', m.id],
    ['published', `${t.toISOString()} (+${t - new Date(state.events[0].message.metadata.time)} ms into the run)`],
    ['after its cause', cause ? `${t - new Date(cause.message.metadata.time)} ms (event ${cause.seq})` : 'none: it starts the run'],
    ['logged', `${new Date(ev.logged) - t} ms after`],
    ['published by', md.producer || 'unnamed process'],
    ['handled by', handledBy.length ? handledBy.join(', ') : 'nothing logged yet'],
    ['attempt', String(md.attempt || 1)],
  ];
  if (md.traceparent) rows.push(['traceparent', md.traceparent]);
  const p = $('payload');
  p.textContent = '';
  const dl = el('dl');
  for (const [k, v] of rows) dl.append(el('dt', '', k), el('dd', '', v));
  let data = m.data;
  try {
    data = JSON.stringify(m.data, null, 2);
  } catch (e) {
    // shown as it is
  }
  p.append(el('h4', '', 'Event ' + ev.seq), dl, el('pre', 'data', data));
}

// ---- the bridge

// The bridge follows the run shown each time it opens.
state.bridge = newBridge({
  open: () => {
    setStatus('');
    if (state.run) state.bridge.send({ type: 'follow', run: state.run, after: 0 });
  },
  message: (m) => {
    if (m.type === 'event' && m.run === state.run) addEvent(m.event);
    else if (m.type === 'end' && m.run === state.run) {
      refreshRuns();
      showHead(m.run);
    } else if (m.type === 'error') setStatus(m.message, true);
  },
  close: () => setStatus('disconnected: reconnecting…', true),
});

function route() {
  const m = /^#run=(.+)$/.exec(location.hash);
  if (m) openRun(decodeURIComponent(m[1]));
}

async function init() {
  try {
    const models = await api('/v1/models');
    const sel = $('agent');
    while (sel.options.length > 1) sel.remove(1);
    for (const m of models.data) sel.append(el('option', '', m.id));
  } catch (e) {
    setStatus(e.message, true);
    return;
  }
  await Promise.all([refreshRuns(), refreshLetters(), refreshSchedules()]);
  state.bridge.open();
  route();
}

$('token').value = auth.token;
$('token').onchange = () => {
  setToken($('token').value.trim());
  state.bridge.reset();
  init();
};
$('agent').onchange = refreshRuns;
$('runstatus').onchange = refreshRuns;
window.onhashchange = route;
setInterval(() => { refreshRuns(); refreshLetters(); refreshSchedules(); }, 5000);
init();
