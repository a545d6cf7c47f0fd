// The rest of the API surface through official clients: the Anthropic Messages API with
// @anthropic-ai/sdk (text, streaming, a forced tool_use whose input validates with ajv) and
// OpenAI's legacy completions with the openai client, against `glmserve serve` on a
// random-weight ChatGLM3 tiny model with its real vocabulary.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import Ajv from 'ajv';

import { genModel, startServe } from './server.mjs';

const dir = mkdtempSync(join(tmpdir(), 'glm-api-'));
let server;
before(async () => {
  server = await startServe(genModel(dir, 'chatglm3', 'chatglm3.tokenizer.model'));
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

const anthropic = () => new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
const openai = () => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });

test('messages: a text answer with usage', async () => {
  const m = await anthropic().messages.create({
    model: 'any', max_tokens: 12, temperature: 0, system: 'Be brief.',
    messages: [{ role: 'user', content: 'Hello' }],
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0);
});

test('messages: streamed text equals the non-streamed text at temperature 0', async () => {
  const request = { model: 'any', max_tokens: 12, temperature: 0, messages: [{ role: 'user', content: 'Hi there' }] };
  const whole = await anthropic().messages.create(request);
  const stream = anthropic().messages.stream(request);
  let text = '';
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.equal(final.content[0].text, whole.content[0].text);
  assert.equal(final.stop_reason, whole.stop_reason);
});

test('messages: a forced tool_use has input valid against its schema, streamed or not', async () => {
  const schema = {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 10 }, days: { type: 'integer', minimum: 1, maximum: 5 } },
    required: ['city', 'days'],
    additionalProperties: false,
  };
  const validate = new Ajv().compile(schema);
  const request = {
    model: 'any', max_tokens: 120, temperature: 0,
    tools: [{ name: 'get_weather', description: 'weather', input_schema: schema }],
    tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: '北京天气' }],
  };
  const m = await anthropic().messages.create(request);
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.match(use.id, /^toolu_/);
  assert.ok(validate(use.input), JSON.stringify(use.input));
  const streamed = await anthropic().messages.stream(request).finalMessage();
  const s = streamed.content.find((b) => b.type === 'tool_use');
  assert.deepEqual(s.input, use.input);
  // The result goes back as a tool_result block.
  const next = await anthropic().messages.create({
    model: 'any', max_tokens: 6, temperature: 0, tools: request.tools,
    messages: [...request.messages, { role: 'assistant', content: m.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] }],
  });
  // The prompt is input_tokens (not read from the cache) + cache_read_input_tokens, as Anthropic
  // splits it: the next turn's is longer.
  const prompt = (u) => u.input_tokens + u.cache_read_input_tokens;
  assert.ok(prompt(next.usage) > prompt(m.usage));
  assert.ok(next.usage.cache_read_input_tokens > 0, 'the next turn reads the first from the cache');
});

test('messages: errors are Anthropic errors the SDK raises', async () => {
  await assert.rejects(
    anthropic().messages.create({ model: 'any', max_tokens: 5, messages: [{ role: 'system', content: 'x' }] }),
    (e) => e instanceof Anthropic.BadRequestError && /messages\[0\]\.role/.test(e.message),
  );
});

test('completions: a raw continuation, echo and streaming', async () => {
  const c = await openai().completions.create({ model: 'any', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(c.object, 'text_completion');
  assert.ok(['stop', 'length'].includes(c.choices[0].finish_reason));
  const echoed = await openai().completions.create({ model: 'any', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, echo: true });
  assert.equal(echoed.choices[0].text, 'Once upon a time' + c.choices[0].text);
  let text = '';
  for await (const chunk of await openai().completions.create({ model: 'any', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true })) {
    text += chunk.choices[0]?.text ?? '';
  }
  assert.equal(text, c.choices[0].text);
  await assert.rejects(
    openai().completions.create({ model: 'any', prompt: 'x', suffix: 'y' }),
    (e) => e instanceof OpenAI.BadRequestError && /suffix/.test(e.message),
  );
});

// The bytes of the reported tokens, in order, are the answer's text (as UTF-8).
const spell = (entries) => Buffer.from(entries.flatMap((e) => e.bytes)).toString('utf8');

test('chat logprobs: at temperature 0 the chosen token leads its alternatives, streamed or not', async () => {
  const request = {
    model: 'any', max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 3,
    messages: [{ role: 'user', content: 'Name a colour.' }],
  };
  const c = await openai().chat.completions.create(request);
  const content = c.choices[0].logprobs.content;
  assert.equal(content.length, c.usage.completion_tokens);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 3);
    assert.deepEqual(t.top_logprobs[0].bytes, t.bytes);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    assert.ok(t.logprob <= 0);
    for (let k = 1; k < 3; ++k) assert.ok(t.top_logprobs[k].logprob <= t.top_logprobs[k - 1].logprob);
  }
  assert.equal(spell(content), c.choices[0].message.content);
  const streamed = [];
  for await (const chunk of await openai().chat.completions.create({ ...request, stream: true })) {
    streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
  }
  // The same tokens; their log-probabilities equal up to float rounding: the repeated prompt
  // comes from the prefix cache, so its last token runs alone, not inside the prompt's batch.
  assert.deepEqual(streamed.map((t) => [t.token, t.top_logprobs.map((a) => a.token)]),
    content.map((t) => [t.token, t.top_logprobs.map((a) => a.token)]));
  streamed.forEach((t, i) => {
    assert.ok(Math.abs(t.logprob - content[i].logprob) < 1e-4, `${t.logprob} vs ${content[i].logprob}`);
    t.top_logprobs.forEach((a, k) => assert.ok(Math.abs(a.logprob - content[i].top_logprobs[k].logprob) < 1e-4));
  });
  // Not asked for: null, as OpenAI answers.
  const plain = await openai().chat.completions.create({ ...request, logprobs: undefined, top_logprobs: undefined });
  assert.equal(plain.choices[0].logprobs, null);
  await assert.rejects(
    openai().chat.completions.create({ ...request, logprobs: false }),
    (e) => e instanceof OpenAI.BadRequestError && /top_logprobs/.test(e.message),
  );
});

const tokenize = (content) => fetch(`${server.url}/tokenize`, {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ content }),
}).then((r) => r.json());

test('logit_bias forces and bans tokens; the frequency penalty counts what was generated', async () => {
  const request = {
    model: 'any', max_tokens: 12, temperature: 0, logprobs: true,
    messages: [{ role: 'user', content: 'Count: one two three' }],
  };
  // The answer's tokens, without the space a first token drops.
  const tokens = async (extra) => {
    const c = await openai().chat.completions.create({ ...request, ...extra });
    return c.choices[0].logprobs.content.map((t) => t.token.trim());
  };
  const a = (await tokenize('hello')).tokens[0];
  const b = (await tokenize('world')).tokens[0];
  assert.notEqual(a, b);
  // +100 on two tokens: greedy picks one of the two every time; banning either one (-100)
  // leaves the other every time.
  const both = { [String(a)]: 100, [String(b)]: 100 };
  const forced = await tokens({ logit_bias: both });
  const onlyB = await tokens({ logit_bias: { ...both, [String(a)]: -100 } });
  const onlyA = await tokens({ logit_bias: { ...both, [String(b)]: -100 } });
  for (const t of [onlyA, onlyB]) {
    assert.equal(t.length, 12);
    assert.equal(new Set(t).size, 1, t.join('|'));
  }
  assert.notEqual(onlyA[0], onlyB[0]);
  const pair = new Set([onlyA[0], onlyB[0]]);
  assert.ok(forced.every((t) => pair.has(t)), forced.join('|'));
  // A frequency penalty of 2 per use: the tiny model's logits differ by far less than 2 (its
  // log-probabilities are all near -ln(vocabulary)), so the two tokens take turns and their
  // counts never drift apart by more than one turn.
  const penalised = await tokens({ logit_bias: both, frequency_penalty: 2 });
  assert.ok(penalised.every((t) => pair.has(t)), penalised.join('|'));
  const count = (t) => penalised.filter((x) => x === t).length;
  assert.ok(Math.abs(count(onlyA[0]) - count(onlyB[0])) <= 2, penalised.join('|'));
  assert.notDeepEqual(penalised, forced);
});

const post = (path, body) => fetch(`${server.url}${path}`, {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
});

test('utility routes: tokenize, detokenize, apply-template and count_tokens agree with usage', async () => {
  const text = 'Hello, 世界! 1 2 3';
  const { tokens } = await tokenize(text);
  assert.ok(tokens.length > 3);
  const back = await post('/detokenize', { tokens }).then((r) => r.json());
  assert.equal(back.content, text);
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: text }];
  const applied = await post('/apply-template', { messages }).then((r) => r.json());
  assert.ok(applied.prompt.includes('<|user|>') && applied.prompt.includes(text), applied.prompt);
  const c = await openai().chat.completions.create({ model: 'any', max_tokens: 1, temperature: 0, messages });
  assert.equal(applied.tokens.length, c.usage.prompt_tokens);
  const counted = await anthropic().messages.countTokens({ model: 'any', system: 'Be brief.', messages: [{ role: 'user', content: text }] });
  assert.equal(counted.input_tokens, c.usage.prompt_tokens);
  // Bad bodies are 400s that name the field.
  const bad = await post('/detokenize', { tokens: ['x'] });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).error.message, /tokens/);
});

test('responses: a three-step chain with previous_response_id reuses the growing conversation', async () => {
  const client = openai();
  const first = await client.responses.create({
    model: 'any', input: 'Remember the number 7.', instructions: 'Be brief.', max_output_tokens: 6, temperature: 0,
  });
  assert.equal(first.object, 'response');
  assert.match(first.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(first.status));
  assert.equal(typeof first.output_text, 'string');  // the SDK joins the output_text parts
  // Earlier tests' prompts may share the template's first tokens (reused down to the token),
  // never this whole prompt.
  assert.ok(first.usage.input_tokens_details.cached_tokens < first.usage.input_tokens - 1);
  let prev = first;
  const cached = [];
  for (const input of ['And the number 8.', [{ role: 'user', content: [{ type: 'input_text', text: 'Which numbers?' }] }]]) {
    const next = await client.responses.create({
      model: 'any', input, instructions: 'Be brief.', previous_response_id: prev.id, max_output_tokens: 6, temperature: 0,
    });
    assert.equal(next.previous_response_id, prev.id);
    // Everything of the previous turns came from the KV cache: its prompt and its answer.
    assert.equal(next.usage.input_tokens_details.cached_tokens, prev.usage.input_tokens + prev.usage.output_tokens - 1);
    cached.push(next.usage.input_tokens_details.cached_tokens);
    prev = next;
  }
  assert.ok(cached[1] > cached[0], cached.join(' < '));
  // Stored: GET returns it, DELETE removes it, and a follow-up to a missing one is a 404.
  assert.equal((await client.responses.retrieve(first.id)).output_text, first.output_text);
  await client.responses.delete(first.id);
  await assert.rejects(client.responses.retrieve(first.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(
    client.responses.create({ model: 'any', input: 'x', previous_response_id: first.id }),
    (e) => e instanceof OpenAI.NotFoundError,
  );
});

test('responses: streamed events spell the same text as the non-streamed answer', async () => {
  const request = { model: 'any', input: 'Say hello', max_output_tokens: 8, temperature: 0, store: false };
  const whole = await openai().responses.create(request);
  const types = [];
  let text = '';
  let final;
  for await (const e of await openai().responses.create({ ...request, stream: true })) {
    types.push(e.type);
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(types.includes('response.output_text.done'));
  assert.equal(text, whole.output_text);
  assert.equal(final.output[0].content[0].text, whole.output_text);
  // store: false keeps nothing.
  await assert.rejects(openai().responses.retrieve(whole.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(
    openai().responses.create({ model: 'any', input: [{ type: 'function_call_output', call_id: 'x', output: '1' }] }),
    (e) => e instanceof OpenAI.BadRequestError && /input\[0\]\.type/.test(e.message),
  );
});
