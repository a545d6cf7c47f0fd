// Tool calls and structured output through the official OpenAI client (npm `openai`) against
// `glmserve serve` on random-weight ChatGLM3 and GLM-4 tiny models with their real vocabularies.
// Whatever the weights, a forced call names an allowed function and its arguments validate
// against the function's schema (checked with ajv, a JSON Schema validator we did not write);
// a streamed call reassembles to the non-streamed one at temperature 0; json_schema and
// json_object answers validate; the history takes tool calls and their results back. The echo
// engine, answering with the user's text, stands for a GLM-4.5 answer with several calls.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';

import { genModel, startServe } from './server.mjs';

const weather = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    days: { type: 'integer', minimum: 1, maximum: 7 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    hourly: { type: 'boolean' },
  },
  required: ['city', 'days', 'unit'],
  additionalProperties: false,
};
const clock = {
  type: 'object',
  properties: { zone: { type: 'string', maxLength: 6 } },
  required: ['zone'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: '查询天气', parameters: weather } },
  { type: 'function', function: { name: 'get_time', description: 'the time in a zone', parameters: clock } },
];
const ajv = new Ajv({ strict: true });
const validators = { get_weather: ajv.compile(weather), get_time: ajv.compile(clock) };

const dir = mkdtempSync(join(tmpdir(), 'glm-tools-'));
const servers = {};
before(async () => {
  servers.chatglm3 = await startServe(genModel(dir, 'chatglm3', 'chatglm3.tokenizer.model'));
  servers.glm4 = await startServe(genModel(dir, 'glm4', 'glm4.tokenizer.model'));
  servers.echo = await startServe(null);  // answers with the user's text: a scripted answer
});
after(async () => {
  for (const s of Object.values(servers)) await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

const client = (arch) => new OpenAI({ baseURL: `${servers[arch].url}/v1`, apiKey: 'unused', maxRetries: 0 });
const messages = [{ role: 'user', content: '北京今天天气怎么样？' }];

function checkCall(call, allowed) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  assert.ok(allowed.includes(call.function.name), `unexpected function ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  const validate = validators[call.function.name];
  assert.ok(validate(args), `${call.function.arguments}: ${ajv.errorsText(validate.errors)}`);
  return args;
}

// Joins the SDK's streamed chunks into one message, as a client does.
async function collect(stream) {
  const out = { content: '', calls: [], finish: null };
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.content) out.content += choice.delta.content;
    for (const d of choice.delta.tool_calls ?? []) {
      out.calls[d.index] ??= { id: '', type: '', function: { name: '', arguments: '' } };
      const c = out.calls[d.index];
      if (d.id) c.id = d.id;
      if (d.type) c.type = d.type;
      if (d.function?.name) c.function.name += d.function.name;
      if (d.function?.arguments) c.function.arguments += d.function.arguments;
    }
    if (choice.finish_reason) out.finish = choice.finish_reason;
  }
  return out;
}

for (const arch of ['chatglm3', 'glm4']) {
  test(`${arch}: a named tool_choice is a call to that function with valid arguments`, async () => {
    for (const [temperature, seed] of [[0, 1], [1, 1], [1, 2]]) {
      const r = await client(arch).chat.completions.create({
        model: 'any', messages, tools, temperature, seed, max_tokens: 200,
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
      });
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
      assert.equal(choice.message.tool_calls.length, 1);
      checkCall(choice.message.tool_calls[0], ['get_weather']);
    }
  });

  test(`${arch}: required, streamed, reassembles to the non-streamed call at temperature 0`, async () => {
    const request = { model: 'any', messages, tools, tool_choice: 'required', temperature: 0, max_tokens: 200 };
    const whole = await client(arch).chat.completions.create(request);
    assert.equal(whole.choices[0].finish_reason, 'tool_calls');
    const call = whole.choices[0].message.tool_calls[0];
    checkCall(call, ['get_weather', 'get_time']);
    const streamed = await collect(await client(arch).chat.completions.create({ ...request, stream: true }));
    assert.equal(streamed.finish, 'tool_calls');
    assert.equal(streamed.content, '');
    assert.equal(streamed.calls.length, 1);
    checkCall(streamed.calls[0], ['get_weather', 'get_time']);
    assert.equal(streamed.calls[0].function.name, call.function.name);
    assert.equal(streamed.calls[0].function.arguments, call.function.arguments);
  });

  // A forced call cut by max_tokens (the name line and a few tokens of arguments fit) is no
  // call on every route, streamed or not: the length reason and nothing of the model's syntax.
  test(`${arch}: a call cut by max_tokens is no call, streamed or not (openai and anthropic)`, async () => {
    const request = { model: 'any', messages, tools, tool_choice: 'required', temperature: 0, max_tokens: 6 };
    const whole = await client(arch).chat.completions.create(request);
    assert.equal(whole.choices[0].finish_reason, 'length', JSON.stringify(whole.choices[0]));
    assert.equal(whole.choices[0].message.tool_calls, undefined, JSON.stringify(whole.choices[0]));
    assert.ok(!whole.choices[0].message.content, JSON.stringify(whole.choices[0]));
    const streamed = await collect(await client(arch).chat.completions.create({ ...request, stream: true }));
    assert.equal(streamed.finish, 'length');
    assert.deepEqual(streamed.calls, []);
    assert.equal(streamed.content, '');

    const anthropic = new Anthropic({ baseURL: servers[arch].url, apiKey: 'unused', maxRetries: 0 });
    const areq = {
      model: 'any', max_tokens: 6, temperature: 0, messages,
      tools: tools.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters })),
      tool_choice: { type: 'any' },
    };
    const m = await anthropic.messages.create(areq);
    assert.equal(m.stop_reason, 'max_tokens');
    assert.deepEqual(m.content.filter((b) => b.type === 'tool_use'), [], JSON.stringify(m.content));
    const final = await anthropic.messages.stream(areq).finalMessage();
    assert.equal(final.stop_reason, 'max_tokens');
    assert.deepEqual(final.content.filter((b) => b.type === 'tool_use'), [], JSON.stringify(final.content));
    // With room, the same requests are whole calls (so the cut above is the limit's doing).
    const room = await anthropic.messages.create({ ...areq, max_tokens: 200 });
    assert.equal(room.stop_reason, 'tool_use');
    checkCall({ type: 'function', id: 'call_x', function: { name: room.content.at(-1).name, arguments: JSON.stringify(room.content.at(-1).input) } },
      ['get_weather', 'get_time']);
  });

  test(`${arch}: json_schema and json_object answers validate`, async () => {
    const validate = ajv.compile(weather);
    const r = await client(arch).chat.completions.create({
      model: 'any', messages, temperature: 1, seed: 3, max_tokens: 200,
      response_format: { type: 'json_schema', json_schema: { name: 'w', strict: true, schema: weather } },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(validate(v), `${r.choices[0].message.content}: ${ajv.errorsText(validate.errors)}`);
    const o = await client(arch).chat.completions.create({
      model: 'any', messages, temperature: 0, max_tokens: 120, response_format: { type: 'json_object' },
    });
    // The object may be cut by max_tokens on random weights; a complete one parses.
    if (o.choices[0].finish_reason === 'stop') {
      const obj = JSON.parse(o.choices[0].message.content);
      assert.equal(typeof obj, 'object');
      assert.ok(obj !== null && !Array.isArray(obj));
    } else {
      assert.equal(o.choices[0].finish_reason, 'length');
      assert.ok(o.choices[0].message.content.trimStart().startsWith('{'));
    }
  });

  test(`${arch}: a tool call and its result go back into the conversation`, async () => {
    const first = await client(arch).chat.completions.create({
      model: 'any', messages, tools, tool_choice: 'required', temperature: 0, max_tokens: 200,
    });
    const call = first.choices[0].message.tool_calls[0];
    const next = await client(arch).chat.completions.create({
      model: 'any', tools, temperature: 0, max_tokens: 8,
      messages: [...messages, first.choices[0].message,
        { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' }],
    });
    assert.ok(['stop', 'length', 'tool_calls'].includes(next.choices[0].finish_reason));
    assert.ok(next.usage.prompt_tokens > first.usage.prompt_tokens);
  });

  test(`${arch}: bad tools are a 400 the SDK raises, naming the part`, async () => {
    await assert.rejects(
      client(arch).chat.completions.create({
        model: 'any', messages,
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { t: { type: 'string', pattern: 'x' } } } } }],
      }),
      (e) => e instanceof OpenAI.BadRequestError && /tools\[0\]\.function\.parameters #\/properties\/t/.test(e.message),
    );
    await assert.rejects(
      client(arch).chat.completions.create({
        model: 'any', messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } },
      }),
      (e) => e instanceof OpenAI.BadRequestError && /nope/.test(e.message),
    );
  });
}

// GLM-4.5 writes its calls one after another: every call reaches the clients (OpenAI's
// tool_calls[i], Anthropic's tool_use blocks), each with its own id, the values typed by the
// function's schema (the city "123" stays a string, days 3 is a number), streamed as not;
// parallel_tool_calls false (disable_parallel_tool_use) keeps the first; the calls and their
// results go back in the history.
test('GLM-4.5: several calls in one answer, typed by the schemas (openai and anthropic)', async () => {
  const answer = 'Let me check both.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n' +
    '<arg_value>123</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n' +
    '<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call>\n' +
    '<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>';
  const openai = new OpenAI({ baseURL: `${servers.echo.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const request = { model: 'echo', messages: [{ role: 'user', content: answer }], tools };
  const whole = await openai.chat.completions.create(request);
  const choice = whole.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, 'Let me check both.');
  const calls = choice.message.tool_calls;
  assert.equal(calls.length, 2, JSON.stringify(calls));
  assert.deepEqual(checkCall(calls[0], ['get_weather']), { city: '123', days: 3, unit: 'celsius' });
  assert.deepEqual(checkCall(calls[1], ['get_time']), { zone: 'UTC' });
  assert.notEqual(calls[0].id, calls[1].id);
  const streamed = await collect(await openai.chat.completions.create({ ...request, stream: true }));
  assert.equal(streamed.finish, 'tool_calls');
  assert.equal(streamed.content, 'Let me check both.');
  // Ids are per request (call_<request>, call_<request>_1): the rest is equal.
  const fns = (cs) => cs.map((c) => [c.type, c.function.name, c.function.arguments]);
  assert.deepEqual(fns(streamed.calls), fns(calls));
  assert.match(streamed.calls[1].id, new RegExp(`^${streamed.calls[0].id}_1$`));
  const one = await openai.chat.completions.create({ ...request, parallel_tool_calls: false });
  assert.deepEqual(fns(one.choices[0].message.tool_calls), fns([calls[0]]));

  const anthropic = new Anthropic({ baseURL: servers.echo.url, apiKey: 'unused', maxRetries: 0 });
  const areq = {
    model: 'echo', max_tokens: 1000, messages: request.messages,
    tools: tools.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters })),
  };
  const m = await anthropic.messages.create(areq);
  assert.equal(m.stop_reason, 'tool_use');
  assert.deepEqual(m.content.map((b) => b.type), ['text', 'tool_use', 'tool_use']);
  assert.equal(m.content[0].text, 'Let me check both.');
  assert.deepEqual(m.content[1].input, { city: '123', days: 3, unit: 'celsius' });
  assert.deepEqual([m.content[2].name, m.content[2].input], ['get_time', { zone: 'UTC' }]);
  assert.notEqual(m.content[1].id, m.content[2].id);
  const noIds = (blocks) => blocks.map(({ id, ...rest }) => rest);
  const final = await anthropic.messages.stream(areq).finalMessage();
  assert.deepEqual(noIds(final.content), noIds(m.content));
  assert.notEqual(final.content[1].id, final.content[2].id);
  const first = await anthropic.messages.create({ ...areq, tool_choice: { type: 'auto', disable_parallel_tool_use: true } });
  assert.deepEqual(noIds(first.content.slice(1)), noIds([m.content[1]]));

  // Both calls and both results back: the server takes the history (the echo answers with the
  // last result, which is no call).
  const next = await openai.chat.completions.create({
    model: 'echo', tools,
    messages: [...request.messages, choice.message,
      { role: 'tool', tool_call_id: calls[0].id, content: '{"temperature": 21}' },
      { role: 'tool', tool_call_id: calls[1].id, content: '12:00' }],
  });
  assert.equal(next.choices[0].finish_reason, 'stop');
  assert.equal(next.choices[0].message.content, '12:00');
  const after = await anthropic.messages.create({
    ...areq,
    messages: [...areq.messages, { role: 'assistant', content: m.content },
      { role: 'user', content: [
        { type: 'tool_result', tool_use_id: m.content[1].id, content: 'sunny' },
        { type: 'tool_result', tool_use_id: m.content[2].id, content: 'noon' }] }],
  });
  assert.equal(after.stop_reason, 'end_turn');
});
