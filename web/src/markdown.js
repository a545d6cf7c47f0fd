// Markdown for model output, rendered safely: markdown-it with raw HTML disabled (so `<script>`
// in an answer is text), then DOMPurify over the result as a second wall, and highlight.js
// (core + a few languages) for code. StreamView renders a growing answer by appending finished
// blocks to the DOM and re-rendering only the unfinished tail. Math ($...$, $$...$$) is
// rendered by KaTeX as MathML once the math bundle has loaded: it is fetched the first time a
// text looks like it holds TeX, and onMathReady's callbacks re-render what was shown before.
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import cpp from 'highlight.js/lib/languages/cpp';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import MarkdownIt from 'markdown-it';

hljs.registerLanguage('bash', bash);
hljs.registerLanguage('cpp', cpp);
hljs.registerLanguage('javascript', javascript);
hljs.registerLanguage('json', json);
hljs.registerLanguage('python', python);
hljs.registerLanguage('sql', sql);
hljs.registerLanguage('typescript', typescript);

const md = new MarkdownIt({
  html: false,
  linkify: true,
  breaks: true,
  highlight(code, lang) {
    if (lang && hljs.getLanguage(lang)) {
      try {
        return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
      } catch {
        // fall through to plain escaping
      }
    }
    return ''; // markdown-it escapes it
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

// KaTeX's MathML keeps the TeX source in <annotation> (plain text; never shown): kept for copy.
const PURIFY = {
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea'],
  FORBID_ATTR: ['style'],
  ADD_TAGS: ['annotation'],
};

// $...$ with no space inside the dollars (so "$5 and $6" is not math), $$...$$, \( \) or \[ \].
const TEX = /\$\$[\s\S]+?\$\$|\$[^\s$](?:[^$\n]*[^\s$])?\$|\\\(|\\\[/;
let math = 'none'; // none | loading | ready
const mathReady = [];

export function looksLikeMath(text) {
  return TEX.test(text);
}

export function mathLoaded() {
  return math === 'ready';
}

// Called (once) when the math bundle has loaded and later renders include math.
export function onMathReady(fn) {
  mathReady.push(fn);
}

function loadMath() {
  if (math !== 'none') return;
  math = 'loading';
  window.glmMathLoaded = (plugin) => {
    md.use(plugin, { output: 'mathml', throwOnError: false });
    math = 'ready';
    for (const fn of mathReady) fn();
  };
  const script = document.createElement('script');
  script.src = MATH_URL; // defined by build.mjs: /math.js?v=<content hash>
  script.onerror = () => {
    math = 'none'; // offline or refused: text stays as written; tried again next time
  };
  document.head.append(script);
}

export function renderMarkdown(text) {
  if (math === 'none' && TEX.test(text)) loadMath();
  return DOMPurify.sanitize(md.render(text), PURIFY);
}

// Adds a copy button to each code block under `root` (the click is handled by delegation).
function decorateCode(root, copyLabel) {
  for (const pre of root.querySelectorAll('pre')) {
    if (pre.querySelector('.copy-code')) continue;
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'copy-code';
    b.textContent = copyLabel;
    pre.prepend(b);
  }
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;

export class StreamView {
  // `el`: the element the answer renders into (emptied).
  constructor(el, copyLabel) {
    this.el = el;
    this.copyLabel = copyLabel;
    this.text = '';
    this.committed = 0; // chars of text rendered into finished blocks
    this.fence = null; // open fence marker in the uncommitted text scan
    this.blocks = document.createElement('div');
    this.tail = document.createElement('div');
    this.blocks.className = 'md-blocks';
    this.tail.className = 'md-tail';
    el.replaceChildren(this.blocks, this.tail);
  }

  append(chunk) {
    this.text += chunk;
    // Commit up to the last blank line outside a code fence: those blocks cannot change.
    const pending = this.text.slice(this.committed);
    let fence = null;
    let cut = -1;
    let pos = 0;
    while (pos < pending.length) {
      const nl = pending.indexOf('\n', pos);
      if (nl < 0) break; // the last line is unfinished
      const line = pending.slice(pos, nl);
      const m = FENCE.exec(line);
      if (m) {
        if (!fence) fence = m[1][0];
        else if (m[1][0] === fence && line.trim().replace(/[`~]/g, '') === '') fence = null;
      } else if (!fence && line.trim() === '' && pos > 0) {
        cut = nl + 1;
      }
      pos = nl + 1;
    }
    if (cut > 0) {
      const tpl = document.createElement('template');
      tpl.innerHTML = renderMarkdown(pending.slice(0, cut));
      decorateCode(tpl.content, this.copyLabel);
      this.blocks.append(tpl.content);
      this.committed += cut;
    }
    this.renderTail();
  }

  renderTail() {
    const rest = this.text.slice(this.committed);
    this.tail.innerHTML = rest ? renderMarkdown(rest) : '';
    decorateCode(this.tail, this.copyLabel);
  }

  // One full render at the end, so constructs that span blocks come out exactly.
  finish() {
    setMarkdown(this.el, this.text, this.copyLabel);
  }
}

export function setMarkdown(el, text, copyLabel) {
  el.innerHTML = renderMarkdown(text);
  decorateCode(el, copyLabel);
}
