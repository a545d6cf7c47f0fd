// A reasoning model's thinking through the official clients (npm `openai`, `@anthropic-ai/sdk`):
// OpenAI's `reasoning_content` (the field vLLM, SGLang and llama-server use) and Anthropic's
// `thinking` blocks, streamed and not. The echo engine answers with the user's text, so a text
// that starts with <think> stands for a reasoning model's answer; then a random-weight GLM-4
// tiny model made to write a thinking block by a grammar shows the engine's own split; a GLM-4.5
// (glm4moe) tiny model answers without thinking when a client turns it off (OpenAI's
// chat_template_kwargs.enable_thinking, Anthropic's thinking: {type: "disabled"}).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

import { genModel, startServe } from './server.mjs';

const dir = mkdtempSync(join(tmpdir(), 'glm-reasoning-'));
const servers = {};
before(async () => {
  servers.echo = await startServe(null, ['--reasoning-format', 'think']);
  servers.glm4 = await startServe(genModel(dir, 'glm4', 'glm4.tokenizer.model'),
    ['--reasoning-format', 'think']);
  servers.glm45 = await startServe(genModel(dir, 'glm4moe', 'glm4.tokenizer.model'));
});
after(async () => {
  for (const s of Object.values(servers)) await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

const answer = '<think>先想一想: 2+2 is 4.</think>\n\nIt is 4.';
const thinking = '先想一想: 2+2 is 4.';
const openai = (s) => new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'none', maxRetries: 0 });
const anthropic = (s) => new Anthropic({ baseURL: s.url, apiKey: 'none', maxRetries: 0 });

test('openai: reasoning_content apart from the content, streamed and not', async () => {
  const client = openai(servers.echo);
  const messages = [{ role: 'user', content: answer }];
  const r = await client.chat.completions.create({ model: 'echo', messages });
  assert.equal(r.choices[0].message.reasoning_content, thinking);
  assert.equal(r.choices[0].message.content, 'It is 4.');
  const stream = await client.chat.completions.create({ model: 'echo', messages, stream: true });
  let reasoning = '';
  let content = '';
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.reasoning_content) {
      assert.equal(content, '', 'all the reasoning comes before the content');
      reasoning += d.reasoning_content;
    }
    content += d.content ?? '';
  }
  assert.equal(reasoning, thinking);
  assert.equal(content, 'It is 4.');
  // An answer without thinking has no reasoning_content.
  const plain = await client.chat.completions.create({
    model: 'echo', messages: [{ role: 'user', content: 'no <think> here' }] });
  assert.equal(plain.choices[0].message.reasoning_content, undefined);
  assert.equal(plain.choices[0].message.content, 'no <think> here');
});

test('responses: a reasoning item before the message, streamed and not', async () => {
  const client = openai(servers.echo);
  const r = await client.responses.create({ model: 'echo', input: answer, store: false });
  assert.deepEqual(r.output.map((i) => i.type), ['reasoning', 'message']);
  assert.equal(r.output[0].content[0].type, 'reasoning_text');
  assert.equal(r.output[0].content[0].text, thinking);
  assert.equal(r.output_text, 'It is 4.');
  const events = [];
  for await (const e of await client.responses.create({
    model: 'echo', input: answer, store: false, stream: true })) events.push(e);
  const reasoning = events.filter((e) => e.type === 'response.reasoning_text.delta')
    .map((e) => e.delta).join('');
  const text = events.filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta).join('');
  assert.equal(reasoning, thinking);
  assert.equal(text, 'It is 4.');
  const done = events.at(-1);
  assert.equal(done.type, 'response.completed');
  assert.deepEqual(done.response.output.map((i) => i.type), ['reasoning', 'message']);
  const added = events.filter((e) => e.type === 'response.output_item.added');
  assert.deepEqual(added.map((e) => [e.output_index, e.item.type]), [[0, 'reasoning'], [1, 'message']]);
  const seq = events.map((e) => e.sequence_number);
  assert.deepEqual(seq, [...seq].sort((a, b) => a - b));
});

test('anthropic: a thinking block before the text, streamed and not', async () => {
  const client = anthropic(servers.echo);
  const params = { model: 'echo', max_tokens: 256, messages: [{ role: 'user', content: answer }] };
  const m = await client.messages.create(params);
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
  assert.equal(m.content[0].thinking, thinking);
  assert.equal(m.content[1].text, 'It is 4.');
  const stream = client.messages.stream(params);
  const deltas = [];
  stream.on('thinking', (delta) => deltas.push(delta));
  const final = await stream.finalMessage();
  assert.deepEqual(final.content.map((b) => b.type), ['thinking', 'text']);
  assert.equal(final.content[0].thinking, thinking);
  assert.equal(final.content[1].text, 'It is 4.');
  assert.equal(deltas.join(''), thinking);
});

test('the engine splits a real model\'s thinking from its answer', async () => {
  const client = openai(servers.glm4);
  const body = {
    model: 'glm4',
    messages: [{ role: 'user', content: '2+2?' }],
    max_tokens: 64,
    temperature: 0,
    grammar: 'root ::= "<think>" w " " w "</think>" "\\n" w "."\nw ::= [a-z] [a-z]? [a-z]?',
  };
  const r = await client.chat.completions.create(body);
  const m = r.choices[0].message;
  assert.match(m.reasoning_content, /^[a-z]{1,3} [a-z]{1,3}$/);
  assert.match(m.content, /^[a-z]{1,3}\.$/);
  let reasoning = '';
  let content = '';
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
    content += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(reasoning, m.reasoning_content);
  assert.equal(content, m.content);
});

test('GLM-4.5 without thinking: chat_template_kwargs and Anthropic\'s thinking disabled', async () => {
  const s = servers.glm45;
  const messages = [{ role: 'user', content: '2+2?' }];
  const prompt = async (extra) => (await (await fetch(`${s.url}/apply-template`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, ...extra }),
  })).json());
  const on = await prompt({});
  const off = await prompt({ chat_template_kwargs: { enable_thinking: false } });
  // GLM-4.5's template (its chat_template.jinja): /nothink after the user turn, and the answer
  // opened with an empty thinking block.
  assert.ok(on.prompt.endsWith('2+2?<|assistant|>'), on.prompt);
  assert.ok(off.prompt.endsWith('2+2?/nothink<|assistant|>\n<think></think>'), off.prompt);
  const r = await openai(s).chat.completions.create({
    model: 'glm45', messages, max_tokens: 1, chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(r.usage.prompt_tokens, off.tokens.length);
  const plain = await openai(s).chat.completions.create({ model: 'glm45', messages, max_tokens: 1 });
  assert.equal(plain.usage.prompt_tokens, on.tokens.length);
  const a = await anthropic(s).messages.create({
    model: 'glm45', messages, max_tokens: 1, thinking: { type: 'disabled' },
  });
  // (input_tokens: those not read from the cache, as Anthropic splits the prompt.)
  assert.equal(a.usage.input_tokens + a.usage.cache_read_input_tokens, off.tokens.length);
});
