// The page in front of `glmserve serve` itself (not the fake engine): with two random-weight
// models, a picker lists both with their state and the answer comes from the one chosen (the
// stats line names it); with one such model, the header says "random weights — demo"; with an
// adapter served by name, the picker lists it and the answer comes from it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { GLMSERVE, genModel, startServe } from '../clients/server.mjs';
import { openBrowser } from './harness.mjs';

const dir = mkdtempSync(join(tmpdir(), 'glm-page-models-'));
let browser;
let a;
let b;
before(async () => {
  browser = await openBrowser();
  a = genModel(dir, 'chatglm3', 'chatglm3.tokenizer.model');
  b = genModel(dir, 'glm4', 'glm4.tokenizer.model');
});
after(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function open(url) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 }, locale: 'en-US' });
  const page = await context.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  await page.goto(url);
  await page.waitForSelector('#input');
  return page;
}

async function ask(page, text) {
  const n = await page.locator('.msg.assistant').count();
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
  const answer = page.locator('.msg.assistant').nth(n);
  await answer.locator('xpath=self::*[@data-status]').waitFor({ timeout: 60000 });
  return answer;
}

test('two models: the picker lists both, and the chosen one answers', async () => {
  const server = await startServe(a, ['--model', b, '--keep-alive', '-1']);
  try {
    const page = await open(server.url);
    const pick = page.locator('#model-pick');
    await pick.waitFor();
    assert.deepEqual(await pick.locator('option').evaluateAll((o) => o.map((x) => x.value)),
      ['chatglm3-tiny', 'glm4-tiny']);
    assert.match(await pick.locator('option').nth(1).textContent(), /not loaded/);
    // A fresh page: its timer's next look at /health is 15 s away.
    await page.reload();
    await pick.locator('option').nth(1).waitFor({ state: 'attached' });
    await pick.selectOption('glm4-tiny');
    const asked = Date.now();  // the page's own 15 s timer must not be what updates the picker
    await page.fill('#input', '你好');
    await page.press('#input', 'Enter');
    const answer = page.locator('.msg.assistant').nth(0);
    // As soon as the answer is being written its model is loaded, and the picker says so
    // without a reload (it asks /health again when an answer starts and when it ends).
    await answer.locator('.bubble').filter({ hasText: /\S/ }).waitFor({ timeout: 60000 });
    const option = pick.locator('option').nth(1);
    for (let i = 0; i < 20 && /not loaded/.test(await option.textContent()); i++) await page.waitForTimeout(100);
    assert.doesNotMatch(await option.textContent(), /not loaded/, `${Date.now() - asked} ms after asking`);
    assert.ok(Date.now() - asked < 12000, `the check came ${Date.now() - asked} ms after asking: too late to tell`);
    assert.match(await pick.locator('option').nth(0).textContent(), /not loaded/);
    await answer.locator('xpath=self::*[@data-status]').waitFor({ timeout: 60000 });
    assert.equal(await answer.getAttribute('data-status'), 'complete');
    assert.match(await answer.locator('.stats').textContent(), /^glm4-tiny · /);
    // The gateway stored which model answered, and that model is loaded now, the other not.
    const id = new URL(page.url()).hash.slice(1);
    const conv = await (await fetch(`${server.url}/api/conversations/${id}`)).json();
    assert.equal(conv.messages[1].meta.model, 'glm4-tiny');
    const models = (await (await fetch(`${server.url}/v1/models`)).json()).data;
    assert.deepEqual(models.map((m) => [m.id, m.state]), [['chatglm3-tiny', 'unloaded'], ['glm4-tiny', 'loaded']]);
    assert.doesNotMatch(await option.textContent(), /not loaded/);
    // The choice is kept across a reload.
    await page.reload();
    await page.locator('#model-pick').waitFor();
    assert.equal(await page.locator('#model-pick').inputValue(), 'glm4-tiny');
    await page.context().close();
  } finally {
    await server.stop();
  }
});

test('one random-weight model: the header names it as several models are named (file stem) and says it is a demo', async () => {
  const server = await startServe(a);
  try {
    const page = await open(server.url);
    await page.locator('#demo-badge').waitFor();
    assert.equal(await page.locator('#demo-badge').textContent(), 'random weights — demo');
    assert.equal(await page.locator('#model-name').textContent(), 'chatglm3-tiny');
    // The API names it by the same rule, so a client configured against a several-model serve
    // finds it here too.
    const models = (await (await fetch(`${server.url}/v1/models`)).json()).data;
    assert.deepEqual(models.map((m) => m.id), ['chatglm3-tiny']);
    assert.equal((await fetch(`${server.url}/v1/models/chatglm3-tiny`)).status, 200);
    assert.equal(await page.locator('#model-pick').isVisible(), false);
    await page.context().close();
  } finally {
    await server.stop();
  }
});

test('an adapter served by name: the picker lists it after its model, and the chosen one answers', async () => {
  const lora = join(dir, 'ad.gguf');
  execFileSync(GLMSERVE, ['gen-model', '--lora-of', a, '--rank', '8', '--alpha', '32', '-o', lora],
    { stdio: 'ignore' });
  const server = await startServe(a, ['--adapter', `ad=${lora}`]);
  try {
    const page = await open(server.url);
    const pick = page.locator('#model-pick');
    await pick.waitFor();
    assert.deepEqual(await pick.locator('option').evaluateAll((o) => o.map((x) => x.value)),
      ['chatglm3-tiny', 'ad']);
    // Greedy answers, so that the adapter's and the bare model's can be told apart.
    await page.locator('#temperature').evaluate((el) => {
      el.value = '0';
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
    });
    const answerWith = async (model) => {
      await page.click('#new-chat');
      await pick.selectOption(model);
      const answer = await ask(page, '你好');
      assert.equal(await answer.getAttribute('data-status'), 'complete');
      assert.match(await answer.locator('.stats').textContent(), new RegExp(`^${model} · `));
      const id = new URL(page.url()).hash.slice(1);
      const conv = await (await fetch(`${server.url}/api/conversations/${id}`)).json();
      assert.equal(conv.messages[1].meta.model, model);
      return answer.locator('.bubble').textContent();
    };
    const adapted = await answerWith('ad');
    const bare = await answerWith('chatglm3-tiny');
    assert.notEqual(adapted, bare);
    assert.equal(await answerWith('ad'), adapted);
    await page.context().close();
  } finally {
    await server.stop();
  }
});
