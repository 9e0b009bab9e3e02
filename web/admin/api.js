// api.js: the console talking to payd's admin API. The operator token is
// kept in sessionStorage (gone when the tab closes) and sent only in the
// Authorization header, never in a URL, where logs and history keep it.
// Every answer comes back as {status, data, replayed}; a request that got
// no answer at all throws NetworkError, which callers retry with the same
// idempotency key.

const tokenSlot = 'payd.admin.token';

/** NetworkError: the request may or may not have reached payd; only a retry with the same key is safe. */
export class NetworkError extends Error {}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const savedToken = () => sessionStorage.getItem(tokenSlot) || '';
export const saveToken = (t) => sessionStorage.setItem(tokenSlot, t);
export const forgetToken = () => sessionStorage.removeItem(tokenSlot);

/**
 * call sends one request to payd. key, when given, is the Idempotency-Key;
 * body is sent as JSON, form (a FormData) as multipart.
 */
export async function call(method, path, { key, body, form } = {}) {
  const headers = { Accept: 'application/json', Authorization: `Bearer ${savedToken()}` };
  if (key) headers['Idempotency-Key'] = key;
  let payload;
  if (form) {
    payload = form; // the browser writes the multipart Content-Type with its boundary
  } else if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let res, text;
  try {
    res = await fetch(path, { method, headers, body: payload, cache: 'no-store', credentials: 'omit' });
    text = await res.text(); // a reply cut halfway is as lost as no reply
  } catch (err) {
    throw new NetworkError(String(err));
  }
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  return { status: res.status, data, replayed: res.headers.get('Idempotent-Replayed') === 'true' };
}

/**
 * send is call for a request that changes something: it carries the
 * intent's key and is retried with that same key after a network error or
 * a 5xx, so payd does the work once however often the answer is lost.
 */
export async function send(method, path, opts, tries = 4) {
  for (let n = 1; ; n++) {
    try {
      const r = await call(method, path, opts);
      if (r.status < 500 || n >= tries) return r;
    } catch (err) {
      if (!(err instanceof NetworkError) || n >= tries) throw err;
    }
    await sleep(Math.min(500 * 2 ** (n - 1), 4000));
  }
}

/** describe turns a failed answer into one line in payd's own words (RFC 9457). */
export function describe(reply) {
  const p = reply.data && typeof reply.data === 'object' ? reply.data : {};
  if (reply.status === 401) return 'payd did not accept this operator token (401). Sign in again.';
  if (p.title) {
    const fields = (p.errors || []).map((e) => `${e.param}: ${e.detail}`).join('; ');
    return [`${p.title} (${reply.status} ${p.code || ''})`.replace(' )', ')'), p.detail, fields].filter(Boolean).join(' — ');
  }
  return `payd answered ${reply.status}.`;
}

/** newKey is a fresh idempotency key: one per operator intent. */
export const newKey = () => crypto.randomUUID();
