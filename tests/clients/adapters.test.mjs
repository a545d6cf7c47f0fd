// LoRA adapters served by name (`serve --adapter NAME=PATH`, docs/adapters.md) through the
// official openai and @anthropic-ai/sdk clients: /v1/models lists each adapter with its base as
// parent, `model: "NAME"` and `model: "BASE:NAME"` select it on the chat, Responses and
// Anthropic routes, the bare model stays itself, an unknown BASE:NAME is a NotFoundError, and
// POST /v1/load_lora_adapter / unload_lora_adapter (vLLM's shapes; API key required) add and
// remove one at run time while answers run.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

import { GLMSERVE, genModel, startServe } from './server.mjs';

const dir = mkdtempSync(join(tmpdir(), 'glm-adapters-'));
const KEY = 'adapters-test-key';
process.env.GLMSERVE_API_KEY = KEY;  // serve hands it to its gateway in the environment
let server;
const BASE = 'chatglm3-tiny';
before(async () => {
  const model = genModel(dir, 'chatglm3', 'chatglm3.tokenizer.model');
  for (const seed of [1, 2, 3]) {
    execFileSync(GLMSERVE, ['gen-model', '--lora-of', model, '--rank', '8', '--alpha', '32',
      '--seed', String(seed), '-o', join(dir, `a${seed}.gguf`)], { stdio: 'ignore' });
  }
  server = await startServe(model, ['--adapter', `a1=${join(dir, 'a1.gguf')}`,
    '--adapter', `a2=${join(dir, 'a2.gguf')}`, '--kv-disk', 'off']);
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

const openai = () => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
const messages = [{ role: 'user', content: '你好，请介绍一下北京' }];
const chat = async (model) => (await openai().chat.completions.create({
  model, max_tokens: 12, temperature: 0, messages,
})).choices[0].message.content;

test('adapters: /v1/models lists each adapter with its base as parent', async () => {
  const models = [];
  for await (const m of openai().models.list()) models.push(m);
  assert.deepEqual(models.map((m) => m.id), [BASE, 'a1', 'a2']);
  for (const m of models.slice(1)) {
    assert.equal(m.parent, BASE);
    assert.equal(m.root, BASE);
  }
  assert.equal((await openai().models.retrieve(`${BASE}:a2`)).id, 'a2');
});

test('adapters: NAME and BASE:NAME select the adapter; the base stays itself', async () => {
  const base = await chat(BASE);
  const a1 = await chat('a1');
  const a2 = await chat('a2');
  assert.notEqual(a1, base);
  assert.notEqual(a2, base);
  assert.notEqual(a1, a2);
  assert.equal(await chat(`${BASE}:a1`), a1);
  assert.equal(await chat(BASE), base);  // the prefix cache does not lend a1's KV to the base
  assert.equal(await chat('a1'), a1);
});

test('adapters: the Responses and Anthropic routes select by the same names', async () => {
  const viaChat = await chat('a2');
  const r = await openai().responses.create({ model: 'a2', input: messages[0].content,
    max_output_tokens: 12, temperature: 0 });
  assert.equal(r.output_text, viaChat);
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
  const m = await anthropic.messages.create({ model: `${BASE}:a2`, max_tokens: 12,
    temperature: 0, messages });
  assert.equal(m.content[0].text, viaChat);
});

test('adapters: an unknown BASE:NAME is a NotFoundError naming the served adapters', async () => {
  await assert.rejects(chat(`${BASE}:nope`), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    assert.match(e.message, /adapter 'nope' is not served here; served: a1, a2/);
    return true;
  });
});

const post = (path, body, key = KEY) => fetch(`${server.url}${path}`, {
  method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
  body: JSON.stringify(body),
});

test('adapters: loaded and unloaded at run time while answers run, none lost', async () => {
  assert.equal((await post('/v1/load_lora_adapter', { lora_name: 'a3',
    lora_path: join(dir, 'a3.gguf') }, 'wrong')).status, 401);
  const alone = await chat('a1');
  // Answers of a1 keep running while a3 comes and goes.
  const running = Array.from({ length: 6 }, () => chat('a1'));
  const load = await post('/v1/load_lora_adapter', { lora_name: 'a3', lora_path: join(dir, 'a3.gguf') });
  assert.equal(load.status, 200, await load.clone().text());
  assert.deepEqual((await load.json()).adapters, ['a1', 'a2', 'a3']);
  const a3 = await chat('a3');
  assert.notEqual(a3, alone);
  assert.equal((await post('/v1/unload_lora_adapter', { lora_name: 'a3' })).status, 200);
  for (const text of await Promise.all(running)) assert.equal(text, alone);
  await assert.rejects(chat(`${BASE}:a3`), OpenAI.NotFoundError);
  // A file that is no adapter for this model: refused, naming why; the server serves on.
  const bad = await post('/v1/load_lora_adapter', { lora_name: 'bad', lora_path: join(dir, 'chatglm3-tiny.gguf') });
  assert.equal(bad.status >= 400 && bad.status < 500, true);
  assert.match((await bad.json()).error.message, /not an adapter/);
  assert.equal(await chat('a1'), alone);
});
