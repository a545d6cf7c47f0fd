// A prompt that comes again whole (a chat page's regenerate, a client's retry), through the
// official `openai` and `@anthropic-ai/sdk` clients against `glmserve serve` on a random-weight
// ChatGLM3 tiny model with its real vocabulary: the repeat reports every prompt token cached
// (OpenAI's prompt_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens), the
// engine counts it as a whole prompt (no forward pass before its first token:
// docs/engine.md#prompt-logits), and a greedy repeat answers exactly as the first time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

import { genModel, startServe } from './server.mjs';

const dir = mkdtempSync(join(tmpdir(), 'glm-regenerate-'));
let server;
before(async () => {
  server = await startServe(genModel(dir, 'chatglm3', 'chatglm3.tokenizer.model'));
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

const openai = () => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
const anthropic = () => new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });

const wholePrompts = () => server.counter('glmserve_engine_whole_prompts_total');

test('openai: a repeated chat request takes its whole prompt from the cache and answers alike', async () => {
  const ask = {
    model: 'any', max_tokens: 12, temperature: 0,
    messages: [{ role: 'user', content: 'Name three colours of the evening sky.' }],
  };
  const first = await openai().chat.completions.create(ask);
  const before = await wholePrompts();
  const again = await openai().chat.completions.create(ask);
  assert.equal(await wholePrompts(), before + 1);
  assert.equal(again.choices[0].message.content, first.choices[0].message.content);
  assert.equal(again.usage.prompt_tokens, first.usage.prompt_tokens);
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens);
  assert.ok(first.usage.prompt_tokens_details.cached_tokens < first.usage.prompt_tokens);
  // A different question runs its prompt (counted as no whole prompt).
  await openai().chat.completions.create({ ...ask, messages: [{ role: 'user', content: 'And at dawn?' }] });
  assert.equal(await wholePrompts(), before + 1);
});

test('anthropic: a repeated message reads every input token from the cache', async () => {
  const ask = {
    model: 'any', max_tokens: 10, temperature: 0,
    messages: [{ role: 'user', content: 'Say something about rivers.' }],
  };
  const first = await anthropic().messages.create(ask);
  const again = await anthropic().messages.create(ask);
  assert.deepEqual(again.content, first.content);
  // Anthropic splits the prompt into input_tokens (not read from a cache) and
  // cache_read_input_tokens: the repeat read all of it.
  const prompt = first.usage.input_tokens + first.usage.cache_read_input_tokens;
  assert.ok(first.usage.input_tokens > 0);
  assert.equal(again.usage.input_tokens, 0);
  assert.equal(again.usage.cache_read_input_tokens, prompt);
});
