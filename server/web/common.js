// What Calf's web pages share: the token (kept in the browser's local
// storage), the API, the WebSocket bridge, and making elements.
'use strict';

const $ = (id) => document.getElementById(id);
const auth = { token: localStorage.getItem('calf.token') || '' };

function setToken(token) {
  auth.token = token;
  localStorage.setItem('calf.token', token);
}

// api calls the server's API with the token, and returns the JSON answer
// or throws the error the server gave.
async function api(path, method) {
  const headers = auth.token ? { Authorization: 'Bearer ' + auth.token } : {};
  const r = await fetch(path, { method: method || 'GET', headers });
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    throw new Error((body.error && body.error.message) || r.statusText);
  }
  return r.json();
}

// openBridge opens the WebSocket bridge, the token as a subprotocol.
function openBridge() {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const protocols = ['calf.v1'];
  if (auth.token) protocols.push('bearer.' + auth.token);
  return new WebSocket(`${proto}//${location.host}/v1/ws`, protocols);
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
