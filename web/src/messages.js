// Message views: one element per message; assistant answers render markdown (markdown.js).
import { StreamView, setMarkdown } from './markdown.js';
import { t } from './i18n.js';

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(act, key) {
  const b = el('button', '', t(key));
  b.type = 'button';
  b.dataset.act = act;
  b.dataset.i18n = key;
  return b;
}

// A tool call's arguments or a tool's result: indented JSON when it parses, else as written.
function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// One line for a collapsed tool block: the compact JSON, cut at 80 characters.
function preview(text) {
  let s;
  try {
    s = JSON.stringify(JSON.parse(text));
  } catch {
    s = text.replace(/\s+/g, ' ');
  }
  return s.length > 80 ? `${s.slice(0, 79)}…` : s;
}

// A collapsed block: summary "<label> name preview", the indented JSON inside.
function toolBlock(cls, labelKey, name, text) {
  const box = el('details', cls);
  const summary = el('summary');
  const label = el('span', 'tool-label', t(labelKey));
  label.dataset.i18n = labelKey;
  summary.append(label, ' ', el('code', 'tool-name', name), ' ', el('span', 'tool-preview', preview(text)));
  box.append(summary, el('pre', 'tool-json', prettyJson(text)));
  box.setText = (next) => {
    summary.querySelector('.tool-preview').textContent = preview(next);
    box.querySelector('.tool-json').textContent = prettyJson(next);
  };
  return box;
}

// The result of a tool call, given by the user (role tool; meta.name = the function).
export function toolResultView(msg) {
  const root = el('div', 'msg tool');
  if (msg.id) root.dataset.id = msg.id;
  root.raw = msg.content;
  root.append(toolBlock('tool-result', 'toolResult', (msg.meta || {}).name || '', msg.content));
  return root;
}

// "‹ 2/3 ›" for a message with other versions (edits of a user message, regenerated answers):
// the arrows show the version before or after (main.js asks the gateway for that branch).
function versionNav(msg) {
  const ids = msg.siblings || [];
  const nav = el('span', 'versions');
  if (ids.length < 2) {
    nav.hidden = true;
    return nav;
  }
  const at = ids.indexOf(msg.id);
  const prev = button('ver-prev', 'prevVersion');
  const next = button('ver-next', 'nextVersion');
  prev.textContent = '‹';
  next.textContent = '›';
  prev.title = t('prevVersion');
  next.title = t('nextVersion');
  prev.disabled = at <= 0;
  next.disabled = at >= ids.length - 1;
  delete prev.dataset.i18n;
  delete next.dataset.i18n;
  if (at > 0) prev.dataset.target = ids[at - 1];
  if (at < ids.length - 1) next.dataset.target = ids[at + 1];
  nav.append(prev, el('span', 'ver-count', `${at + 1}/${ids.length}`), next);
  return nav;
}

// What the header knows of the models (main.js keeps it current): the one serving now, and
// whether several are.
export const modelLabels = { current: '', several: false };

export function userView(msg) {
  const root = el('div', 'msg user');
  if (msg.id) root.dataset.id = msg.id;
  root.raw = msg.content;
  const bubble = el('div', 'bubble', msg.content);
  const tools = el('div', 'tools');
  tools.append(el('span', 'stats'), versionNav(msg), button('copy', 'copy'), button('edit', 'edit'));
  root.append(bubble, tools);
  return root;
}

export class AnswerView {
  constructor(msg = {}) {
    this.root = el('div', 'msg assistant');
    this.root.view = this; // relabelled on a language switch
    if (msg.id) this.root.dataset.id = msg.id;
    this.root.raw = msg.content || '';
    this.notice = el('div', 'notice');
    this.notice.hidden = true;
    this.bubble = el('div', 'bubble');
    this.error = el('div', 'errmsg');
    this.error.hidden = true;
    this.tools = el('div', 'tools');
    this.stats = el('span', 'stats');
    this.badge = el('span', 'badge');
    this.badge.hidden = true;
    this.tools.append(this.stats, this.badge, versionNav(msg), button('copy', 'copy'),
      button('regen', 'regenerate'), button('continue', 'continueAnswer'));
    this.root.append(this.notice, this.bubble, this.error, this.tools);
    if (msg.content !== undefined) {
      setMarkdown(this.bubble, msg.content, t('copy'));
      this.finish(msg.status, msg.meta || {}, msg.error);
    }
  }

  // The answer calls a tool: a collapsed block under the text, its arguments filled as they
  // arrive (toolArguments) and set whole at the end (finish, from meta.tool_call).
  showToolCall(name) {
    this.call = { name, args: '' };
    this.callBox = toolBlock('tool-call', 'toolCall', name, '');
    this.bubble.after(this.callBox);
    this.root.dataset.toolCall = name;
  }

  // A reasoning model's thinking: a collapsed block above the answer, filled as it arrives
  // (appendReasoning) or set whole from the stored meta.reasoning (finish).
  appendReasoning(text) {
    if (!this.thinking) {
      this.thinking = el('details', 'thinking');
      const summary = el('summary', '', t('thinking'));
      summary.dataset.i18n = 'thinking';
      this.thinkingText = el('div', 'thinking-text');
      this.thinking.append(summary, this.thinkingText);
      this.bubble.before(this.thinking);
    }
    this.thinkingText.textContent += text;
  }

  toolArguments(text) {
    this.call.args += text;
    this.callBox.setText(this.call.args);
  }

  startStream() {
    this.root.classList.add('streaming');
    this.stream = new StreamView(this.bubble, t('copy'));
  }

  append(text) {
    this.stream.append(text);
    this.root.raw = this.stream.text;
  }

  // The live state while the answer is made: queued (its position), reading the prompt (how
  // much of it the engine has written into its cache), writing (tokens per second so far).
  showQueued(position) {
    this.stats.textContent = position > 0 ? t('queued', { n: position }) : '';
    this.root.dataset.state = position > 0 ? 'queued' : '';
  }

  showReading(prefilled, total) {
    const pct = total > 0 ? Math.min(99, Math.floor((100 * prefilled) / total)) : 0;
    this.stats.textContent = t('reading', { pct });
    this.root.dataset.state = 'reading';
  }

  showWriting(tokensPerS) {
    this.stats.textContent = t('writing', { rate: tokensPerS.toFixed(1) });
    this.root.dataset.state = 'writing';
  }

  showNotice(dropped) {
    this.notice.hidden = false;
    this.notice.textContent = `⚠ ${t('trimmed')}${dropped ? ` (${dropped})` : ''}`;
  }

  // status: complete | stopped | error | interrupted; meta: the stored timings.
  finish(status, meta, errorText) {
    this.root.classList.remove('streaming');
    delete this.root.dataset.state;
    if (this.stream) this.stream.finish();
    if (meta.notice || meta.dropped_messages) this.showNotice(meta.dropped_messages);
    if (meta.reasoning && !this.thinking) this.appendReasoning(meta.reasoning);
    if (meta.tool_call) {
      if (!this.callBox) this.showToolCall(meta.tool_call.name);
      this.call.args = meta.tool_call.arguments || '';
      this.callBox.setText(this.call.args);
    }
    this.bubble.hidden = !this.root.raw && !!this.callBox;
    this.meta = meta;
    this.root.dataset.status = status || 'complete';
    if (meta.finish_reason) this.root.dataset.finish = meta.finish_reason;
    if (errorText) {
      this.error.hidden = false;
      this.error.textContent = errorText;
    }
    this.relabel();
  }

  // The stats line and the badge in the current language (again after a language switch).
  relabel() {
    const meta = this.meta || {};
    const parts = [];
    // Which model wrote it, when that is not obvious: several are served, or it is not the one
    // serving now (one database keeps every model's conversations).
    if (meta.model && (modelLabels.several || meta.model !== modelLabels.current)) {
      parts.push(meta.model);
    }
    if (meta.ttft_ms !== undefined) parts.push(`${t('ttft')} ${Math.round(meta.ttft_ms)} ms`);
    if (meta.tokens_per_s) parts.push(`${meta.tokens_per_s.toFixed(1)} ${t('tokS')}`);
    if (meta.completion_tokens) parts.push(`${meta.completion_tokens} ${t('tokens')}`);
    if (meta.cached_tokens) parts.push(`${t('cached')} ${meta.cached_tokens}`);
    this.stats.textContent = parts.join(' · ');
    const status = this.root.dataset.status;
    // A complete answer that hit max_tokens is cut off: Continue writes on in its place.
    const kind = status && status !== 'complete' && status !== 'streaming'
      ? status : (meta.finish_reason === 'length' ? 'length' : '');
    this.badge.hidden = !kind;
    if (kind) {
      this.badge.className = `badge ${kind}`;
      this.badge.textContent = t(kind === 'length' ? 'cutOff' : kind);
      this.badge.title = kind === 'length' ? t('cutOffTitle') : '';
    }
  }
}

export function editBox(text) {
  const box = el('div', 'edit-box');
  const area = el('textarea');
  area.value = text;
  const row = el('div', 'row');
  row.append(button('edit-cancel', 'cancel'), button('edit-save', 'saveSend'));
  row.lastChild.classList.add('primary');
  box.append(area, row);
  return box;
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
}
