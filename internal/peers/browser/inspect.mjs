// Drives Calf's run inspector in headless Chromium with playwright-core:
// node inspect.mjs URL TOKEN RUN SHOT_DIR [WORKFLOW_RUN]. The run, in
// progress, is opened; its topology is read while it runs and after it
// ends; the tool call's edge is clicked for its payload; the run's dead
// letter is replayed; the workflow run's topology is read.
// Prints one JSON line per step.
import { chromium } from 'playwright-core';

const [url, token, run, shots, wfRun] = process.argv.slice(2);
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const topology = () => ({
  nodes: [...document.querySelectorAll('#topology g.node')].map((g) => g.textContent),
  edges: document.querySelectorAll("#topology g.edge.label").length,
  rows: [...document.querySelectorAll('#events tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent)),
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on('pageerror', (e) => { errors.push(String(e)); console.error('page error:', String(e)); });
  page.on('console', (m) => { if (m.type() === 'error') console.error('page console:', m.text()); });
  await page.goto(url + 'inspect.html');
  await page.fill('#token', token);
  await page.dispatchEvent('#token', 'change');
  await page.waitForSelector(`#runs li[data-run="${run}"]`, { timeout: 30000 });
  const listed = await page.$$eval('#runs li', (lis) => lis.map((li) => li.dataset.run));
  await page.click(`#runs li[data-run="${run}"]`);
  // While the run waits for its model: the tool's result is drawn, the
  // output not yet.
  await page.waitForFunction(() => [...document.querySelectorAll('#events tbody tr')].some((tr) => tr.textContent.includes('tool_result')), null, { timeout: 30000 });
  out('running', { listed, ...(await page.evaluate(topology)) });
  await page.waitForFunction(() => [...document.querySelectorAll('#events tbody tr')].some((tr) => tr.textContent.includes('output')), null, { timeout: 30000 });
  const done = await page.evaluate(topology);
  // The tool call's edge, clicked in the drawing.
  const seq = done.rows.find((r) => r[2].startsWith('tool_call'))[0];
  await page.click(`#topology g.edge.label[data-seq="${seq}"]`);
  await page.waitForSelector('#payload pre');
  const payload = await page.textContent('#payload');
  const selected = await page.$$eval('#topology g.edge.label.selected', (gs) => gs.map((g) => g.dataset.seq));
  const head = await page.textContent('#runhead');
  if (shots) await page.screenshot({ path: `${shots}/inspector.png` });
  out('ended', { ...done, seq, payload, selected, head, errors });

  // The run's dead letter, replayed from the page.
  await page.waitForSelector('#letters li button', { timeout: 30000 });
  const letters = await page.$$eval('#letters li', (lis) => lis.map((li) => li.textContent));
  await page.click('#letters li button');
  await page.waitForFunction(() => document.querySelector('#letters li button').textContent === 'replayed', null, { timeout: 30000 });
  out('letters', { letters, errors });

  // A workflow's run, opened by its address.
  if (wfRun) {
    await page.goto(url + 'inspect.html#run=' + encodeURIComponent(wfRun));
    await page.waitForFunction(() => [...document.querySelectorAll('#events tbody tr')].some((tr) => tr.textContent.includes('output')), null, { timeout: 30000 });
    await page.waitForFunction(() => document.querySelector('#runhead').textContent.includes('workflow'), null, { timeout: 30000 });
    out('workflow', { ...(await page.evaluate(topology)), head: await page.textContent('#runhead'), errors });
  }
} catch (e) {
  // What the page showed, for the test's failure message.
  try {
    const pages = browser.contexts().flatMap((c) => c.pages());
    for (const p of pages) {
      const seen = await p.evaluate(() => ({
        url: location.href,
        status: document.querySelector('#status') && document.querySelector('#status').textContent,
        head: document.querySelector('#runhead') && document.querySelector('#runhead').textContent,
        runs: [...document.querySelectorAll('#runs li')].map((li) => li.textContent),
        rows: [...document.querySelectorAll('#events tbody tr')].map((tr) => tr.textContent),
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
