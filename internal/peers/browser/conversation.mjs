// Drives the web chat's conversations in headless Chromium with
// playwright-core: node conversation.mjs URL TOKEN SHOT_DIR. A new
// conversation, a message whose answer the agent makes with the docmem
// agent: its progress (the tool calls) while it works ("progress"), the
// answer ("live"); the page reloaded ("reloaded"); the page away while a
// message sent through the API is answered, then back ("away"). Prints one
// JSON line per step.
import { chromium } from 'playwright-core';

const [url, token, shots] = process.argv.slice(2);
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));

// What the page shows of the conversation.
const snapshot = () => {
  const log = document.querySelector('#log');
  return {
    url: location.search,
    log: log.textContent,
    bubbles: [...log.querySelectorAll('.msg')].map((b) => ({ cls: b.className, text: b.textContent })),
    progress: [...log.querySelectorAll('details.progress')].map((d) => ({
      open: d.open,
      summary: d.querySelector('summary').textContent,
      tools: [...d.querySelectorAll('details.tool summary')].map((s) => s.textContent),
    })),
    strong: [...log.querySelectorAll('.msg.assistant .text strong')].map((e) => e.textContent),
    hostile: log.querySelectorAll('.msg b, script, img').length,
    listed: [...document.querySelectorAll('#conversations li')].map((li) => ({ id: li.dataset.conversation, current: li.classList.contains('current') })),
  };
};
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  const errors = [];
  page.on('pageerror', (e) => { errors.push(String(e)); console.error('page error:', String(e)); });
  page.on('console', (m) => { if (m.type() === 'error') console.error('page console:', m.text()); });
  await page.goto(url);
  await page.fill('#token', token);
  await page.dispatchEvent('#token', 'change');
  await page.waitForSelector('#convbox:not([hidden])', { timeout: 30000 });
  await page.click('#newconv');
  await page.waitForFunction(() => location.search.startsWith('?conversation='), null, { timeout: 30000 });
  const conversation = new URLSearchParams(await page.evaluate(() => location.search)).get('conversation');
  // Asked at once: the page's socket may not be open yet.
  await page.fill('#prompt', 'write the decision in a docmem');
  await page.click('#go');
  // The agent's work shows while it goes on: its tool calls.
  await page.waitForFunction(() => document.querySelectorAll('details.progress[open] details.tool').length >= 4, null, { timeout: 30000 });
  out('progress', { conversation, ...(await page.evaluate(snapshot)), errors });
  await page.waitForSelector('.msg.assistant', { timeout: 30000 });
  out('live', { ...(await page.evaluate(snapshot)), errors });
  if (shots) {
    await page.waitForFunction(() => document.querySelector('#status').textContent === 'connected', null, { timeout: 10000 });
    await page.screenshot({ path: `${shots}/conversation.png` });
  }

  await page.reload();
  await page.waitForSelector('.msg.assistant', { timeout: 30000 });
  await page.waitForSelector('#conversations li.current', { timeout: 10000 });
  out('reloaded', { ...(await page.evaluate(snapshot)), errors });

  // Away while a message sent through the API is answered, then back.
  await page.goto('about:blank');
  const sent = await fetch(`${url}v1/conversations/${conversation}/messages`, {
    method: 'POST', headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ message: 'and hello' }),
  });
  if (sent.status !== 202) throw new Error(`POST message: ${sent.status} ${await sent.text()}`);
  for (let i = 0; ; i++) {
    const r = await fetch(`${url}v1/conversations/${conversation}`, { headers: { Authorization: 'Bearer ' + token } });
    const c = await r.json();
    if (c.messages.length >= 4) break;
    if (i > 300) throw new Error('no answer to the message sent through the API');
    await new Promise((ok) => setTimeout(ok, 100));
  }
  await page.goto(`${url}?conversation=${conversation}`);
  await page.waitForFunction(() => document.querySelector('#log').textContent.includes('You said: and hello'), null, { timeout: 30000 });
  // And one more from the page, answered live.
  await page.fill('#prompt', 'still here');
  await page.click('#go');
  await page.waitForFunction(() => document.querySelector('#log').textContent.includes('You said: still here'), null, { timeout: 30000 });
  out('away', { ...(await page.evaluate(snapshot)), errors });
} catch (e) {
  try {
    for (const p of browser.contexts().flatMap((c) => c.pages())) {
      const seen = await p.evaluate(() => ({
        url: location.href,
        status: document.querySelector('#status') && document.querySelector('#status').textContent,
        log: document.querySelector('#log') && document.querySelector('#log').textContent,
      }));
      console.error('the page:', JSON.stringify(seen));
    }
  } catch (e2) {
    console.error('the page could not be read:', String(e2));
  }
  throw e;
} finally {
  await browser.close();
}
