// glmserve chat page: conversation list, settings, composer, and the streaming chat loop.
import * as api from './api.js';
import { applyStatic, t, toggleLang } from './i18n.js';
import { looksLikeMath, onMathReady, setMarkdown } from './markdown.js';
import { AnswerView, copyText, editBox, modelLabels, toolResultView, userView } from './messages.js';

const $ = (id) => document.getElementById(id);
const ui = {
  app: $('app'),
  list: $('conv-list'),
  messages: $('messages'),
  empty: $('empty-hint'),
  input: $('input'),
  send: $('send'),
  stop: $('stop'),
  title: $('conv-title'),
  settings: $('settings'),
  system: $('system-prompt'),
  temperature: $('temperature'),
  topP: $('top-p'),
  maxTokens: $('max-tokens'),
  tools: $('tools'),
  engine: $('engine-state'),
  model: $('model-name'),
  modelPick: $('model-pick'),
  demo: $('demo-badge'),
  exportBtn: $('export-conv'),
  scrim: $('scrim'),
};

const state = {
  convId: null,
  conversations: [],
  running: null, // {requestId, stopRequested, ctrl, view}
  pendingTool: null, // the function the last answer called: the composer takes its result
  health: null, // the last /health answer
  models: [], // several models under one serve: [{name, state, ...}] (else empty)
};

// ---- settings -------------------------------------------------------------------------------

function loadDefaults() {
  try {
    return JSON.parse(localStorage.getItem('glm.params') || '{}');
  } catch {
    return {};
  }
}

function setControls(params, system, tools = []) {
  const d = { temperature: 0.8, top_p: 0.8, max_tokens: 512, ...params };
  ui.temperature.value = d.temperature;
  ui.topP.value = d.top_p;
  ui.maxTokens.value = d.max_tokens;
  ui.system.value = system || '';
  ui.tools.value = tools.length ? JSON.stringify(tools, null, 2) : '';
  showSliderValues();
}

// The conversation's tools from the settings (OpenAI's tools array; empty = none). The
// gateway checks each function and names what is wrong; this only needs JSON.
function toolsValue() {
  const text = ui.tools.value.trim();
  if (!text) return [];
  let tools;
  try {
    tools = JSON.parse(text);
  } catch {
    tools = null;
  }
  if (!Array.isArray(tools)) throw new Error(t('badTools'));
  return tools;
}

function showSliderValues() {
  $('temperature-out').textContent = Number(ui.temperature.value).toFixed(2);
  $('top-p-out').textContent = Number(ui.topP.value).toFixed(2);
}

function params() {
  const max = Math.max(1, Math.min(1048576, parseInt(ui.maxTokens.value, 10) || 512));
  return {
    temperature: Number(ui.temperature.value),
    top_p: Number(ui.topP.value),
    max_tokens: max,
  };
}

// ---- conversation list ----------------------------------------------------------------------

function renderList() {
  ui.list.replaceChildren();
  for (const c of state.conversations) {
    const item = document.createElement('div');
    item.className = `conv${c.id === state.convId ? ' active' : ''}`;
    item.dataset.id = c.id;
    const title = document.createElement('span');
    title.className = 'title';
    title.textContent = c.title || t('untitled');
    const rename = document.createElement('button');
    rename.type = 'button';
    rename.dataset.act = 'rename';
    rename.textContent = '✎';
    rename.title = t('rename');
    const del = document.createElement('button');
    del.type = 'button';
    del.dataset.act = 'delete';
    del.textContent = '×';
    del.title = t('delete');
    item.append(title, rename, del);
    ui.list.append(item);
  }
}

async function refreshList() {
  try {
    state.conversations = (await api.call('GET', '/api/conversations')).conversations;
  } catch {
    state.conversations = [];
  }
  renderList();
}

function setTitle(text) {
  ui.title.textContent = text || t('newChat');
  document.title = text ? `${text} · glmserve` : 'glmserve';
}

function showEmpty() {
  ui.empty.hidden = ui.messages.querySelector('.msg') !== null;
}

async function openConversation(id) {
  if (state.running) return;
  let conv;
  try {
    conv = await api.call('GET', `/api/conversations/${id}`);
  } catch {
    newChat();
    return;
  }
  state.convId = conv.id;
  history.replaceState(null, '', `#${conv.id}`);
  setTitle(conv.title);
  setControls({ ...loadDefaults(), ...conv.params }, conv.system_prompt, conv.tools || []);
  ui.messages.replaceChildren(ui.empty);
  let live = null;
  for (const m of conv.messages) {
    if (m.role === 'user') {
      ui.messages.append(userView(m));
    } else if (m.role === 'tool') {
      ui.messages.append(toolResultView(m));
    } else if (m.role === 'assistant' && conv.live && m.id === conv.live.assistant_message_id) {
      // Still being generated (a reload mid-answer): follow it from its first event.
      live = new AnswerView({ id: m.id });
      live.startStream();
      ui.messages.append(live.root);
    } else if (m.role === 'assistant') {
      ui.messages.append(new AnswerView(m).root);
    }
  }
  ui.exportBtn.hidden = false;
  showEmpty();
  updateRegenerate();
  renderList();
  closeSidebar();
  scrollToEnd(true);
  if (live) {
    const ctrl = new AbortController();
    const job = newJob(conv.id, live, ctrl, conv.live.request_id);
    live.root.dataset.attachSentMs = performance.now().toFixed(2);
    follow(job, api.attach(conv.id, 0, ctrl.signal), null, null).catch(showError);
  }
}

function newChat() {
  if (state.running) return;
  state.convId = null;
  history.replaceState(null, '', location.pathname);
  setTitle('');
  setControls(loadDefaults(), localStorage.getItem('glm.system') || '');
  ui.messages.replaceChildren(ui.empty);
  ui.exportBtn.hidden = true;
  showEmpty();
  updateRegenerate();
  renderList();
  closeSidebar();
  ui.input.focus();
}

// ---- chat -----------------------------------------------------------------------------------

function nearBottom() {
  const m = ui.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
}

function scrollToEnd(force) {
  if (force || nearBottom()) ui.messages.scrollTop = ui.messages.scrollHeight;
}

// Regenerate on the last answer only; continue too, when that answer was cut: interrupted
// (the gateway stopped or died mid-answer), stopped or failed after some text, or cut off by
// max_tokens. When the last answer
// calls a tool, the composer takes that tool's result.
function updateRegenerate() {
  const answers = ui.messages.querySelectorAll('.msg.assistant');
  answers.forEach((a, i) => {
    const last = i === answers.length - 1;
    const cut = a.dataset.status === 'interrupted' || (a.dataset.status === 'error' && !!a.raw) ||
      (a.dataset.status === 'stopped' && !!a.raw) ||
      (a.dataset.status === 'complete' && a.dataset.finish === 'length');
    a.querySelector('[data-act=regen]').hidden = !last;
    a.querySelector('[data-act=continue]').hidden = !last || !cut || !!a.dataset.toolCall;
  });
  const lastMsg = [...ui.messages.querySelectorAll('.msg')].pop();
  const call = lastMsg && lastMsg.classList.contains('assistant') &&
    lastMsg.dataset.status === 'complete' ? lastMsg.dataset.toolCall : undefined;
  state.pendingTool = call || null;
  if (call) {
    ui.input.placeholder = t('toolResultPlaceholder', { name: call });
    delete ui.input.dataset.i18nPlaceholder;
  } else {
    // Phones get no key hints (and one line at 390 px).
    ui.input.dataset.i18nPlaceholder = narrow.matches ? 'placeholderShort' : 'placeholder';
    ui.input.placeholder = t(ui.input.dataset.i18nPlaceholder);
  }
}

const narrow = window.matchMedia('(max-width: 600px)');

function setRunning(on) {
  ui.send.hidden = on;
  ui.stop.hidden = !on;
  ui.app.classList.toggle('running', on);
}

function newJob(convId, view, ctrl, requestId = null) {
  // cursor.lastId: the id of the last event received, where a re-attach starts again.
  return { convId, requestId, stopRequested: false, ctrl, view, cursor: { lastId: -1 } };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Sends one chat request and streams the answer into a new AnswerView. `t0` is the moment of
// the click / key press, for the click-to-first-character measurement.
async function run(body, userText, t0, opts = {}) {
  const tools = toolsValue();
  let isNew = false; // a new conversation: listed as soon as its first turn started
  if (!state.convId) {
    const conv = await api.call('POST', '/api/conversations', {
      system_prompt: ui.system.value,
      params: params(),
      tools,
    });
    state.convId = conv.id;
    history.replaceState(null, '', `#${conv.id}`);
    ui.exportBtn.hidden = false;
    isNew = true;
  }
  const convId = state.convId;
  const ctrl = new AbortController();
  body.params = params();
  body.system_prompt = ui.system.value;
  body.tools = tools;
  if (chosenModel()) body.model = chosenModel();
  const response = api.openChat(convId, body, ctrl.signal);
  let userEl = null;
  if (userText !== null) {
    userEl = body.tool_result !== undefined
      ? toolResultView({ content: userText, meta: { name: state.pendingTool } })
      : userView({ content: userText });
    ui.messages.append(userEl);
  }
  const view = new AnswerView();
  view.startStream();
  ui.messages.append(view.root);
  showEmpty();
  updateRegenerate();
  scrollToEnd(true);
  const job = newJob(convId, view, ctrl);
  job.isNew = isNew;
  job.waited = !!opts.waited;
  // An edit or a regenerate made a new version: shown with its ‹ n/m › once it is stored.
  job.versioned = !!(body.regenerate || body.edit_message_id);
  await follow(job, response, t0, userEl);
}

// Streams one answer into job.view until it ends. The answer is the gateway's, not this
// connection's: when the connection drops mid-answer (network, a gateway restart), it
// re-attaches after the last event it got and goes on; if the answer ended meanwhile, the
// stored conversation is shown. `t0` (null when re-attaching after a reload) times the first
// character; a re-attached view records when its first missed text arrived (data-attach-ms,
// from the page's navigation start; data-attach-sent-ms: when it asked for it).
async function follow(job, response, t0, userEl) {
  const { view } = job;
  state.running = job;
  setRunning(true);
  let final = null;
  let failure = null;
  let ended = false; // the answer ended while no stream was open: the store has it
  let first = true;
  let res = response;
  let attaching = t0 === null; // res is a GET .../live (a 404 then means: it ended)
  const rate = { tokens: 0, t0: 0, shown: 0 }; // the live tokens/s
  for (let attempt = 0; ; attempt++) {
    try {
      for await (const batch of api.events(res, job.cursor)) {
        attempt = 0;
        let text = '';
        for (const ev of batch) {
          if (ev.type === 'start') {
            job.requestId = ev.request_id;
            refreshModels(); // the model that answers is loaded now: the picker says so
            view.root.dataset.id = ev.assistant_message_id;
            if (ev.prefix && !view.root.raw) text += ev.prefix; // a continued answer
            if (userEl && ev.user_message) userEl.dataset.id = ev.user_message.id;
            if (job.stopRequested) api.stop(job.requestId);
            if (job.isNew) {
              // Listed at once (its title is stored by now), not when the answer ends.
              job.isNew = false;
              refreshList().then(() => {
                const c = state.conversations.find((x) => x.id === job.convId);
                if (c && state.convId === job.convId) setTitle(c.title);
              });
            }
          } else if (ev.type === 'queued') {
            view.showQueued(ev.position);
          } else if (ev.type === 'prefill') {
            view.showQueued(0);
          } else if (ev.type === 'progress') {
            view.showReading(ev.prefilled, ev.total);
          } else if (ev.type === 'token') {
            text += ev.text;
            rate.tokens += 1; // live events carry one token each (a re-attach merges a run)
          } else if (ev.type === 'reasoning') {
            view.appendReasoning(ev.text);
          } else if (ev.type === 'tool_call') {
            if (text) view.append(text);
            text = '';
            view.showToolCall(ev.name);
          } else if (ev.type === 'tool_arguments') {
            view.toolArguments(ev.text);
          } else if (ev.type === 'notice') {
            view.showNotice(ev.dropped_messages);
          } else if (ev.type === 'done') {
            final = ev;
          } else if (ev.type === 'error') {
            failure = ev;
            if (ev.content) text = ev.content.slice(view.root.raw.length);
          }
        }
        if (text) {
          const now = performance.now();
          if (!rate.t0) rate.t0 = now;
          if (rate.tokens > 1 && now - rate.t0 > 250 && now - rate.shown > 500) {
            rate.shown = now;
            view.showWriting(((rate.tokens - 1) * 1000) / Math.max(1, now - rate.t0));
          }
          view.append(text);
          if (first) {
            first = false;
            if (t0 !== null) view.root.dataset.firstCharMs = (performance.now() - t0).toFixed(2);
            else view.root.dataset.attachMs = performance.now().toFixed(2);
          }
          scrollToEnd(false);
        }
      }
    } catch (e) {
      if (e.name === 'AbortError') break;
      if (e instanceof api.ApiError) {
        if (e.status === 404 && attaching) ended = true;
        else failure = { message: e.message };
        break;
      }
      // A network error: the connection dropped; re-attach below.
    }
    if (final || failure || job.stopRequested || attempt >= 30) break;
    await sleep(Math.min(2000, 100 * 2 ** attempt));
    res = api.attach(job.convId, job.cursor.lastId + 1, job.ctrl.signal);
    attaching = true;
  }
  // Refused because the only model is still loading: wait for it, then send the same turn again
  // into the same answer row (continue of an answer that failed before its first token).
  if (failure && failure.code === 'unavailable' && !job.stopRequested && !job.waited &&
      (await fetchHealth())?.status === 'loading') {
    if (await waitForModel(view)) {
      state.running = null;
      setRunning(false);
      view.root.remove();
      await run({ continue: true }, null, t0, { waited: true });
      return;
    }
  }
  refreshModels();
  if (final) {
    view.finish(final.status, final.meta || {});
  } else if (failure) {
    view.finish('error', {}, failure.message);
  } else if (!ended) {
    view.finish(job.stopRequested ? 'stopped' : 'interrupted', {});
  }
  state.running = null;
  setRunning(false);
  updateRegenerate();
  if ((ended || job.versioned) && state.convId === job.convId) {
    await openConversation(job.convId);
    return;
  }
  refreshList().then(() => {
    const c = state.conversations.find((x) => x.id === job.convId);
    if (c && state.convId === job.convId) setTitle(c.title);
  });
}

function stopRun() {
  const job = state.running;
  if (!job || job.stopRequested) return;
  job.stopRequested = true;
  if (job.requestId) api.stop(job.requestId);
  // If the server never confirms, stop waiting for it.
  setTimeout(() => {
    if (state.running === job) job.ctrl.abort();
  }, 5000);
}

function send(t0) {
  const text = ui.input.value;
  if (!text.trim() || state.running) return;
  try {
    toolsValue(); // tools that are not JSON: say so and keep the message in the box
  } catch (e) {
    showError(e);
    return;
  }
  ui.input.value = '';
  autosize();
  const body = state.pendingTool ? { tool_result: text } : { content: text };
  run(body, text, t0).catch(showError);
}

function showError(e) {
  state.running = null;
  setRunning(false);
  const v = new AnswerView();
  ui.messages.append(v.root);
  v.finish('error', {}, e.message);
  showEmpty();
}

function autosize() {
  ui.input.style.height = 'auto';
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, window.innerHeight * 0.4)}px`;
}

// ---- events ---------------------------------------------------------------------------------

function closeSidebar() {
  ui.app.classList.remove('side-open');
  ui.scrim.hidden = true;
}

function onMessagesClick(e) {
  const target = e.target;
  if (target.classList.contains('copy-code')) {
    const code = target.parentElement.querySelector('code') || target.parentElement;
    copyText(code.textContent.replace(target.textContent, ''));
    target.textContent = t('copied');
    setTimeout(() => (target.textContent = t('copy')), 1200);
    return;
  }
  const act = target.dataset.act;
  if (!act) return;
  const msg = target.closest('.msg');
  if ((act === 'ver-prev' || act === 'ver-next') && !state.running && target.dataset.target) {
    const convId = state.convId;
    api.call('POST', `/api/conversations/${convId}/branch`, { message_id: Number(target.dataset.target) })
      .then(() => openConversation(convId))
      .catch(showError);
    return;
  }
  if (act === 'copy') {
    copyText(msg.raw || '');
    target.textContent = t('copied');
    setTimeout(() => (target.textContent = t('copy')), 1200);
  } else if (act === 'regen' && !state.running) {
    msg.remove();
    run({ regenerate: true }, null, performance.now()).catch(showError);
  } else if (act === 'continue' && !state.running) {
    msg.remove(); // its text comes back as the start event's prefix
    run({ continue: true }, null, performance.now()).catch(showError);
  } else if (act === 'edit' && !state.running && msg.dataset.id) {
    const bubble = msg.querySelector('.bubble');
    bubble.hidden = true;
    msg.querySelector('.tools').hidden = true;
    const box = editBox(msg.raw);
    msg.append(box);
    box.querySelector('textarea').focus();
  } else if (act === 'edit-cancel') {
    msg.querySelector('.edit-box').remove();
    msg.querySelector('.bubble').hidden = false;
    msg.querySelector('.tools').hidden = false;
  } else if (act === 'edit-save' && !state.running) {
    const text = msg.querySelector('.edit-box textarea').value;
    if (!text.trim()) return;
    const id = Number(msg.dataset.id);
    while (msg.nextSibling) msg.nextSibling.remove();
    msg.remove();
    run({ content: text, edit_message_id: id }, text, performance.now()).catch(showError);
  }
}

async function onListClick(e) {
  const item = e.target.closest('.conv');
  if (!item) return;
  const id = item.dataset.id;
  const act = e.target.dataset.act;
  if (act === 'delete') {
    if (!confirm(t('confirmDelete'))) return;
    await api.call('DELETE', `/api/conversations/${id}`).catch(() => null);
    if (id === state.convId) newChat();
    refreshList();
  } else if (act === 'rename') {
    const title = item.querySelector('.title');
    const input = document.createElement('input');
    input.value = title.textContent;
    title.replaceWith(input);
    input.focus();
    input.select();
    const done = async (save) => {
      if (save && input.value.trim()) {
        await api.call('PATCH', `/api/conversations/${id}`, { title: input.value.trim() });
        if (id === state.convId) setTitle(input.value.trim());
      }
      refreshList();
    };
    input.addEventListener('keydown', (k) => {
      if (k.key === 'Enter') done(true);
      if (k.key === 'Escape') done(false);
    });
    input.addEventListener('blur', () => done(true), { once: true });
  } else if (e.target.tagName !== 'INPUT') {
    openConversation(id);
  }
}

async function exportConversation() {
  if (!state.convId) return;
  const blob = await api.download(`/api/conversations/${state.convId}/export`);
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = `conversation-${state.convId}.json`;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function cycleTheme() {
  const order = ['auto', 'dark', 'light'];
  const cur = localStorage.getItem('glm.theme') || 'auto';
  const next = order[(order.indexOf(cur) + 1) % order.length];
  localStorage.setItem('glm.theme', next);
  applyTheme();
}

// The theme button shows the mode it is in (◐ system, ☾ dark, ☀ light) and names it.
const THEME_ICON = { auto: '◐', dark: '☾', light: '☀' };
const THEME_KEY = { auto: 'themeAuto', dark: 'themeDark', light: 'themeLight' };

function applyTheme() {
  const theme = localStorage.getItem('glm.theme') || 'auto';
  if (theme === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  const b = $('theme-toggle');
  b.textContent = THEME_ICON[theme];
  b.dataset.mode = theme;
  b.dataset.i18nTitle = THEME_KEY[theme];
  b.title = t(THEME_KEY[theme]);
  b.setAttribute('aria-label', b.title);
}

// The model the next answer comes from: the picker's choice when several are served.
function chosenModel() {
  return state.models.length > 1 ? ui.modelPick.value : '';
}

// The picker (several models): each model with its state; the choice is kept in the browser.
function renderModels(models, defaultName) {
  const several = models.length > 1;
  ui.modelPick.hidden = !several;
  if (!several) return;
  const want = ui.modelPick.value || localStorage.getItem('glm.model') || defaultName;
  const label = (m) => {
    const s = m.state === 'loaded' ? '' : m.state === 'loading' ? t('stateLoading') : t('stateUnloaded');
    return s ? `${m.name} (${s})` : m.name;
  };
  ui.modelPick.replaceChildren(...models.map((m) => {
    const o = document.createElement('option');
    o.value = m.name;
    o.textContent = label(m);
    return o;
  }));
  ui.modelPick.value = models.some((m) => m.name === want) ? want : defaultName;
}

async function fetchHealth() {
  try {
    return await (await fetch('/health', { cache: 'no-store' })).json();
  } catch {
    return null;
  }
}

// A message sent while the only model is still loading was refused: wait here, showing the
// load's progress, until /health says ready (then the caller sends it again).
async function waitForModel(view) {
  for (;;) {
    const h = await fetchHealth();
    if (h?.status === 'ready') return true;
    if (h?.status !== 'loading') return false;
    view.stats.textContent = t('loadingModel', { pct: Math.floor(h.load?.percent ?? 0) });
    view.root.dataset.state = 'loading';
    await sleep(500);
  }
}

// The header names the model that answers (from /health) and its state: ready, loading, or
// the engine not answering; a model whose name says it has random weights gets a demo badge.
async function watchHealth() {
  const h = await fetchHealth();
  const ok = applyHealth(h);
  setTimeout(watchHealth, ok ? 15000 : 3000);
}

// Several models: their states change with each answer (a model loads for it, another may be
// unloaded for room), so the picker asks again when an answer starts and ends instead of
// showing a state up to 15 s old.
function refreshModels() {
  if (state.models.length > 1) fetchHealth().then((h) => h && applyHealth(h));
}

// Shows one /health answer; true when the model is ready.
function applyHealth(h) {
  state.health = h;
  state.models = Array.isArray(h?.models) ? h.models : [];
  renderModels(state.models, h?.model || '');
  const changed = modelLabels.current !== (h?.model || '') ||
    modelLabels.several !== state.models.length > 1;
  modelLabels.current = h?.model || '';
  modelLabels.several = state.models.length > 1;
  if (changed) for (const a of ui.messages.querySelectorAll('.msg.assistant')) a.view?.relabel();
  const status = h?.status || 'down';
  const ok = status === 'ready';
  ui.model.hidden = !h?.model || state.models.length > 1;
  ui.demo.hidden = !/random weights/i.test(h?.description || h?.model || '');
  ui.demo.title = t('demoTitle');
  ui.model.textContent = h?.model || '';
  ui.model.dataset.state = status;
  // Where it runs (docs/gpu.md): "cpu" or "vulkan:0 (NVIDIA H200)".
  const where = h?.device ? ` · ${h.device}` : '';
  ui.model.title = h?.model ? `${h.model}${where} · ${t(ok ? 'modelReady' : 'modelLoading')}` : '';
  ui.engine.hidden = ok;
  ui.engine.dataset.i18n = status === 'loading' ? 'modelLoading' : 'engineDown';
  ui.engine.textContent = t(ui.engine.dataset.i18n);
  return ok;
}

// Answers shown before the math bundle arrived are rendered again with their formulas (one
// being written gets them at its final render).
onMathReady(() => {
  for (const a of ui.messages.querySelectorAll('.msg.assistant:not(.streaming)')) {
    if (a.raw && looksLikeMath(a.raw)) setMarkdown(a.querySelector('.bubble'), a.raw, t('copy'));
  }
});

function init() {
  applyTheme();
  applyStatic();
  api.setKeyPrompt(async () => prompt(t('apiKey')));
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    send(performance.now());
  });
  ui.input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      send(performance.now());
    }
  });
  ui.input.addEventListener('input', autosize);
  narrow.addEventListener('change', updateRegenerate);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && state.running) {
      e.preventDefault();
      stopRun();
    }
  });
  ui.stop.addEventListener('click', stopRun);
  ui.messages.addEventListener('click', onMessagesClick);
  ui.list.addEventListener('click', onListClick);
  $('new-chat').addEventListener('click', newChat);
  $('lang-toggle').addEventListener('click', () => {
    toggleLang();
    applyTheme();
    for (const a of ui.messages.querySelectorAll('.msg.assistant')) a.view?.relabel();
    updateRegenerate();
    renderList();
    setTitle(state.conversations.find((c) => c.id === state.convId)?.title || '');
  });
  $('theme-toggle').addEventListener('click', cycleTheme);
  $('settings-toggle').addEventListener('click', () => (ui.settings.hidden = !ui.settings.hidden));
  $('menu-toggle').addEventListener('click', () => {
    ui.app.classList.add('side-open');
    ui.scrim.hidden = false;
  });
  ui.scrim.addEventListener('click', closeSidebar);
  ui.exportBtn.addEventListener('click', () => exportConversation().catch(showError));
  for (const c of [ui.temperature, ui.topP, ui.maxTokens]) {
    c.addEventListener('input', () => {
      showSliderValues();
      localStorage.setItem('glm.params', JSON.stringify(params()));
    });
  }
  ui.system.addEventListener('change', () => localStorage.setItem('glm.system', ui.system.value));
  ui.modelPick.addEventListener('change', () => localStorage.setItem('glm.model', ui.modelPick.value));
  setControls(loadDefaults(), localStorage.getItem('glm.system') || '');
  setTitle('');
  updateRegenerate();
  const id = location.hash.slice(1);
  refreshList().then(() => {
    if (id) openConversation(id);
  });
  watchHealth();
  ui.input.focus();
}

init();
