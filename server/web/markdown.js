// A small Markdown renderer for the web chat's answers. It builds DOM
// nodes and puts text in them as text, never as HTML: HTML in an answer
// shows as written. Links go to http(s) and mailto addresses only (others
// show as their text), open in a new tab, with rel="noopener noreferrer";
// images show as links, not loaded. It knows fenced code blocks, headings,
// block quotes, lists (nested by indentation), rules and paragraphs; code
// spans, links, autolinks, bold, italic, strikethrough and backslash
// escapes. A line break in a paragraph is kept.
'use strict';

// renderMarkdown shows the Markdown text src in the element e, in place of
// what it held.
function renderMarkdown(e, src) {
  const lines = src.replace(/\r\n?/g, '\n').split('\n').map((l) => l.replace(/^\t+/, (t) => '    '.repeat(t.length)));
  e.replaceChildren(...mdBlocks(lines));
}

const mdFence = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
const mdHeading = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const mdRule = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const mdQuote = /^ {0,3}> ?/;
const mdItem = /^( *)([-*+]|\d{1,9}[.)])(?: +|$)/;

function mdIndent(line) {
  return line.length - line.trimStart().length;
}

// mdStarts reports whether line starts a block other than a paragraph.
function mdStarts(line) {
  return mdFence.test(line) || mdHeading.test(line) || mdRule.test(line) || mdQuote.test(line) || mdItem.test(line);
}

// mdBlocks returns the elements of the blocks of lines.
function mdBlocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i++;
    } else if ((m = mdFence.exec(line))) {
      const close = new RegExp(`^ {0,3}${m[1][0] === '`' ? '`' : '~'}{${m[1].length},}\\s*$`);
      const indent = mdIndent(line);
      const body = [];
      for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i].slice(Math.min(indent, mdIndent(lines[i]))));
      i++; // the closing fence, or the end
      const code = el('code', m[2] ? 'language-' + m[2].replace(/[^\w+-]/g, '') : '', body.join('\n'));
      const pre = el('pre');
      pre.append(code);
      out.push(pre);
    } else if ((m = mdHeading.exec(line))) {
      out.push(mdInline(el('h' + m[1].length), m[2] || ''));
      i++;
    } else if (mdRule.test(line)) {
      out.push(el('hr'));
      i++;
    } else if (mdQuote.test(line)) {
      const inner = [];
      for (; i < lines.length && lines[i].trim() && (mdQuote.test(lines[i]) || !mdStarts(lines[i])); i++) {
        inner.push(lines[i].replace(mdQuote, ''));
      }
      const q = el('blockquote');
      q.append(...mdBlocks(inner));
      out.push(q);
    } else if ((m = mdItem.exec(line))) {
      i = mdList(lines, i, out);
    } else {
      const para = [line.trim()];
      for (i++; i < lines.length && lines[i].trim() && !mdStarts(lines[i]); i++) para.push(lines[i].trim());
      out.push(mdInline(el('p'), para.join('\n')));
    }
  }
  return out;
}

// mdList adds to out the list that starts at lines[i], and returns the
// index of the line after it. A line indented past an item's marker
// belongs to the item (a nested list, a second paragraph); a list whose
// items hold one paragraph each shows their text without paragraphs.
function mdList(lines, i, out) {
  const first = mdItem.exec(lines[i]);
  const ordered = /\d/.test(first[2]);
  const list = el(ordered ? 'ol' : 'ul');
  if (ordered && parseInt(first[2], 10) !== 1) list.start = parseInt(first[2], 10);
  const items = [];
  let loose = false;
  while (i < lines.length) {
    const m = mdItem.exec(lines[i]);
    if (!m || /\d/.test(m[2]) !== ordered) break;
    const marker = m[1].length;
    const content = m[0].length;
    const body = [lines[i].slice(content)];
    let blank = false;
    for (i++; i < lines.length; i++) {
      const l = lines[i];
      if (!l.trim()) {
        blank = true;
        continue;
      }
      if (mdIndent(l) > marker) {
        if (blank) body.push('');
        body.push(l.slice(Math.min(mdIndent(l), content)));
      } else if (!blank && !mdStarts(l)) {
        body.push(l.trim()); // a paragraph's line, not indented
      } else {
        break;
      }
      if (blank) loose = true;
      blank = false;
    }
    items.push(body);
    // A blank line, then an item of the same list: the list is loose.
    const next = i < lines.length && mdItem.exec(lines[i]);
    if (blank && next && /\d/.test(next[2]) === ordered) loose = true;
  }
  for (const body of items) {
    const li = el('li');
    for (const b of mdBlocks(body)) {
      if (!loose && b.tagName === 'P') li.append(...b.childNodes);
      else li.append(b);
    }
    list.append(li);
  }
  out.push(list);
  return i;
}

// mdLink returns a link to href, or null when href is not an http(s) or
// mailto address.
function mdLink(href) {
  href = href.trim();
  if (!/^(https?:\/\/|mailto:)/i.test(href)) return null;
  const a = el('a');
  a.href = href;
  a.rel = 'noopener noreferrer';
  a.target = '_blank';
  return a;
}

// The inline spans: at a position, the first whose re matches (and whose
// ok, if any, accepts the match and the character before it) makes the
// span's nodes in p.
const mdInlines = [
  { re: /^\\([!-/:-@[-`{-~])/, make: (m, p) => p.append(m[1]) },
  { re: /^(`+)([^]*?[^`])\1(?!`)/, make: (m, p) => p.append(el('code', '', m[2].replace(/\n/g, ' ').replace(/^ (.*) $/, '$1'))) },
  {
    re: /^!?\[((?:[^[\]\\]|\\.)*)\]\(\s*<?((?:[^\s()<>]|\([^\s()<>]*\))*)>?(?:\s+"[^"]*")?\s*\)/,
    make: (m, p) => {
      const a = mdLink(m[2]);
      if (!a) return mdInline(p, m[1]); // not a link: its text
      mdInline(a, m[1] || m[2]);
      p.append(a);
    },
  },
  { re: /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/i, make: (m, p) => p.append(mdText(mdLink(m[1]), m[1])) },
  {
    re: /^https?:\/\/[^\s<>]*[^\s<>.,:;"')\]!?*_~]/i,
    ok: (m, before) => !before || !/\w/.test(before),
    make: (m, p) => p.append(mdText(mdLink(m[0]), m[0])),
  },
  { re: /^(\*\*|__)(?=\S)([^]*?\S)\1/, ok: mdFlanked, make: (m, p) => p.append(mdInline(el('strong'), m[2])) },
  { re: /^(\*|_)(?=\S)([^]*?[^\s*_])\1(?!\1)/, ok: mdFlanked, make: (m, p) => p.append(mdInline(el('em'), m[2])) },
  { re: /^~~(?=\S)([^]*?\S)~~/, make: (m, p) => p.append(mdInline(el('del'), m[1])) },
];

// mdFlanked reports whether the delimited span m may start after the
// character before: an underscore inside a word is not a delimiter.
function mdFlanked(m, before) {
  return m[1][0] !== '_' || !before || !/\w/.test(before);
}

function mdText(e, text) {
  e.textContent = text;
  return e;
}

// mdInline adds the inline content of text to the element parent, and
// returns parent.
function mdInline(parent, text) {
  let plain = '';
  const flush = () => {
    if (plain) parent.append(plain);
    plain = '';
  };
  for (let i = 0; i < text.length; ) {
    const c = text[i];
    if (c === '\n') {
      flush();
      parent.append(el('br'));
      i++;
      continue;
    }
    const rest = '\\`[!<hH*_~'.includes(c) ? text.slice(i) : '';
    let span = null;
    for (const s of rest ? mdInlines : []) {
      const m = s.re.exec(rest);
      if (m && (!s.ok || s.ok(m, text[i - 1]))) {
        span = [s, m];
        break;
      }
    }
    if (span) {
      flush();
      span[0].make(span[1], parent);
      i += span[1][0].length;
    } else {
      plain += c;
      i++;
    }
  }
  flush();
  return parent;
}
