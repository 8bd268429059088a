// Drives Calf's web chat in headless Chromium with playwright-core:
// node chat.mjs URL TOKEN OTHER_TOKEN SHOT_DIR OLDER. A question whose tool call
// asks for approval, approved in the page, the page reloaded while the run
// goes on, the answer shown after the reload ("live"); the page reloaded
// again once the run ended, the session shown from the sessions API
// ("reloaded"); the session OLDER opened from the list ("older"); another
// user's view of the first one's session. Prints one JSON line per step.
import { chromium } from 'playwright-core';

const [url, token, other, shots, older] = process.argv.slice(2);
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));

// What the chat shows: each bubble (its class and HTML), the tool calls,
// their results, the answered approvals, the usage lines, what the
// Markdown made, and anything hostile that became live.
const snapshot = () => {
  const log = document.querySelector('#log');
  const all = (sel) => [...log.querySelectorAll(sel)];
  const texts = (sel) => all(sel).map((e) => e.textContent);
  return {
    log: log.textContent,
    bubbles: [...log.children].map((b) => ({ cls: b.className, html: b.innerHTML })),
    tools: texts('details.tool summary'),
    results: texts('details.tool pre.result'),
    approvals: texts('.usage.answered'),
    usage: texts('.usage:not(.answered)'),
    code: texts('.text pre code'),
    items: texts('.text li'),
    headings: texts('.text h2'),
    strong: texts('.text strong'),
    links: all('.text a').map((a) => ({ href: a.getAttribute('href'), rel: a.rel, text: a.textContent })),
    hostile: {
      elements: all('img, script, iframe, object, embed, svg, style').length,
      handlers: all('*').filter((e) => [...e.attributes].some((a) => /^on/i.test(a.name))).length,
      scriptLinks: [...document.querySelectorAll('a')].filter((a) => !/^(https?:|mailto:)/i.test(a.href)).map((a) => a.getAttribute('href')),
      title: document.title,
    },
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
  await page.waitForSelector('#agent option', { state: 'attached' });
  await page.fill('#prompt', 'add 2 and 3');
  await page.click('#go');
  await page.waitForSelector('.approval button.approve', { timeout: 30000 });
  const tool = await page.textContent('details.tool summary');
  const session = await page.evaluate(() => localStorage.getItem('calf.session'));
  out('approval', { tool, session });
  await page.click('.approval button.approve');
  // The answer comes two seconds after the approval: reload meanwhile.
  await page.waitForTimeout(300);
  await page.reload();
  await page.waitForFunction(() => document.querySelector('#log').textContent.includes('Done: 5'), null, { timeout: 30000 });
  // The run's end reached the page: Stop is disabled again.
  await page.waitForSelector('#stop:disabled', { state: 'attached', timeout: 30000 });
  const log = await page.textContent('#log');
  await page.waitForSelector('#sessions li.current', { timeout: 10000 });
  const cost = await page.textContent('#cost');
  out('answer', { log, cost, errors });
  out('live', await page.evaluate(snapshot));

  // Reloaded once the run ended: the session's turns show the same.
  await page.reload();
  await page.waitForFunction(() => document.querySelector('#log').textContent.includes('Done: 5'), null, { timeout: 30000 });
  await page.waitForSelector('#sessions li.current', { timeout: 10000 });
  if (shots) {
    await page.waitForFunction(() => document.querySelector('#status').textContent === 'connected', null, { timeout: 10000 });
    await page.screenshot({ path: `${shots}/chat.png` });
  }
  out('reloaded', { ...(await page.evaluate(snapshot)), errors });

  // An older session, opened from the list.
  await page.click(`#sessions li[data-session="${older}"]`);
  await page.waitForFunction(() => document.querySelector('#log').textContent.includes('It is'), null, { timeout: 30000 });
  out('older', { ...(await page.evaluate(snapshot)), errors });

  // Another user: the first user's session is not listed, nor readable.
  const page2 = await browser.newPage();
  await page2.goto(url);
  await page2.fill('#token', other);
  await page2.dispatchEvent('#token', 'change');
  await page2.waitForSelector('#agent option', { state: 'attached' });
  await page2.waitForLoadState('networkidle');
  const listed = await page2.$$eval('#sessions li', (lis) => lis.map((li) => li.dataset.session));
  const status = await page2.evaluate(async ([s, t]) => (await fetch('/v1/sessions/' + s, { headers: { Authorization: 'Bearer ' + t } })).status, [session, other]);
  out('other', { listed, status });
} catch (e) {
  // What the pages showed, for the test's failure message.
  try {
    for (const p of browser.contexts().flatMap((c) => c.pages())) {
      const seen = await p.evaluate(() => ({
        url: location.href,
        status: document.querySelector('#status').textContent,
        log: document.querySelector('#log').textContent,
        sessions: [...document.querySelectorAll('#sessions li')].map((li) => li.textContent),
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
