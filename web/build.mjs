// Builds the chat page into dist/ (committed, embedded into the glmserve binary by
// src/gateway/embed_assets.cmake): one minified JS bundle, one CSS file, index.html naming them
// by content hash, and a gzip twin of each (served as is when the browser accepts gzip).
//   node build.mjs          build
//   node build.mjs --check  build into a temp dir and fail if dist/ differs (stale bundle)
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync, constants } from 'node:zlib';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const check = process.argv.includes('--check');
const out = check ? mkdtempSync(join(tmpdir(), 'glm-web-')) : join(here, 'dist');
mkdirSync(out, { recursive: true });

const hash = (buf) => createHash('sha256').update(buf).digest('hex').slice(0, 12);
// The math bundle first: the page names it by its hash, and loads it only when an answer has
// TeX in it (src/markdown.js).
const bundle = (entry, define = {}) => esbuild.build({
  entryPoints: [join(here, entry)],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome100', 'firefox100', 'safari15'],
  legalComments: 'none',
  write: false,
  define,
});
const math = Buffer.from((await bundle('src/math.js')).outputFiles[0].contents);
const js = await bundle('src/main.js', { MATH_URL: JSON.stringify(`/math.js?v=${hash(math)}`) });
const css = await esbuild.build({
  entryPoints: [join(here, 'src/style.css')],
  bundle: true,
  minify: true,
  write: false,
});
const files = {
  'app.js': Buffer.from(js.outputFiles[0].contents),
  'app.css': Buffer.from(css.outputFiles[0].contents),
  'math.js': math,
};
const html = readFileSync(join(here, 'src/index.html'), 'utf8')
  .replace('__JS_HASH__', hash(files['app.js']))
  .replace('__CSS_HASH__', hash(files['app.css']));
files['index.html'] = Buffer.from(html);

let gzTotal = 0; // what every page load fetches: not math.js, fetched on the first formula
let gzMath = 0;
for (const [name, buf] of Object.entries(files)) {
  writeFileSync(join(out, name), buf);
  // mtime 0 in the gzip header (Node writes none), so the output is reproducible.
  const gz = gzipSync(buf, { level: constants.Z_BEST_COMPRESSION });
  writeFileSync(join(out, `${name}.gz`), gz);
  if (name === 'math.js') gzMath = gz.length;
  else gzTotal += gz.length;
  console.log(`${name.padEnd(11)} ${String(buf.length).padStart(7)} B  gzip ${String(gz.length).padStart(6)} B`);
}
console.log(`page weight (gzip, loaded with the page): ${gzTotal} B = ${(gzTotal / 1024).toFixed(1)} KiB; math on demand ${(gzMath / 1024).toFixed(1)} KiB`);
if (gzTotal > 150 * 1024 || gzMath > 150 * 1024) {
  console.error('page weight over the 150 KiB budget (each of the page and the math bundle)');
  process.exit(1);
}

if (check) {
  const dist = join(here, 'dist');
  const names = readdirSync(out).sort();
  const stale = names.filter((n) => {
    try {
      return !readFileSync(join(dist, n)).equals(readFileSync(join(out, n)));
    } catch {
      return true;
    }
  });
  const extra = readdirSync(dist).filter((n) => !names.includes(n));
  rmSync(out, { recursive: true });
  if (stale.length || extra.length) {
    console.error(`web/dist is stale (${[...stale, ...extra].join(', ')}): run 'npm run build' in web/ and commit dist/`);
    process.exit(1);
  }
  console.log('web/dist matches the sources');
}
