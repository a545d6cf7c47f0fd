// A scripted engine for the browser tests: speaks the engine protocol v1 (docs/protocol.md) on a
// Unix socket and answers by keywords in the last message (like src/gateway/fake_engine.h):
//   [slow]   300 words, 30 ms apart (stop tests)    [xss]  <script> and <img onerror> in markdown
//   [reload] 100 words, 30 ms apart (re-attach after a reload)
//   [fail]   20 words, an engine error after the 5th (unless resumed: continue tests)
//   [math]   TeX: inline $...$, a $$...$$ block, and dollar amounts that are not math
//   [load-next] after the answer, 1.5 s of "loading" (health with progress; generates refused)
//   [reading] progress events (a prompt read in 5 chunks, 150 ms apart) before the answer
//   [long]   40 words, 5 ms apart; every answer ends with "length" at params.max_tokens pieces
// tokenize: one id a word, from 0; a generate with `resume` goes on after that many pieces.
//   [zh]     Chinese text                           [md]   markdown with a code block
//   [trim]   a "history trimmed" notice first       else   "Echo: <message>"
//   [tool]   with tools: a call of the first one as GLM-4 writes it ("NAME\n{json}")
//   [think]  a reasoning model's answer: token events with `reasoning` first, then the text
// The first token comes FAKE_TTFT_MS (default 20) after the request line; the done event
// reports the TTFT the engine measured itself, as the real engine does.
// Every request and every cancel is appended as a JSON line to the log file (argv[3]).
//   node fake_engine.mjs SOCKET LOG
import { appendFileSync, unlinkSync } from 'node:fs';
import net from 'node:net';

const [socketPath, logPath] = process.argv.slice(2);
const ttftMs = Number(process.env.FAKE_TTFT_MS || 20);
const log = (obj) => logPath && appendFileSync(logPath, `${JSON.stringify(obj)}\n`);
const flags = new Map(); // id -> {cancelled}

// The pieces of an answer read for a call as the engine reads GLM-4's: a call's first line is its
// name, the rest its arguments; anything else is content.
function toolReader(isCall) {
  let held = '';
  let named = false;
  return {
    feed(text) {
      if (!isCall) return [['content', text]];
      if (named) return [['args', text]];
      held += text;
      const nl = held.indexOf('\n');
      if (nl < 0) return [];
      named = true;
      const out = [['call', held.slice(0, nl)]];
      if (held.length > nl + 1) out.push(['args', held.slice(nl + 1)]);
      return out;
    },
  };
}

function script(text, tools) {
  if (text.includes('[tool]') && tools.length) {
    const call = `${tools[0].name}\n{"city": "Paris", "unit": "celsius"}`;
    return { delay: 5, pieces: call.match(/[\s\S]{1,5}/gu) };
  }
  if (text.includes('[think]')) {
    return { delay: 10, pieces: [{ reasoning: 'Let me ' }, { reasoning: 'think: 2+2.' }, 'It is ', '4.'] };
  }
  if (text.includes('[slow]') || text.includes('[reload]')) {
    const n = text.includes('[slow]') ? 300 : 100;
    return { delay: 30, pieces: Array.from({ length: n }, (_, i) => `word${i} `) };
  }
  if (text.includes('[xss]')) {
    return {
      delay: 5,
      pieces: ['Here: ', '<script>window.__pwned = 1</script>', '\n\n', 'and ',
        '<img src=x onerror="window.__pwned = 2">', ' and [link](javascript:window.__pwned=3)', ' done.'],
    };
  }
  if (text.includes('[fail]')) {
    return { delay: 10, failAt: 5, pieces: Array.from({ length: 20 }, (_, i) => `word${i} `) };
  }
  if (text.includes('[math]')) {
    const tex = 'Euler: $e^{i\\pi}+1=0$, and costs $5 or $6.\n\n$$\\int_0^1 x\\,dx = \\frac{1}{2}$$\n\nDone.';
    return { delay: 5, pieces: tex.match(/[\s\S]{1,6}/gu) };
  }
  if (text.includes('[long]')) return { delay: 5, pieces: Array.from({ length: 40 }, (_, i) => `w${i} `) };
  if (text.includes('[zh]')) return { delay: 10, pieces: ['你好', '，', '世界', '！'] };
  if (text.includes('[md]')) {
    const md = '## 示例 Example\n\nA list:\n\n- **bold** item\n- `inline code`\n\n```python\n' +
      'def fib(n):\n    """Fibonacci."""\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n```\n\n' +
      '| a | b |\n|---|---|\n| 1 | 2 |\n\nDone. 完成。';
    return { delay: 8, pieces: md.match(/[\s\S]{1,6}/gu) };
  }
  const echo = `Echo: ${text}`;
  return { delay: 10, pieces: Array.from(echo.matchAll(/[\s\S]{1,4}/gu), (m) => m[0]) };
}

// [load-next]: after this answer the "model" loads again for LOAD_MS (health says loading,
// with progress; generate requests are refused as unavailable meanwhile, as the real engine's).
const LOAD_MS = 1500;
let loadingUntil = 0;
const loading = () => Date.now() < loadingUntil;

function generate(conn, req) {
  if (loading()) {
    log({ kind: 'refused', id: req.id });
    conn.write(`${JSON.stringify({ id: req.id, event: 'error', code: 'unavailable', message: 'the model is still loading; retry when health says ready', retry_after_ms: 1000 })}\n`);
    return;
  }
  const t0 = performance.now();
  const flag = { cancelled: false };
  flags.set(req.id, flag);
  const send = (ev) => !conn.destroyed && conn.write(`${JSON.stringify({ id: req.id, ...ev })}\n`);
  const msgs = req.messages || [];
  const last = msgs.length ? msgs[msgs.length - 1].content : req.prompt || '';
  const resume = req.resume || [];
  if (last.includes('[load-next]')) setTimeout(() => { loadingUntil = Date.now() + LOAD_MS; }, 200);
  log({ kind: 'request', id: req.id, conversation: req.conversation || '', messages: msgs,
    params: req.params || {}, resume: resume.length, tools: req.tools || null });
  send({ event: 'queued', position: 0 });
  send({ event: 'start', prompt_tokens: 8 * msgs.length, cached_tokens: 0 });
  if (last.includes('[trim]')) {
    send({ event: 'notice', message: 'history trimmed to fit the context: dropped the 2 oldest messages', dropped_messages: 2 });
  }
  const tools = typeof req.tools === 'string' ? JSON.parse(req.tools) : req.tools || [];
  const { delay, pieces, failAt } = script(last, tools);
  // [reading]: a long prompt read in five chunks, 150 ms each, before the first token.
  const chunks = last.includes('[reading]') ? 5 : 0;
  for (let c = 1; c < chunks; c++) {
    setTimeout(() => send({ event: 'progress', prefilled: 64 * c, to_prefill: 320 }), 150 * c);
  }
  let i = Math.min(resume.length, pieces.length);
  // With tools the engine sends its reading of the answer (docs/protocol.md, `tool`): here the
  // [tool] call's name line and JSON arguments, or plain content.
  const reader = toolReader(last.includes('[tool]'));
  for (let k = 0; k < i; k++) if (typeof pieces[k] === 'string') reader.feed(pieces[k]);
  let ttft = -1;
  const finish = (reason) => {
    const total = performance.now() - t0;
    flags.delete(req.id);
    if (reason === 'cancelled') log({ kind: 'cancel', id: req.id, after_tokens: i });
    send({
      event: 'done', finish_reason: reason,
      usage: { prompt_tokens: 8 * msgs.length, cached_tokens: 0, completion_tokens: i, total_tokens: 8 * msgs.length + i },
      timings: { queue_ms: 0.05, prefill_ms: ttft < 0 ? total : ttft, ttft_ms: ttft < 0 ? total : ttft,
        tpot_ms: i > 1 ? (total - ttft) / (i - 1) : 0, total_ms: total },
    });
  };
  const step = () => {
    if (flag.cancelled) return finish('cancelled');
    if (i >= pieces.length) return finish('stop');
    // max_tokens counts the resumed pieces too (the gateway gives a continuation its own room).
    if (req.params?.max_tokens && i >= req.params.max_tokens) return finish('length');
    if (i === failAt && !resume.length) {
      flags.delete(req.id);
      send({ event: 'error', code: 'internal', message: 'the fake engine failed mid-answer' });
      return undefined;
    }
    const piece = pieces[i];
    const ev = typeof piece === 'string' ? { event: 'token', text: piece }
      : { event: 'token', text: '', reasoning: piece.reasoning };
    if (tools.length && typeof piece === 'string') ev.tool = reader.feed(piece);
    send(ev);
    if (ttft < 0) ttft = performance.now() - t0;
    i++;
    setTimeout(step, delay);
  };
  setTimeout(step, ttftMs + 150 * chunks);
}

const server = net.createServer((conn) => {
  let buf = '';
  const mine = new Set();
  conn.setEncoding('utf8');
  conn.on('data', (data) => {
    buf += data;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      let req;
      try {
        req = JSON.parse(line);
      } catch {
        conn.write(`${JSON.stringify({ id: null, event: 'error', code: 'invalid_argument', message: 'not JSON' })}\n`);
        continue;
      }
      const type = req.type || 'generate';
      if (type === 'health') {
        const h = { id: req.id, event: 'health', status: 'ready', model: 'fake-glm', n_ctx: 4096, protocol: 1, device: 'vulkan:0 (Fake GPU)' };
        if (loading()) {
          // A model being loaded: health says so with the bytes read so far.
          const total = 4 << 20;
          const done = Math.min(total - 1, Math.floor(total * (1 - (loadingUntil - Date.now()) / LOAD_MS)));
          Object.assign(h, { status: 'loading', load: { done_bytes: done, total_bytes: total } });
        }
        conn.write(`${JSON.stringify(h)}\n`);
      } else if (type === 'tokenize') {
        const tokens = (req.text || '').split(/\s+/).filter(Boolean).map((_, k) => k);
        conn.write(`${JSON.stringify({ id: req.id, event: 'tokens', tokens })}\n`);
      } else if (type === 'cancel') {
        const f = flags.get(req.id);
        if (f) f.cancelled = true;
        conn.write(`${JSON.stringify({ id: req.id, event: 'cancel', found: !!f })}\n`);
      } else if (type === 'generate') {
        mine.add(req.id);
        generate(conn, req);
      }
    }
  });
  // A closed connection cancels what it started (as the real engine does).
  conn.on('close', () => {
    for (const id of mine) {
      const f = flags.get(id);
      if (f) f.cancelled = true;
    }
  });
  conn.on('error', () => {});
});

try {
  unlinkSync(socketPath);
} catch {
  // not there
}
server.listen(socketPath, () => console.log(`fake engine on ${socketPath}`));
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
