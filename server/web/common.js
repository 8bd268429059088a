// What Calf's web pages share: the token (kept in the browser's local
// storage), the API, the WebSocket bridge, and making elements.
'use strict';

const $ = (id) => document.getElementById(id);
const auth = { token: localStorage.getItem('calf.token') || '' };

function setToken(token) {
  auth.token = token;
  localStorage.setItem('calf.token', token);
}

// api calls the server's API with the token (and body, sent as JSON, when
// given), and returns the JSON answer or throws the error the server gave.
async function api(path, method, body) {
  const headers = auth.token ? { Authorization: 'Bearer ' + auth.token } : {};
  const init = { method: method || 'GET', headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    throw new Error((body.error && body.error.message) || r.statusText);
  }
  return r.json();
}

// newBridge returns the page's WebSocket bridge (/v1/ws), the token as a
// subprotocol; it opens when open() is called. A message sent before it is
// open, or while it reconnects, waits and goes when it opens, after
// handlers.open has run; handlers.message gets each message the server
// sends; a dropped connection calls handlers.close and is opened again a
// second later. reset() closes it for good and drops what waits: the
// token changed, and open() opens it anew.
function newBridge(handlers) {
  let ws = null;
  let queue = [];
  const b = {
    get isOpen() {
      return ws !== null && ws.readyState === WebSocket.OPEN;
    },
    open() {
      if (ws && ws.readyState <= WebSocket.OPEN) return;
      const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const protocols = ['calf.v1'];
      if (auth.token) protocols.push('bearer.' + auth.token);
      const sock = new WebSocket(`${proto}//${location.host}/v1/ws`, protocols);
      ws = sock;
      sock.onopen = () => {
        if (ws !== sock) return;
        if (handlers.open) handlers.open();
        for (const m of queue.splice(0)) sock.send(m);
      };
      sock.onmessage = (e) => {
        if (ws === sock) handlers.message(JSON.parse(e.data));
      };
      sock.onclose = () => {
        if (ws !== sock) return;
        if (handlers.close) handlers.close();
        setTimeout(() => {
          if (ws === sock) b.open();
        }, 1000);
      };
    },
    send(msg) {
      const m = JSON.stringify(msg);
      if (b.isOpen) ws.send(m);
      else queue.push(m);
    },
    reset() {
      const old = ws;
      ws = null;
      queue = [];
      if (old) old.close();
    },
  };
  return b;
}

function setStatus(text, error) {
  $('status').textContent = text;
  $('status').className = error ? 'error' : '';
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// renderList shows items in the list ul, one element each made by build,
// keyed by key. An item unchanged since the last time keeps its element:
// a list refreshed while it is clicked would otherwise swap the element
// between the press and the release, and the click would be lost.
function renderList(ul, items, key, build, empty) {
  const old = new Map();
  for (const li of ul.children) if (li.dataset.key !== undefined) old.set(li.dataset.key, li);
  const lis = items.map((it) => {
    const k = String(key(it));
    const sig = JSON.stringify(it);
    const prev = old.get(k);
    if (prev && prev.dataset.sig === sig) return prev;
    const li = build(it);
    li.dataset.key = k;
    li.dataset.sig = sig;
    return li;
  });
  if (!lis.length && empty) lis.push(el('li', '', empty));
  const now = [...ul.children];
  if (now.length !== lis.length || now.some((li, i) => li !== lis[i])) ul.replaceChildren(...lis);
}
