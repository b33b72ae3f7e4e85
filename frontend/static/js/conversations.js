// The conversations API (`/api/conversations`), for the sidebar and the
// files strip: list, read one, rename, delete; a conversation's files. Every call is same-origin with the session
// cookie; a failure throws an Error whose message is the server's (or says
// the server could not be reached).

const BASE = '/api/conversations';
export const PAGE_SIZE = 50;

/** A same-origin call with the session cookie: the JSON answered (null for
 * 204); a failure throws an Error with the server's message and `status`.
 * The page's other API modules call through it. */
export async function call(path, options = {}) {
  let response;
  try {
    response = await fetch(new URL(path, window.location.href), {
      credentials: 'same-origin',
      cache: 'no-store',
      ...options,
    });
  } catch {
    throw new Error('The server could not be reached.');
  }
  if (response.status === 204) return null;
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new Error(body?.message ?? `The server answered ${response.status}.`);
    error.status = response.status;
    throw error;
  }
  return body;
}

/** The newest conversations: `{items: [{id, title, created_at, updated_at,
 * origin}], next}`; only those started by `origins` (names) if given. */
export function listConversations(cursor = null, origins = null) {
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (cursor) query.set('cursor', cursor);
  if (origins) query.set('origin', origins.join(','));
  return call(`${BASE}?${query}`);
}

/** The conversations matching `q`, best first: `{items: [{id, title, …,
 * match: {in, position, snippet}}]}` (the snippet's matches between « »). */
export function searchConversations(q, limit = 30, origins = null) {
  const query = new URLSearchParams({ q, limit: String(limit) });
  if (origins) query.set('origin', origins.join(','));
  return call(`${BASE}?${query}`);
}

/** One conversation with its messages and runs (each run's `request` and `mode`). */
export function getConversation(id) {
  return call(`${BASE}/${encodeURIComponent(id)}`);
}

export function renameConversation(id, title) {
  return call(`${BASE}/${encodeURIComponent(id)}`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ title }),
  });
}

/** `keepalive`: the request outlives the page (a delete due as the tab closes). */
export function deleteConversation(id, { keepalive = false } = {}) {
  return call(`${BASE}/${encodeURIComponent(id)}`, { method: 'DELETE', keepalive });
}

/** The conversation's files: `{items: [FileInfo, …]}`. */
export function listFiles(id) {
  return call(`${BASE}/${encodeURIComponent(id)}/files`);
}

/** Upload `file` (a File) to conversation `id`: the stored `FileInfo`. */
export function uploadFile(id, file) {
  const form = new FormData();
  form.append('file', file, file.name);
  return call(`${BASE}/${encodeURIComponent(id)}/files`, { method: 'POST', body: form });
}

/** Where a file of conversation `id` downloads from. */
export function fileUrl(id, fileId) {
  return `${BASE}/${encodeURIComponent(id)}/files/${encodeURIComponent(fileId)}`;
}

/** The conversation the page's URL names (`/c/<id>`), or null. */
export function conversationInUrl(location = window.location) {
  const match = /^\/c\/([0-9a-f]{32})\/?$/.exec(location.pathname);
  return match ? match[1] : null;
}

export function urlOf(id) {
  return id ? `/c/${id}` : '/';
}

/** Where the conversation forks and the versions at each fork: `{forks: [{fork_at, run_id, current, versions}]}`. */
export function listBranches(id) {
  return call(`${BASE}/${encodeURIComponent(id)}/branches`);
}
