// `n` > 1 and the client libraries' own retries, through the official `openai` npm client
// against `glmserve serve` on a random-weight ChatGLM3 tiny model with its real vocabulary:
// with a seed, choice i of an n-choice request equals a single request with seed + i (the
// documented rule), streamed equals non-streamed, the prompt is counted (and prefilled) once;
// an SDK with its default retries succeeds against a briefly busy engine because 429 carries
// Retry-After.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

import { genModel, startServe } from './server.mjs';

const dir = mkdtempSync(join(tmpdir(), 'glm-choices-'));
let model;
let server;
before(async () => {
  model = genModel(dir, 'chatglm3', 'chatglm3.tokenizer.model');
  server = await startServe(model);
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

const openai = (url = server.url, options = { maxRetries: 0 }) =>
  new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', ...options });

// The engine's prompt-token counter (every prompt token admitted, once per request).
const promptTokensTotal = () => server.counter('glmserve_engine_prompt_tokens_total');

const ask = {
  model: 'any', max_tokens: 16, temperature: 1.0, top_p: 1.0, seed: 4242,
  messages: [{ role: 'user', content: 'Tell me something about the sea.' }],
};

test('chat n=3: each choice is the single answer with seed + index, the prompt counted once', async () => {
  const single = [];
  for (let i = 0; i < 3; i++) {
    const r = await openai().chat.completions.create({ ...ask, seed: ask.seed + i });
    single.push(r.choices[0].message.content);
  }
  assert.notEqual(single[0], single[1], 'the seeds give different answers');
  const before = await promptTokensTotal();
  const r = await openai().chat.completions.create({ ...ask, n: 3, logprobs: true });
  const after = await promptTokensTotal();
  assert.equal(r.choices.length, 3);
  r.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.message.role, 'assistant');
    assert.equal(c.message.content, single[i], `choice ${i}`);
    assert.ok(['stop', 'length'].includes(c.finish_reason));
    assert.equal(c.logprobs.content.map((t) => t.token).join(''), c.message.content);
  });
  assert.equal(after - before, r.usage.prompt_tokens, 'one prompt for three choices');
  const solo = await openai().chat.completions.create({ ...ask });
  assert.equal(r.usage.prompt_tokens, solo.usage.prompt_tokens);

  // Streamed: chunks of the three choices interleave by index and spell the same answers.
  const stream = await openai().chat.completions.create({
    ...ask, n: 3, stream: true, stream_options: { include_usage: true },
  });
  const text = ['', '', ''];
  const finish = [null, null, null];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text[c.index] += c.delta?.content ?? '';
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(text, single);
  assert.deepEqual(finish, r.choices.map((c) => c.finish_reason));
  assert.equal(usage.completion_tokens, r.usage.completion_tokens);
  assert.equal(usage.prompt_tokens, r.usage.prompt_tokens);
});

test('completions n=2 with echo: each choice is the prompt and its own continuation', async () => {
  const base = { model: 'any', prompt: 'The sea is', max_tokens: 10, temperature: 1.0, seed: 99 };
  const single = [];
  for (let i = 0; i < 2; i++) {
    single.push((await openai().completions.create({ ...base, seed: base.seed + i })).choices[0].text);
  }
  const r = await openai().completions.create({ ...base, n: 2, echo: true });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.deepEqual(r.choices.map((c) => c.text), single.map((s) => base.prompt + s));
  const stream = await openai().completions.create({ ...base, n: 2, stream: true });
  const text = ['', ''];
  for await (const chunk of stream) for (const c of chunk.choices) text[c.index] += c.text;
  assert.deepEqual(text, single);
});

test('n is refused clearly where it cannot be served', async () => {
  await assert.rejects(openai().chat.completions.create({ ...ask, n: 9 }),
    (e) => e instanceof OpenAI.BadRequestError && /n must be/.test(e.message));
  await assert.rejects(openai().chat.completions.create({
    ...ask, n: 2, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  }), (e) => e instanceof OpenAI.BadRequestError && /tools/.test(e.message));
});

test('an SDK with its default retries gets every answer from a briefly busy engine', async () => {
  // One sequence at a time and one waiting: of four requests at once, two are refused with 429
  // (and Retry-After: 1 s); the SDK's own retries (2 by default) wait as told and succeed
  // (each answer takes well under a second, so one retry finds room for both).
  const busy = await startServe(model, ['--max-batch', '1', '--max-queue', '1']);
  try {
    const one = { ...ask, max_tokens: 8, temperature: 0 };
    const burst = (client) => Promise.allSettled(
      Array.from({ length: 4 }, () => client.chat.completions.create(one)));
    // Without retries the burst does meet a busy engine (so the next check means something).
    const bare = await burst(openai(busy.url, { maxRetries: 0 }));
    const refused = bare.filter((s) => s.status === 'rejected');
    assert.ok(refused.length > 0, 'the burst met a busy engine');
    for (const s of refused) {
      assert.ok(s.reason instanceof OpenAI.RateLimitError, String(s.reason));
      assert.ok(Number(s.reason.headers.get('retry-after')) >= 1);
    }
    const retried = await burst(openai(busy.url, {})); // the SDK's defaults
    const failed = retried.filter((s) => s.status === 'rejected').map((s) => String(s.reason));
    assert.deepEqual(failed, []);
    const answers = retried.map((s) => s.value.choices[0].message.content);
    assert.ok(answers.every((a) => a === answers[0]), 'same request, same greedy answer');
  } finally {
    await busy.stop();
  }
});
