// The page `glmserve bench serve --report` writes (src/bench/report_html.cc), opened from a file
// in chromium: it renders with no console error, asks for nothing outside itself, and draws every
// chart. Needs no gateway (node --test tests/browser/report.test.mjs after a build).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser } from './harness.mjs';

const GLMSERVE = process.env.GLMSERVE || 'build/glmserve';
let browser;
let dir;
before(async () => {
  browser = await openBrowser();
  dir = mkdtempSync(join(tmpdir(), 'glm-report-'));
});
after(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the bench serve report renders from a file with every chart and no outside request', async () => {
  const browserJson = join(dir, 'browser.json');
  writeFileSync(browserJson, JSON.stringify({
    prompt: 'What is the capital of France?', warmup: 3,
    first_char_ms: [30, 31, 32, 33], engine_ttft_ms: [20, 20, 21, 20],
  }));
  const report = join(dir, 'report.html');
  execFileSync(GLMSERVE, ['bench', 'serve', '--echo', '--runs', '3', '--warmup', '0',
    '--max-tokens', '3', '--concurrency', '1,2', '--turns', '2', '--report', report,
    '--browser', browserJson], { stdio: 'pipe' });

  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  const errors = [];
  const outside = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('request', (r) => { if (!r.url().startsWith('file://')) outside.push(r.url()); });
  await page.goto(`file://${report}`);
  await page.waitForLoadState('load');
  assert.deepEqual(errors, []);
  assert.deepEqual(outside, []);
  assert.equal(await page.title(), 'glmserve serving latency: echo');
  // Seven charts (3 by layer, browser, 2 sweep, turns), each drawn with a real size and bars.
  const charts = await page.locator('svg.chart').evaluateAll((svgs) => svgs.map((s) => {
    const box = s.getBoundingClientRect();
    return { w: box.width, h: box.height, bars: s.querySelectorAll('rect').length };
  }));
  assert.equal(charts.length, 7);
  for (const c of charts) {
    assert.ok(c.w > 300 && c.h > 100, `chart size ${c.w}x${c.h}`);
    assert.ok(c.bars >= 1, 'chart has bars');
  }
  // Headings of every section, in order.
  const h2 = await page.locator('h2').allTextContents();
  assert.deepEqual(h2, ['Method', 'Machine and model', 'Per layer: TTFT, TPOT, end-to-end',
    'Real browser: click to first character', 'Concurrency sweep', 'Multi-turn TTFT by turn',
    'Reference: the seed study']);
  await context.close();
});
