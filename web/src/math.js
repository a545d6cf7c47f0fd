// The math bundle (dist/math.js), loaded by the page only once an answer holds TeX between $
// delimiters (markdown.js): KaTeX and its markdown-it rules, handed to the page's renderer.
// KaTeX writes MathML, which browsers lay out themselves: no fonts or stylesheet to ship.
import markdownItKatex from '@vscode/markdown-it-katex';

window.glmMathLoaded?.(markdownItKatex.default ?? markdownItKatex);
