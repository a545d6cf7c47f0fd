// Measures the page (docs/performance.md, the seed study's method): click-to-first-character latency
// minus the engine's own TTFT for the same request (3 warm-ups, 10 runs; median, and mean and
// stddev without min and max), page weight (bytes transferred, gzip) and time to first paint.
// Run by scripts/test-browser.sh with GLM_MEASURE=1 (needs GLM_WEB_URL; the engine may be the
// fake one or a real `glmserve engine`). GLM_MEASURE_JSON=FILE also writes the measured runs as
// JSON for `glmserve bench serve --report R.html --browser FILE` (src/bench/report_html.h).
import { writeFileSync } from 'node:fs';
import { api, newPage, openBrowser, send, waitDone } from './harness.mjs';

const WARMUP = 3;
const RUNS = 10;
const prompt = process.env.GLM_MEASURE_PROMPT || 'What is the capital of France?';

const browser = await openBrowser();
try {
  // Page weight and first paint, cold (fresh context: no cache).
  const cold = await newPage(browser);
  const load = await cold.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    const paint = Object.fromEntries(performance.getEntriesByType('paint').map((p) => [p.name, p.startTime]));
    return {
      transferred: nav.transferSize + res.reduce((n, r) => n + r.transferSize, 0),
      decoded: nav.decodedBodySize + res.reduce((n, r) => n + r.decodedBodySize, 0),
      files: 1 + res.length,
      firstPaint: paint['first-paint'],
      firstContentfulPaint: paint['first-contentful-paint'],
      domContentLoaded: nav.domContentLoadedEventEnd,
    };
  });
  await cold.context().close();

  const page = await newPage(browser);
  const overheads = [];
  const rows = [];
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const answer = await send(page, prompt);
    await waitDone(answer);
    const firstChar = Number(await answer.getAttribute('data-first-char-ms'));
    const id = Number(await answer.getAttribute('data-id'));
    const conv = await api(`/api/conversations/${new URL(page.url()).hash.slice(1)}`);
    const msg = conv.messages.find((m) => m.id === id);
    const engineTtft = msg.meta.ttft_ms;
    if (i >= WARMUP) {
      overheads.push(firstChar - engineTtft);
      rows.push({ firstChar, engineTtft });
    }
  }
  const sorted = [...overheads].sort((a, b) => a - b);
  const median = (sorted[4] + sorted[5]) / 2;
  const trimmed = sorted.slice(1, -1);
  const mean = trimmed.reduce((a, b) => a + b, 0) / trimmed.length;
  const sd = Math.sqrt(trimmed.reduce((a, b) => a + (b - mean) ** 2, 0) / (trimmed.length - 1));
  const fmt = (x) => x.toFixed(2);
  console.log('run  click->first char (ms)  engine TTFT (ms)  overhead (ms)');
  rows.forEach((r, i) => console.log(`${String(i + 1).padStart(3)}  ${fmt(r.firstChar).padStart(22)}  ${fmt(r.engineTtft).padStart(16)}  ${fmt(r.firstChar - r.engineTtft).padStart(13)}`));
  console.log(`overhead above engine TTFT: median ${fmt(median)} ms; mean ${fmt(mean)} ± ${fmt(sd)} ms (min/max dropped), n=${RUNS} after ${WARMUP} warm-ups`);
  console.log(`page weight: ${load.transferred} B transferred (${(load.transferred / 1024).toFixed(1)} KiB, ${load.files} files), ${load.decoded} B decoded`);
  console.log(`first paint ${fmt(load.firstPaint)} ms, first contentful paint ${fmt(load.firstContentfulPaint)} ms, DOMContentLoaded ${fmt(load.domContentLoaded)} ms`);
  if (process.env.GLM_MEASURE_JSON) {
    const out = {
      prompt,
      warmup: WARMUP,
      first_char_ms: rows.map((r) => r.firstChar),
      engine_ttft_ms: rows.map((r) => r.engineTtft),
      page_bytes_transferred: load.transferred,
      first_contentful_paint_ms: load.firstContentfulPaint,
    };
    writeFileSync(process.env.GLM_MEASURE_JSON, `${JSON.stringify(out, null, 1)}\n`);
    console.log(`wrote ${process.env.GLM_MEASURE_JSON}`);
  }
} finally {
  await browser.close();
}
