// The page on a phone (390 x 844, chromium), in Chinese and in English: no button's label wraps
// inside a word ("导/出", "复/制"), the stats line is not clipped, the title keeps room in the top
// bar; a stopped answer offers Continue, and Continue writes on in the same answer.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { newPage, openBrowser, send, waitDone } from './harness.mjs';

let browser;
before(async () => {
  browser = await openBrowser();
});
after(async () => {
  await browser?.close();
});

// The visible buttons (top bar and each message's tools) whose label spans more than one line,
// as "label: N lines".
async function wrappedButtons(page) {
  return page.evaluate(() => {
    const out = [];
    for (const b of document.querySelectorAll('#topbar button, #topbar span, .msg .tools button')) {
      if (!b.offsetParent || !b.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(b);
      const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (tops.size > 1) out.push(`${b.textContent.trim()}: ${tops.size} lines`);
    }
    return out;
  });
}

for (const locale of ['zh-CN', 'en-US']) {
  test(`a phone at 390 px (${locale}): no label wraps, the stats line and the title show`, async () => {
    const page = await newPage(browser, { viewport: { width: 390, height: 844 }, locale });
    const answer = await send(page, `a question long enough to be a real title on a phone [zh]`);
    await waitDone(answer);
    assert.equal(await answer.getAttribute('data-status'), 'complete');
    await page.locator('#export-conv').waitFor();
    assert.deepEqual(await wrappedButtons(page), []);
    // No horizontal scrolling of the page.
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390));
    // The stats line is whole: not cut by its box, and inside the screen.
    const stats = await answer.locator('.stats').evaluate((s) => ({
      clipped: s.scrollWidth > s.clientWidth + 1,
      right: s.getBoundingClientRect().right,
      text: s.textContent,
    }));
    assert.ok(stats.text.length > 0);
    assert.equal(stats.clipped, false, `stats clipped: ${stats.text}`);
    assert.ok(stats.right <= 390, `stats past the screen: ${stats.right}`);
    // The conversation's title keeps a readable share of the top bar.
    const title = await page.locator('#conv-title').boundingBox();
    assert.ok(title.width >= 100, `title ${title.width} px wide`);
    await page.context().close();
  });
}

test('a stopped answer offers Continue, which writes on in the same answer', async () => {
  const page = await newPage(browser, { viewport: { width: 390, height: 844 } });
  const answer = await send(page, 'tell me a long story [slow]');
  await answer.locator('.bubble', { hasText: 'word5' }).waitFor();
  await page.click('#stop');
  await waitDone(answer);
  assert.equal(await answer.getAttribute('data-status'), 'stopped');
  assert.deepEqual(await wrappedButtons(page), []);
  const cont = answer.locator('[data-act=continue]');
  assert.ok(await cont.isVisible(), 'Continue is offered on a stopped answer');
  const before = (await answer.locator('.bubble').textContent()).length;
  await cont.click();
  await answer.locator('.bubble', { hasText: 'word40' }).waitFor();
  assert.ok((await answer.locator('.bubble').textContent()).length > before);
  assert.equal(await page.locator('.msg.assistant').count(), 1, 'the same answer, not a new one');
  await page.click('#stop');
  await waitDone(answer);
  await page.context().close();
});
