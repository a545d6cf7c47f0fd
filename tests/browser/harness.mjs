// Shared setup of the browser tests: Debian's chromium through playwright-core, against the
// gateway started by scripts/test-browser.sh (GLM_WEB_URL) in front of fake_engine.mjs, whose
// log of requests and cancels is GLM_FAKE_LOG.
import { readFileSync } from 'node:fs';
import { chromium } from '../../web/node_modules/playwright-core/index.mjs';

export const BASE = process.env.GLM_WEB_URL || 'http://127.0.0.1:8080';
const LOG = process.env.GLM_FAKE_LOG || '';

export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run',
];

// A fresh browser (its own temporary user-data-dir) and page.
export async function openBrowser() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
  });
  return browser;
}

export async function newPage(browser, options = {}) {
  // A Chinese browser unless a test says otherwise: the page follows navigator.language.
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 }, locale: 'zh-CN',
    ...options });
  const page = await context.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  await page.goto(BASE);
  await page.waitForSelector('#input');
  return page;
}

export function engineLog() {
  if (!LOG) return [];
  return readFileSync(LOG, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

// Types `text` and presses Enter; returns the new answer's locator.
export async function send(page, text) {
  const before = await page.locator('.msg.assistant').count();
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
  const answer = page.locator('.msg.assistant').nth(before);
  await answer.waitFor();
  return answer;
}

export async function waitDone(answer) {
  await answer.locator('xpath=self::*[@data-status]').waitFor({ timeout: 20000 });
}

export async function api(path, init) {
  const res = await fetch(BASE + path, init);
  return res.json();
}
