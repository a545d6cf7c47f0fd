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
  assert.ok(next.usage.input_tokens > m.usage.input_tokens);
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
