// The README's first-use examples, run as written (only the address changed to the test
// server's): curl (its plain `-d`, which says the body is a form, and a streamed request), the
// official `openai` and `@anthropic-ai/sdk` Node clients. Each block follows a
// `<!-- example: NAME -->` line in README.md; a missing block fails the test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { genModel, startServe } from './server.mjs';

const README = new URL('../../README.md', import.meta.url).pathname;
const HERE = new URL('.', import.meta.url).pathname;  // node_modules of the clients are here

// The fenced block after `<!-- example: NAME -->`, its indentation removed.
function example(name) {
  const lines = readFileSync(README, 'utf8').split('\n');
  const at = lines.findIndex((l) => l.trim() === `<!-- example: ${name} -->`);
  assert.ok(at >= 0, `README.md has no example '${name}'`);
  const open = lines.findIndex((l, i) => i > at && l.trim().startsWith('```'));
  const indent = lines[open].indexOf('```');
  const close = lines.findIndex((l, i) => i > open && l.trim() === '```');
  assert.ok(open > at && close > open, `example '${name}' is not a fenced block`);
  return lines.slice(open + 1, close).map((l) => l.slice(indent)).join('\n');
}

const dir = mkdtempSync(join(tmpdir(), 'glm-examples-'));
let server;
before(async () => {
  server = await startServe(genModel(dir, 'chatglm3', 'chatglm3.tokenizer.model'));
});
after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const local = (code) => code.replaceAll('http://127.0.0.1:8080', server.url);

test('README curl example: a plain -d body is answered', () => {
  const out = execFileSync('sh', ['-c', `${local(example('curl'))} --fail-with-body -sS`], { encoding: 'utf8' });
  const r = JSON.parse(out);
  assert.equal(r.object, 'chat.completion');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
});

test('README curl streaming example: SSE chunks and [DONE]', () => {
  const out = execFileSync('sh', ['-c', `${local(example('curl-stream'))} --fail-with-body -sS`], { encoding: 'utf8' });
  assert.match(out, /^data: \{.*"chat\.completion\.chunk"/m);
  assert.match(out, /^data: \[DONE\]$/m);
});

for (const name of ['openai-node', 'anthropic-node']) {
  test(`README ${name} example runs with the official client`, () => {
    const file = join(HERE, `.example-${name}.mjs`);
    writeFileSync(file, local(example(name)));
    try {
      const out = execFileSync(process.execPath, [file], { encoding: 'utf8' });
      assert.notEqual(out.trim(), 'undefined', 'the example printed no text');
    } finally {
      rmSync(file, { force: true });
    }
  });
}
