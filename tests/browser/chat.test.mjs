// Browser tests of the chat page (node --test): streaming, stop, reload (mid-answer too: the
// page re-attaches), edit and resend, regenerate, safe rendering of hostile model output,
// language and theme.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { api, engineLog, newPage, openBrowser, send, waitDone } from './harness.mjs';

let browser;
before(async () => {
  browser = await openBrowser();
});
after(async () => {
  await browser?.close();
});

test('a message streams into the page and is stored', async () => {
  const page = await newPage(browser);
  const answer = await send(page, 'hello there [slow]');
  // While streaming: text is already visible, and the answer is still open.
  await answer.locator('.bubble', { hasText: 'word3' }).waitFor();
  assert.equal(await answer.getAttribute('class'), 'msg assistant streaming');
  const early = (await answer.locator('.bubble').textContent()).length;
  await answer.locator('.bubble', { hasText: 'word12' }).waitFor();
  const later = (await answer.locator('.bubble').textContent()).length;
  assert.ok(later > early, `the answer grew while streaming (${early} -> ${later} chars)`);
  await page.keyboard.press('Escape'); // Esc stops
  await waitDone(answer);
  assert.equal(await answer.getAttribute('data-status'), 'stopped');
  const first = Number(await answer.getAttribute('data-first-char-ms'));
  assert.ok(first > 0, 'first character time recorded');
  // The user's message and the conversation exist on the server.
  const id = new URL(page.url()).hash.slice(1);
  const conv = await api(`/api/conversations/${id}`);
  assert.equal(conv.messages[0].content, 'hello there [slow]');
  assert.equal(conv.title, 'hello there [slow]');
  await page.context().close();
});

test('stop mid-stream frees the engine, and a reload shows the partial answer', async () => {
  const page = await newPage(browser);
  const answer = await send(page, 'tell me a long story [slow]');
  await answer.locator('.bubble', { hasText: 'word5' }).waitFor();
  await page.click('#stop');
  await waitDone(answer);
  assert.equal(await answer.getAttribute('data-status'), 'stopped');
  assert.ok(await answer.locator('.badge.stopped').isVisible());
  assert.ok(await page.locator('#send').isVisible(), 'send button back');
  const partial = await answer.locator('.bubble').textContent();
  assert.ok(partial.includes('word5') && !partial.includes('word299'), 'a partial answer');
  // The engine saw the cancel for this request.
  const reqs = engineLog().filter((e) => e.kind === 'request');
  const last = reqs[reqs.length - 1];
  assert.ok(engineLog().some((e) => e.kind === 'cancel' && e.id === last.id), 'engine got the cancel');
  // Reload: the conversation is listed and reopens with its partial answer, marked stopped.
  const id = new URL(page.url()).hash.slice(1);
  await page.reload();
  await page.locator(`.conv[data-id="${id}"]`).waitFor();
  const stored = page.locator('.msg.assistant').last();
  await stored.waitFor();
  assert.equal(await stored.getAttribute('data-status'), 'stopped');
  const storedText = await stored.locator('.bubble').textContent();
  assert.ok(storedText.startsWith('word0 word1 word2'), storedText.slice(0, 40));
  assert.ok(storedText.length >= partial.length - 10, 'the stored answer has what was shown');
  // And from a fresh browser context too (nothing kept in the page).
  const fresh = await newPage(browser);
  await fresh.click(`.conv[data-id="${id}"] .title`);
  await fresh.locator('.msg.assistant[data-status="stopped"]').waitFor();
  await page.context().close();
  await fresh.context().close();
});

test('a reload mid-answer re-attaches: the answer keeps streaming and is stored complete', async () => {
  const page = await newPage(browser);
  const answer = await send(page, 'a long answer [reload]');
  await answer.locator('.bubble', { hasText: 'word5' }).waitFor();
  const id = new URL(page.url()).hash.slice(1);
  await page.reload();
  // The reloaded page shows what it missed, and the answer is still coming.
  const live = page.locator('.msg.assistant').last();
  await live.locator('.bubble', { hasText: 'word0 word1 word2 word3 word4 word5' }).waitFor();
  assert.equal(await live.getAttribute('class'), 'msg assistant streaming');
  assert.ok(await page.locator('#stop').isVisible(), 'the stop button is back');
  const early = (await live.locator('.bubble').textContent()).length;
  await live.locator('.bubble', { hasText: 'word60' }).waitFor();
  assert.ok((await live.locator('.bubble').textContent()).length > early, 'it grew after the reload');
  await waitDone(live);
  assert.equal(await live.getAttribute('data-status'), 'complete');
  const want = Array.from({ length: 100 }, (_, i) => `word${i}`).join(' ');
  assert.equal((await live.locator('.bubble').textContent()).trim(), want);
  const attachMs = Number(await live.getAttribute('data-attach-ms'));
  const sentMs = Number(await live.getAttribute('data-attach-sent-ms'));
  assert.ok(attachMs > sentMs && sentMs > 0, 'the re-attached view timed its first text');
  console.log(`# reload -> first missed text on the page: ${attachMs.toFixed(0)} ms after ` +
    `navigation start, ${(attachMs - sentMs).toFixed(1)} ms after the page asked for it`);
  // Stored complete, and the engine never saw a cancel for it: the reload cost nothing.
  const conv = await api(`/api/conversations/${id}`);
  assert.equal(conv.messages[1].status, 'complete');
  assert.equal(conv.messages[1].content.trim(), want);
  assert.equal(conv.live, undefined);
  const req = engineLog().filter((e) => e.kind === 'request').pop();
  assert.ok(!engineLog().some((e) => e.kind === 'cancel' && e.id === req.id), 'not cancelled');
  await page.context().close();
});

test('an answer cut mid-way offers continue, which finishes it in its place', async () => {
  const page = await newPage(browser);
  const answer = await send(page, 'fail midway [fail]');
  await waitDone(answer);
  assert.equal(await answer.getAttribute('data-status'), 'error');
  const partial = (await answer.locator('.bubble').textContent()).trim();
  assert.equal(partial, 'word0 word1 word2 word3 word4');
  const cont = answer.locator('[data-act=continue]');
  assert.ok(await cont.isVisible(), 'continue offered');
  await cont.click();
  const done = page.locator('.msg.assistant[data-status="complete"]');
  await done.waitFor();
  assert.equal(await page.locator('.msg.assistant').count(), 1, 'the same answer, not a new one');
  const want = Array.from({ length: 20 }, (_, i) => `word${i}`).join(' ');
  assert.equal((await done.locator('.bubble').textContent()).trim(), want);
  assert.ok(await done.locator('[data-act=continue]').isHidden(), 'nothing left to continue');
  // The engine got the cut text as tokens it had generated; the store has one grown answer.
  const req = engineLog().filter((e) => e.kind === 'request').pop();
  assert.equal(req.resume, 5);
  const id = new URL(page.url()).hash.slice(1);
  const conv = await api(`/api/conversations/${id}`);
  assert.deepEqual(conv.messages.map((m) => m.status), ['complete', 'complete']);
  assert.equal(conv.messages[1].content.trim(), want);
  await page.context().close();
});

test('edit and resend and regenerate make new versions, and ‹ › shows the others', async () => {
  const page = await newPage(browser);
  let answer = await send(page, 'first question');
  await waitDone(answer);
  assert.equal((await answer.locator('.bubble').textContent()).trim(), 'Echo: first question');
  answer = await send(page, 'second question');
  await waitDone(answer);
  // Edit the first user message: everything after it goes, the new text is sent.
  const firstUser = page.locator('.msg.user').first();
  await firstUser.hover();
  await firstUser.locator('[data-act=edit]').click();
  await firstUser.locator('.edit-box textarea').fill('edited question [zh]');
  await firstUser.locator('[data-act=edit-save]').click();
  answer = page.locator('.msg.assistant').first();
  await page.locator('.msg.assistant[data-status]').first().waitFor();
  await waitDone(answer);
  assert.equal(await page.locator('.msg.user').count(), 1);
  assert.equal(await page.locator('.msg.assistant').count(), 1);
  assert.equal((await page.locator('.msg.user .bubble').textContent()), 'edited question [zh]');
  assert.equal((await answer.locator('.bubble').textContent()).trim(), '你好，世界！');
  const id = new URL(page.url()).hash.slice(1);
  let conv = await api(`/api/conversations/${id}`);
  assert.deepEqual(conv.messages.map((m) => m.content), ['edited question [zh]', '你好，世界！']);
  // Regenerate the last answer.
  const before = engineLog().filter((e) => e.kind === 'request').length;
  await answer.locator('[data-act=regen]').click();
  const again = page.locator('.msg.assistant').first();
  await page.locator('.msg.assistant.streaming, .msg.assistant[data-status]').first().waitFor();
  await waitDone(again);
  assert.equal(engineLog().filter((e) => e.kind === 'request').length, before + 1);
  conv = await api(`/api/conversations/${id}`);
  assert.equal(conv.messages.length, 2);
  // Every version stays: the regenerated answer is 2/2, the edited question 2/2.
  const answerNav = page.locator('.msg.assistant .versions .ver-count');
  await answerNav.waitFor();
  assert.equal(await answerNav.textContent(), '2/2');
  assert.equal(await page.locator('.msg.user .versions .ver-count').textContent(), '2/2');
  // ‹ on the question shows the first version with its whole branch, kept after a reload.
  await page.locator('.msg.user [data-act=ver-prev]').click();
  await page.locator('.msg.user .ver-count', { hasText: '1/2' }).waitFor();
  assert.deepEqual(await page.locator('.msg .bubble').allTextContents().then((t) => t.map((x) => x.trim())),
    ['first question', 'Echo: first question', 'second question', 'Echo: second question']);
  await page.reload();
  await page.locator('.msg.user .ver-count', { hasText: '1/2' }).waitFor();
  assert.equal(await page.locator('.msg.user').count(), 2);
  // › goes back to the edited one and its newest answer.
  await page.locator('.msg.user [data-act=ver-next]').first().click();
  await page.locator('.msg.user .ver-count', { hasText: '2/2' }).waitFor();
  assert.equal(await page.locator('.msg.user .bubble').textContent(), 'edited question [zh]');
  assert.equal(await page.locator('.msg.assistant .ver-count').textContent(), '2/2');
  await page.context().close();
});

test('model output with <script> and <img onerror> shows as text and never runs', async () => {
  const page = await newPage(browser);
  const answer = await send(page, 'show me html [xss]');
  await waitDone(answer);
  const text = await answer.locator('.bubble').textContent();
  assert.ok(text.includes('<script>window.__pwned = 1</script>'), text);
  assert.ok(text.includes('<img src=x onerror="window.__pwned = 2">'), text);
  assert.equal(await answer.locator('.bubble script').count(), 0);
  assert.equal(await answer.locator('.bubble img').count(), 0);
  assert.equal(await answer.locator('.bubble a[href^="javascript"]').count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  // The same after a reload (the stored answer renders through the same path).
  await page.reload();
  const stored = page.locator('.msg.assistant').last();
  await stored.waitFor();
  assert.ok((await stored.locator('.bubble').textContent()).includes('<script>'));
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await page.context().close();
});

test('markdown, code copy button, trim notice, stats, conversation list', async () => {
  const page = await newPage(browser);
  let answer = await send(page, 'markdown please [md]');
  await waitDone(answer);
  assert.equal(await answer.locator('.bubble h2').count(), 1);
  assert.equal(await answer.locator('.bubble pre code.language-python').count(), 1);
  assert.ok((await answer.locator('.bubble .hljs-keyword').count()) > 0, 'highlighted');
  assert.equal(await answer.locator('.bubble pre .copy-code').count(), 1);
  assert.match(await answer.locator('.stats').textContent(), /\d+ ms/);
  answer = await send(page, 'long history [trim]');
  await waitDone(answer);
  assert.ok(await answer.locator('.notice').isVisible(), 'trim notice shown');
  // New chat, then the list has both conversations; rename through the API shows up.
  await page.click('#new-chat');
  assert.equal(await page.locator('.msg').count(), 0);
  answer = await send(page, 'another chat');
  await waitDone(answer);
  assert.ok((await page.locator('.conv').count()) >= 2);
  await page.context().close();
});

test('English toggle, dark mode and a narrow screen', async () => {
  const page = await newPage(browser, { viewport: { width: 390, height: 800 }, colorScheme: 'dark' });
  assert.equal(await page.locator('#send').textContent(), '发送');
  await page.click('#menu-toggle');
  await page.click('#lang-toggle');
  assert.equal(await page.locator('#send').textContent(), 'Send');
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'en');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, 'rgb(22, 24, 28)', 'dark background');
  // The sidebar is an overlay on narrow screens: the composer keeps the full width.
  await page.click('#scrim', { position: { x: 370, y: 400 } });
  const composer = await page.locator('#composer').boundingBox();
  assert.ok(composer.width >= 380, `composer ${composer.width}px wide`);
  // At 390 px nothing wraps: the placeholder is one line, so is each row of action buttons.
  const input = await page.locator('#input').evaluate((e) => ({ h: e.clientHeight, sh: e.scrollHeight }));
  assert.ok(input.sh <= input.h + 1, `the message box holds its placeholder on one line (${input.sh} > ${input.h})`);
  const answer = await send(page, 'a narrow question');
  await waitDone(answer);
  for (const row of [answer.locator('.tools'), page.locator('.msg.user .tools').last(), page.locator('#topbar')]) {
    // Every visible child starts on the same line, and nothing sticks out.
    const box = await row.evaluate((e) => ({
      mids: [...e.children].filter((c) => c.offsetParent && c.getClientRects().length)
        .map((c) => { const r = c.getBoundingClientRect(); return Math.round((r.top + r.bottom) / 2); }),
      w: e.scrollWidth, cw: e.clientWidth }));
    const spread = Math.max(...box.mids) - Math.min(...box.mids);
    assert.ok(spread < 12 && box.w <= box.cw + 1, `one row without overflow: ${JSON.stringify(box)}`);
  }
  if (process.env.GLM_SCREENSHOTS) await page.screenshot({ path: `${process.env.GLM_SCREENSHOTS}/narrow.png` });
  await page.context().close();
});

test('a tool call and its result show as collapsed JSON, and the result goes back as an observation', async () => {
  const page = await newPage(browser);
  await page.click('#settings-toggle');
  await page.fill('#tools', JSON.stringify([{ type: 'function', function: { name: 'get_weather',
    description: 'Weather of a city', parameters: { type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] } } }]));
  const answer = await send(page, 'weather in Paris? [tool]');
  await waitDone(answer);
  assert.equal(await answer.getAttribute('data-status'), 'complete');
  // The call is a collapsed block with the function's name and a one-line preview, never the
  // model's raw call text.
  const call = answer.locator('details.tool-call');
  assert.equal(await call.count(), 1);
  assert.equal(await call.evaluate((d) => d.open), false, 'collapsed');
  assert.equal(await call.locator('.tool-name').textContent(), 'get_weather');
  assert.equal(await call.locator('.tool-preview').textContent(), '{"city":"Paris","unit":"celsius"}');
  assert.equal(await answer.locator('.bubble').isVisible(), false, 'no text bubble for a bare call');
  assert.ok(!(await answer.textContent()).includes('get_weather\n'), 'no raw template text');
  await call.locator('summary').click();
  assert.equal(await call.locator('pre.tool-json').textContent(),
    '{\n  "city": "Paris",\n  "unit": "celsius"\n}');
  // The composer now takes the tool's result; it shows as a collapsed block of its own.
  assert.match(await page.getAttribute('#input', 'placeholder'), /get_weather/);
  const next = await send(page, '{"temp_c": 21, "sky": "clear"}');
  await waitDone(next);
  const result = page.locator('.msg.tool details.tool-result');
  assert.equal(await result.count(), 1);
  assert.equal(await result.evaluate((d) => d.open), false);
  assert.equal(await result.locator('.tool-name').textContent(), 'get_weather');
  assert.match(await next.locator('.bubble').textContent(), /Echo: \{"temp_c": 21/);
  assert.doesNotMatch(await page.getAttribute('#input', 'placeholder'), /get_weather/);
  // The engine got the call in the history (as metadata + arguments) and the result as an
  // observation, with the tools.
  const reqs = engineLog().filter((e) => e.kind === 'request');
  const last = reqs[reqs.length - 1];
  const roles = last.messages.map((m) => m.role);
  assert.deepEqual(roles.slice(-3), ['user', 'assistant', 'observation']);
  assert.equal(last.messages[last.messages.length - 2].metadata, 'get_weather');
  assert.deepEqual(JSON.parse(last.messages[last.messages.length - 2].arguments),
    { city: 'Paris', unit: 'celsius' });
  assert.equal(last.messages[last.messages.length - 1].content, '{"temp_c": 21, "sky": "clear"}');
  assert.ok(last.tools, 'the engine got the tools');
  // After a reload the stored conversation renders the same blocks, and the tools are kept.
  await page.reload();
  await page.locator('.msg.tool details.tool-result').waitFor();
  assert.equal(await page.locator('.msg.assistant details.tool-call .tool-name').textContent(), 'get_weather');
  await page.click('#settings-toggle');
  assert.equal(JSON.parse(await page.inputValue('#tools'))[0].function.name, 'get_weather');
  if (process.env.GLM_SCREENSHOTS) await page.screenshot({ path: `${process.env.GLM_SCREENSHOTS}/tools.png` });
  // Tools that are not JSON: a clear error, nothing sent.
  await page.click('#new-chat');
  await page.fill('#tools', '[{"type": "function",');
  const before = engineLog().filter((e) => e.kind === 'request').length;
  const failed = await send(page, 'hello');
  assert.match(await failed.locator('.errmsg').textContent(), /JSON/);
  assert.equal(engineLog().filter((e) => e.kind === 'request').length, before);
  await page.context().close();
});

test('a reasoning model\'s thinking shows collapsed above the answer, and again after a reload', async () => {
  const page = await newPage(browser);
  const answer = await send(page, 'what is 2+2? [think]');
  await waitDone(answer);
  const thinking = answer.locator('details.thinking');
  assert.equal(await thinking.count(), 1);
  assert.equal(await thinking.evaluate((d) => d.open), false, 'collapsed');
  assert.equal((await answer.locator('.bubble').textContent()).trim(), 'It is 4.');
  await thinking.locator('summary').click();
  assert.equal(await thinking.locator('.thinking-text').textContent(), 'Let me think: 2+2.');
  // Above the answer, and stored: a reload shows it again.
  assert.ok(await answer.evaluate((a) => a.querySelector('details.thinking').nextElementSibling
    === a.querySelector('.bubble')));
  const id = new URL(page.url()).hash.slice(1);
  const conv = await api(`/api/conversations/${id}`);
  assert.equal(conv.messages[1].content, 'It is 4.');
  assert.equal(conv.messages[1].meta.reasoning, 'Let me think: 2+2.');
  await page.reload();
  const again = page.locator('.msg.assistant details.thinking .thinking-text');
  await again.waitFor({ state: 'attached' });
  assert.equal(await again.textContent(), 'Let me think: 2+2.');
  await page.context().close();
});

test('an answer cut by max tokens is badged and continued in place; a new chat is listed at once', async () => {
  const page = await newPage(browser);
  await page.click('#settings-toggle');
  await page.fill('#max-tokens', '10');
  await page.click('#settings-toggle');
  const before = await page.locator('.conv').count();
  const answer = await send(page, 'a long one [long]');
  // Listed while the answer is still being written, with its plain-text title.
  await page.locator('.conv', { hasText: 'a long one [long]' }).waitFor();
  assert.equal(await page.locator('.conv').count(), before + 1);
  await waitDone(answer);
  assert.equal(await answer.getAttribute('data-finish'), 'length');
  assert.equal(await answer.locator('.badge.length').isVisible(), true, 'cut-off badge');
  assert.equal(await answer.locator('.badge.length').textContent(), '已截断');
  assert.equal((await answer.locator('.bubble').textContent()).trim().split(/\s+/).length, 10);
  const id = await answer.getAttribute('data-id');
  await answer.locator('[data-act=continue]').click();
  const grown = page.locator('.msg.assistant').last();
  await grown.locator('xpath=self::*[@data-status]').waitFor();
  assert.equal(await grown.getAttribute('data-id'), id, 'the same answer, extended');
  const words = (await grown.locator('.bubble').textContent()).trim().split(/\s+/);
  assert.deepEqual(words, Array.from({ length: 20 }, (_, i) => `w${i}`));
  // The continuation went to the engine as the answer's tokens already generated.
  const reqs = engineLog().filter((e) => e.kind === 'request');
  assert.equal(reqs[reqs.length - 1].resume, 10);
  await page.context().close();
});

test('the header names the model; the theme button shows its mode; the language follows the browser', async () => {
  const page = await newPage(browser, { locale: 'en-US' });
  await page.locator('#model-name[data-state="ready"]').waitFor();
  assert.equal(await page.locator('#model-name').textContent(), 'fake-glm');
  // Its tooltip says where it runs (the engine's health: docs/gpu.md).
  assert.match(await page.locator('#model-name').getAttribute('title'), /fake-glm · vulkan:0 \(Fake GPU\) · /);
  // No saved choice: English for an English browser, every string re-rendered on a switch.
  assert.equal(await page.locator('#send').textContent(), 'Send');
  const answer = await send(page, 'hi');
  await waitDone(answer);
  assert.match(await answer.locator('.stats').textContent(), /tok\/s/);
  // The answer is stored with its model's name, shown only when it is not the one serving.
  assert.doesNotMatch(await answer.locator('.stats').textContent(), /fake-glm/);
  await page.click('#lang-toggle');
  assert.match(await answer.locator('.stats').textContent(), /词元\/秒/);
  assert.equal(await answer.locator('[data-act=copy]').textContent(), '复制');
  // Theme: system -> dark -> light, the button says which.
  const theme = page.locator('#theme-toggle');
  assert.equal(await theme.textContent(), '◐');
  await theme.click();
  assert.equal(await theme.textContent(), '☾');
  assert.equal(await theme.getAttribute('title'), '主题：深色');
  await theme.click();
  assert.equal(await theme.textContent(), '☀');
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'light');
  // Stop is the primary (coloured) button while an answer runs.
  const slow = await send(page, 'slowly [slow]');
  await slow.locator('.bubble', { hasText: 'word2' }).waitFor();
  assert.match(await page.getAttribute('#stop', 'class'), /primary/);
  assert.equal(await slow.locator('.md-tail').evaluate((e) =>
    getComputedStyle(e.lastElementChild || e, '::after').content), '"▍"', 'streaming cursor');
  await page.click('#stop');
  await waitDone(slow);
  await page.context().close();
});

test('TeX in an answer renders as math, loaded only when an answer has some', async () => {
  const page = await newPage(browser);
  const mathLoads = () => page.evaluate(() =>
    performance.getEntriesByType('resource').filter((r) => r.name.includes('/math.js')).length);
  let answer = await send(page, 'no formulas here');
  await waitDone(answer);
  assert.equal(await mathLoads(), 0, 'no math bundle for an answer without TeX');
  answer = await send(page, 'show me some math [math]');
  await waitDone(answer);
  // Inline and display formulas become MathML; "$5 or $6" stays text.
  await answer.locator('.bubble math').first().waitFor();
  assert.equal(await answer.locator('.bubble math').count(), 2);
  assert.equal(await answer.locator('.bubble math[display="block"]').count(), 1);
  assert.equal(await answer.locator('.bubble annotation').first().textContent(), 'e^{i\\pi}+1=0');
  assert.match(await answer.locator('.bubble').textContent(), /costs \$5 or \$6\./);
  assert.equal(await mathLoads(), 1);
  // After a reload the stored answer renders its formulas again.
  await page.reload();
  await page.locator('.msg.assistant .bubble math').first().waitFor();
  assert.equal(await page.locator('.msg.assistant .bubble math').count(), 2);
  if (process.env.GLM_SCREENSHOTS) await page.screenshot({ path: `${process.env.GLM_SCREENSHOTS}/math.png` });
  await page.context().close();
});

test('the answer being made shows its state: reading the prompt with %, then writing with tokens/s', async () => {
  const page = await newPage(browser, { locale: 'en-US' });
  const answer = await send(page, 'a long prompt [reading] [slow]');
  // Progress events become "Reading the prompt N%" (the fake engine reads 5 chunks of 64).
  await answer.locator('.stats', { hasText: /Reading the prompt (20|40|60|80)%/ }).waitFor();
  assert.equal(await answer.getAttribute('data-state'), 'reading');
  // Then the tokens: "Writing · R tok/s" while it streams.
  await answer.locator('.stats', { hasText: /Writing · \d+(\.\d)? tok\/s/ }).waitFor();
  assert.equal(await answer.getAttribute('data-state'), 'writing');
  await page.click('#stop');
  await waitDone(answer);
  assert.equal(await answer.getAttribute('data-state'), null, 'the live state ends with the answer');
  await page.context().close();
});

test('a message sent while the model loads waits with the load progress, then goes out', async () => {
  const page = await newPage(browser, { locale: 'en-US' });
  assert.equal(await page.locator('#demo-badge').isVisible(), false, 'fake-glm says nothing of random weights');
  let answer = await send(page, 'first [load-next]');
  await waitDone(answer);
  await new Promise((r) => setTimeout(r, 400)); // the fake engine is loading now (1.5 s)
  const before = engineLog().filter((e) => e.kind === 'refused').length;
  answer = await send(page, 'sent while it loads');
  await page.locator('.msg.assistant .stats', { hasText: /Loading the model \d+%/ }).waitFor();
  // Once loaded the same turn goes out again and is answered in the same place.
  const last = page.locator('.msg.assistant').last();
  await last.locator('.bubble', { hasText: 'Echo: sent while it loads' }).waitFor({ timeout: 15000 });
  await last.locator('xpath=self::*[@data-status="complete"]').waitFor();
  assert.equal(engineLog().filter((e) => e.kind === 'refused').length, before + 1, 'refused once');
  assert.equal(await page.locator('.msg.assistant').count(), 2);
  const conv = await api(`/api/conversations/${new URL(page.url()).hash.slice(1)}`);
  assert.equal(conv.messages.length, 4);
  assert.equal(conv.messages[3].status, 'complete');
  assert.equal(conv.messages[3].content, 'Echo: sent while it loads');
  assert.equal(conv.messages[3].siblings, undefined, 'the same answer row, no second version');
  await page.context().close();
});
