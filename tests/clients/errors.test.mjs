// Failures the official OpenAI client (npm `openai`) must raise, not return as answers:
// `glmserve web` in front of an engine that dies after three tokens. Not streamed, the status
// is decided when the answer is known (503 with an error object: the SDK throws an APIError);
// streamed, the cut stream ends with an error event and no [DONE] (the iterator throws).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

import { GLMSERVE } from './server.mjs';

// The engine side of docs/protocol.md, just enough: health, then a generation whose
// connection drops after three tokens 200 ms apart (an engine crash mid-answer).
function dyingEngine(path) {
  const server = createServer((conn) => {
    let buf = '';
    conn.on('data', (data) => {
      buf += data;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const req = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        const send = (ev) => conn.write(`${JSON.stringify({ id: req.id, ...ev })}\n`);
        if ((req.type ?? 'generate') === 'health') {
          send({ event: 'health', status: 'ready', model: 'dying', n_ctx: 4096, protocol: 1 });
          continue;
        }
        send({ event: 'queued', position: 0 });
        send({ event: 'start', prompt_tokens: 3, cached_tokens: 0 });
        let n = 0;
        const timer = setInterval(() => {
          if (n++ < 3) return send({ event: 'token', text: 'tok ' });
          clearInterval(timer);
          conn.destroy();
        }, 200);
      }
    });
    conn.on('error', () => {});
  });
  return new Promise((resolve) => server.listen(path, () => resolve(server)));
}

let dir;
let engine;
let web;
let client;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'glm-clients-err-'));
  engine = await dyingEngine(join(dir, 'engine.sock'));
  web = spawn(GLMSERVE, ['web', '--engine', join(dir, 'engine.sock'), '--port', '0',
    '--db', join(dir, 'c.db')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve, reject) => {
    web.once('exit', (code) => reject(new Error(`glmserve web exited with ${code}`)));
    web.stdout.on('data', (d) => {
      const m = /http:\/\/127\.0\.0\.1:\d+/.exec(String(d));
      if (m) resolve(m[0]);
    });
  });
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  web?.kill('SIGTERM');
  engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

const messages = [{ role: 'user', content: 'hi' }];

test('a non-streamed answer whose engine dies is raised as a 503 APIError', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'dying', messages }), (e) => {
    assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, 503);
    assert.match(e.message, /crashed or restarted/);
    return true;
  });
});

test('a streamed answer whose engine dies throws after its tokens', async () => {
  const stream = await client.chat.completions.create({ model: 'dying', messages, stream: true });
  let text = '';
  await assert.rejects(async () => {
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  }, /crashed or restarted/);
  assert.equal(text, 'tok tok tok ');
});
