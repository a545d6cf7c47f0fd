// Screenshots of the page for a human look: light (Chinese), dark (English), narrow.
//   GLM_WEB_URL=http://127.0.0.1:PORT node tests/browser/screenshot.mjs OUT_DIR
import { newPage, openBrowser, send, waitDone } from './harness.mjs';

const out = process.argv[2] || '.';
const browser = await openBrowser();
try {
  const page = await newPage(browser, { colorScheme: 'light' });
  let a = await send(page, '写一个斐波那契函数 [md]');
  await waitDone(a);
  a = await send(page, 'and a long one [slow]');
  await a.locator('.bubble', { hasText: 'word20' }).waitFor();
  await page.click('#stop');
  await waitDone(a);
  await page.click('#settings-toggle');
  await page.screenshot({ path: `${out}/page-light-zh.png` });
  const dark = await newPage(browser, { colorScheme: 'dark' });
  await dark.click('#lang-toggle');
  a = await send(dark, 'show me html [xss]');
  await waitDone(a);
  a = await send(dark, 'markdown [md]');
  await waitDone(a);
  await dark.screenshot({ path: `${out}/page-dark-en.png` });
  const narrow = await newPage(browser, { viewport: { width: 390, height: 760 } });
  a = await send(narrow, '你好 [zh]');
  await waitDone(a);
  await narrow.screenshot({ path: `${out}/page-narrow.png` });
  await narrow.click('#menu-toggle');
  await narrow.screenshot({ path: `${out}/page-narrow-menu.png` });
} finally {
  await browser.close();
}
