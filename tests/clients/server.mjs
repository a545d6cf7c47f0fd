// Starts `glmserve serve` on a model for the client tests: a free loopback port, its own socket
// directory and database, ready when /health says so; stop() ends it (SIGTERM) and cleans up.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const GLMSERVE = process.env.GLMSERVE ?? new URL('../../build/glmserve', import.meta.url).pathname;
export const SHARED = process.env.GLM_SHARED ?? new URL('../../../shared', import.meta.url).pathname;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A random-weight tiny model with a real vocabulary (../shared/data/tokenizers).
export function genModel(dir, arch, tokenizer) {
  const out = join(dir, `${arch}-tiny.gguf`);
  execFileSync(GLMSERVE, ['gen-model', '--arch', arch, '--preset', 'tiny', '--vocab',
    join(SHARED, 'data/tokenizers', tokenizer), '-o', out], { stdio: 'ignore' });
  return out;
}

// Until /health says the engine is ready: true; false once `ms` have passed or `gaveUp()` holds.
async function untilReady(url, ms, gaveUp = () => false) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const r = await fetch(`${url}/health`);
      if (r.status === 200 && (await r.json()).status === 'ready') return true;
    } catch { /* not listening yet, or its engine restarting */ }
    if (Date.now() > deadline || gaveUp()) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

// `model` null: the model-free echo engine (`--echo`: it answers with the last message).
export async function startServe(model, extra = []) {
  const dir = mkdtempSync(join(tmpdir(), 'glm-clients-'));
  const port = await freePort();
  const log = join(dir, 'serve.log');
  const child = spawn('/bin/sh', ['-c', `exec "$0" "$@" >"${log}" 2>&1`, GLMSERVE, 'serve',
    ...(model === null ? ['--echo'] : ['--model', model]), '--port', String(port), '--threads', '1', '--ctx-size', '1024', '--db', join(dir, 'c.db'), ...extra],
    { env: { ...process.env, XDG_RUNTIME_DIR: dir, XDG_DATA_HOME: dir }, stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  if (!(await untilReady(url, 60_000, () => child.exitCode !== null))) {
    child.kill('SIGKILL');
    throw new Error(`glmserve serve did not get ready:\n${readFileSync(log, 'utf8')}`);
  }
  return {
    url,
    pid: child.pid, // glmserve serve itself (the shell execs it)
    // After a kill of its engine: until serve's next one is ready (30 s at most; false then).
    ready: (ms = 30_000) => untilReady(url, ms),
    // A counter's value from /metrics (it must be exported).
    async counter(name) {
      const text = await (await fetch(`${url}/metrics`)).text();
      const m = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
      assert.ok(m, `${name} is exported by /metrics`);
      return Number(m[1]);
    },
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
