// Interface strings, Chinese first, English on request (saved in localStorage).
const STRINGS = {
  zh: {
    newChat: '新对话',
    conversations: '对话',
    send: '发送',
    stop: '停止',
    placeholder: '输入消息，Enter 发送，Shift+Enter 换行，Esc 停止',
    placeholderShort: '输入消息',
    settings: '设置',
    systemPrompt: '系统提示词',
    systemPlaceholder: '例如：你是一个乐于助人的助手。',
    temperature: '温度',
    topP: 'Top P',
    maxTokens: '最大生成长度',
    close: '关闭',
    copy: '复制',
    copied: '已复制',
    edit: '编辑',
    regenerate: '重新生成',
    continueAnswer: '继续生成',
    saveSend: '保存并发送',
    cancel: '取消',
    rename: '重命名',
    delete: '删除',
    export: '导出',
    confirmDelete: '删除这个对话？此操作无法撤销。',
    untitled: '未命名对话',
    empty: '有什么可以帮你的？',
    stopped: '已停止',
    error: '出错',
    interrupted: '已中断',
    trimmed: '较早的对话已被截断以适应上下文长度',
    ttft: '首字',
    tokS: '词元/秒',
    tokens: '词元',
    cached: '缓存',
    queued: '排队中，前面还有 {n} 个请求',
    reading: '正在读取提示 {pct}%',
    writing: '正在生成 · {rate} 词元/秒',
    language: 'English',
    theme: '主题',
    themeAuto: '主题：跟随系统',
    themeDark: '主题：深色',
    themeLight: '主题：浅色',
    cutOff: '已截断',
    prevVersion: '上一个版本',
    nextVersion: '下一个版本',
    cutOffTitle: '达到最大生成长度，点“继续生成”接着写',
    modelLoading: '加载中',
    loadingModel: '正在加载模型 {pct}%，加载完成后自动发送',
    demo: '随机权重 · 演示',
    demoTitle: '这个模型的权重是随机生成的（glmserve gen-model），回答没有意义，仅用于演示整个流程',
    pickModel: '选择模型',
    stateUnloaded: '未加载',
    stateLoading: '加载中',
    modelReady: '就绪',
    apiKey: '此服务需要 API 密钥，请输入：',
    engineDown: '推理引擎未就绪',
    menu: '菜单',
    tools: '工具（JSON，OpenAI 格式）',
    toolsPlaceholder: '[{"type": "function", "function": {"name": "get_weather", "parameters": {...}}}]',
    badTools: '工具不是有效的 JSON 数组',
    toolCall: '调用工具',
    thinking: '思考过程',
    toolResult: '工具结果',
    toolResultPlaceholder: '输入 {name} 的返回结果（JSON 或文本），Enter 发送',
  },
  en: {
    newChat: 'New chat',
    conversations: 'Conversations',
    send: 'Send',
    stop: 'Stop',
    placeholder: 'Message. Enter sends, Shift+Enter for a new line, Esc stops',
    placeholderShort: 'Message',
    settings: 'Settings',
    systemPrompt: 'System prompt',
    systemPlaceholder: 'e.g. You are a helpful assistant.',
    temperature: 'Temperature',
    topP: 'Top P',
    maxTokens: 'Max tokens',
    close: 'Close',
    copy: 'Copy',
    copied: 'Copied',
    edit: 'Edit',
    regenerate: 'Regenerate',
    saveSend: 'Save & send',
    cancel: 'Cancel',
    rename: 'Rename',
    delete: 'Delete',
    export: 'Export',
    confirmDelete: 'Delete this conversation? This cannot be undone.',
    untitled: 'Untitled',
    empty: 'How can I help?',
    stopped: 'stopped',
    error: 'error',
    interrupted: 'interrupted',
    continueAnswer: 'Continue',
    trimmed: 'Older turns were trimmed to fit the context',
    ttft: 'TTFT',
    tokS: 'tok/s',
    tokens: 'tokens',
    cached: 'cached',
    queued: 'Queued, {n} ahead',
    reading: 'Reading the prompt {pct}%',
    writing: 'Writing · {rate} tok/s',
    language: '中文',
    theme: 'Theme',
    themeAuto: 'Theme: system',
    themeDark: 'Theme: dark',
    themeLight: 'Theme: light',
    cutOff: 'cut off',
    prevVersion: 'Previous version',
    nextVersion: 'Next version',
    cutOffTitle: 'Reached the max tokens; Continue writes on',
    modelLoading: 'loading',
    loadingModel: 'Loading the model {pct}%; the message goes out when it is ready',
    demo: 'random weights — demo',
    demoTitle: 'This model has random weights (glmserve gen-model): its answers mean nothing; it shows the whole path working',
    pickModel: 'Model',
    stateUnloaded: 'not loaded',
    stateLoading: 'loading',
    modelReady: 'ready',
    apiKey: 'This server needs an API key:',
    engineDown: 'The engine is not ready',
    menu: 'Menu',
    tools: 'Tools (JSON, OpenAI format)',
    toolsPlaceholder: '[{"type": "function", "function": {"name": "get_weather", "parameters": {...}}}]',
    badTools: 'Tools are not a valid JSON array',
    toolCall: 'Tool call',
    thinking: 'Thinking',
    toolResult: 'Tool result',
    toolResultPlaceholder: 'Result of {name} (JSON or text). Enter sends',
  },
};

// A saved choice wins; else the browser's language (Chinese for zh-*, English otherwise).
function initialLang() {
  const saved = localStorage.getItem('glm.lang');
  if (saved === 'en' || saved === 'zh') return saved;
  return (navigator.language || 'zh').toLowerCase().startsWith('zh') ? 'zh' : 'en';
}

let lang = initialLang();

export function t(key, vars) {
  let s = STRINGS[lang][key] ?? key;
  if (vars) for (const [k, v] of Object.entries(vars)) s = s.replace(`{${k}}`, String(v));
  return s;
}

export function currentLang() {
  return lang;
}

export function toggleLang() {
  lang = lang === 'zh' ? 'en' : 'zh';
  localStorage.setItem('glm.lang', lang);
  applyStatic();
}

// Fills every [data-i18n] (text), [data-i18n-placeholder] and [data-i18n-title] element.
export function applyStatic(root = document) {
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  for (const el of root.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of root.querySelectorAll('[data-i18n-placeholder]')) {
    el.placeholder = t(el.dataset.i18nPlaceholder);
  }
  for (const el of root.querySelectorAll('[data-i18n-title]')) {
    el.title = t(el.dataset.i18nTitle);
    el.setAttribute('aria-label', el.title);
  }
}
