// The gateway's page API (docs/gateway.md): JSON calls and the streaming chat (SSE over fetch,
// since EventSource cannot POST), which re-attaches to a running answer by event id.

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let apiKey = localStorage.getItem('glm.apiKey') || '';
let askKey = null; // set by the app: () => Promise<string|null>

export function setKeyPrompt(fn) {
  askKey = fn;
}

function headers(json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

async function fetchWithKey(path, init) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const res = await fetch(path, { ...init, headers: headers(init.body !== undefined) });
    if (res.status !== 401 || !askKey) return res;
    const key = await askKey();
    if (!key) return res;
    apiKey = key;
    localStorage.setItem('glm.apiKey', key);
  }
  return fetch(path, { ...init, headers: headers(init.body !== undefined) });
}

async function errorOf(res) {
  let message = `HTTP ${res.status}`;
  let code = '';
  try {
    const j = await res.json();
    if (j.error) {
      message = j.error.message || message;
      code = j.error.code || '';
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(res.status, message, code);
}

export async function call(method, path, body) {
  const init = { method };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetchWithKey(path, init);
  if (!res.ok) throw await errorOf(res);
  return res.json();
}

export async function download(path) {
  const res = await fetchWithKey(path, { method: 'GET' });
  if (!res.ok) throw await errorOf(res);
  return res.blob();
}

// Starts the page chat request at once (the fetch is in flight when this returns), so the
// caller can build its DOM while the request travels.
export function openChat(conversationId, body, signal) {
  return fetchWithKey(`/api/conversations/${conversationId}/chat`, {
    method: 'POST',
    body: JSON.stringify(body),
    signal,
  });
}

// Follows the answer being generated in a conversation from event id `from` on (after a reload
// or a dropped connection): the same stream as openChat's. 404 = it ended (the stored
// conversation has it).
export function attach(conversationId, from, signal) {
  return fetchWithKey(`/api/conversations/${conversationId}/live?from=${from}`, {
    method: 'GET',
    signal,
  });
}

// Yields the SSE events of a chat response as they arrive, in batches: one network read may
// hold several events, handed over together so the page renders once per read. `cursor.lastId`
// follows the id of the last event read (where a re-attach starts again).
export async function* events(resPromise, cursor = {}) {
  const res = await resPromise;
  if (!res.ok) throw await errorOf(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let end;
    const batch = [];
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let data = null;
      for (const line of frame.split('\n')) {
        if (line.startsWith('data: ')) data = line.slice(6);
        else if (line.startsWith('id: ')) cursor.lastId = Number(line.slice(4));
      }
      if (data !== null) batch.push(JSON.parse(data));
    }
    if (batch.length) yield batch;
  }
}

export function stop(requestId) {
  return call('POST', '/api/stop', { request_id: requestId }).catch(() => null);
}
