// Several models under one `glmserve serve` through the official openai client: the list with
// each model's state, answers from each (a ChatGLM3 and a GLM-4 tiny model, whose prompts have
// different token counts), and an unknown model raised as the client's NotFoundError.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

import { genModel, startServe } from './server.mjs';

const dir = mkdtempSync(join(tmpdir(), 'glm-models-'));
let server;
before(async () => {
  const a = genModel(dir, 'chatglm3', 'chatglm3.tokenizer.model');
  const b = genModel(dir, 'glm4', 'glm4.tokenizer.model');
  server = await startServe(a, ['--model', b, '--keep-alive', '-1']);
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

const openai = () => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
const ask = (model) => openai().chat.completions.create({
  model, max_tokens: 4, temperature: 0, messages: [{ role: 'user', content: '你好，请介绍一下北京' }],
});

test('models: the list names both, unloaded until asked', async () => {
  const ids = [];
  for await (const m of openai().models.list()) {
    ids.push(m.id);
    assert.equal(m.state, 'unloaded');
  }
  assert.deepEqual(ids, ['chatglm3-tiny', 'glm4-tiny']);
});

test('models: each answers its own requests and is then listed loaded', async () => {
  const a = await ask('chatglm3-tiny');
  const b = await ask('glm4-tiny');
  assert.equal(a.model, 'chatglm3-tiny');
  assert.equal(b.model, 'glm4-tiny');
  assert.ok(a.usage.prompt_tokens > 0 && b.usage.prompt_tokens > 0);
  assert.notEqual(a.usage.prompt_tokens, b.usage.prompt_tokens);  // two vocabularies
  assert.equal((await openai().models.retrieve('glm4-tiny')).state, 'loaded');
});

test('models: an unknown model is a NotFoundError naming the models served', async () => {
  await assert.rejects(ask('nope'), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    assert.match(e.message, /'nope' is not served here.*'chatglm3-tiny', 'glm4-tiny'/);
    return true;
  });
});
