// api.js: talking to payd. Every call carries the customer's token in the
// Authorization header (never in a URL, where logs and history keep it), and
// every answer comes back as {status, data, retryAfter, replayed}. A request
// that got no answer at all throws NetworkError, which callers retry with the
// same idempotency key.

/** NetworkError: the request may or may not have reached payd; only a retry with the same key is safe. */
export class NetworkError extends Error {}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Backoff for the n-th retry (1-based): 0.5s, 1s, 2s, 4s, then 5s, with jitter so tabs don't retry in step. */
export function backoff(n) {
  const base = Math.min(500 * 2 ** (n - 1), 5000);
  return base / 2 + Math.random() * (base / 2);
}

/** Client is payd's API as one customer sees it. */
export class Client {
  constructor(token) {
    this.token = token;
  }

  headers(extra) {
    const h = { Accept: 'application/json', ...extra };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  /** call sends one request; key, when given, is the Idempotency-Key. */
  async call(method, path, { key, body } = {}) {
    const extra = {};
    if (key) extra['Idempotency-Key'] = key;
    if (body !== undefined) extra['Content-Type'] = 'application/json';
    let res, text;
    try {
      res = await fetch(path, {
        method,
        headers: this.headers(extra),
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
        credentials: 'omit',
      });
      text = await res.text(); // a reply cut halfway is as lost as no reply
    } catch (err) {
      throw new NetworkError(String(err));
    }
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null; // e.g. a proxy's HTML error page: describe() falls back to the status
    }
    return {
      status: res.status,
      data,
      retryAfter: retryAfterMs(res.headers.get('Retry-After')),
      replayed: res.headers.get('Idempotent-Replayed') === 'true',
    };
  }

  /**
   * watch reads the order's event stream (GET /v1/orders/{id}/events) and
   * returns the first order for which done(order) is true, or null when the
   * stream ends first; signal aborts it. fetch() rather than EventSource,
   * because EventSource cannot send the Authorization header.
   */
  async watch(orderId, done, signal) {
    let res;
    try {
      res = await fetch(`/v1/orders/${encodeURIComponent(orderId)}/events`, {
        headers: this.headers({ Accept: 'text/event-stream' }),
        cache: 'no-store',
        credentials: 'omit',
        signal,
      });
    } catch (err) {
      throw new NetworkError(String(err));
    }
    if (!res.ok || !res.body) throw new NetworkError(`event stream answered ${res.status}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    try {
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (err) {
          throw new NetworkError(String(err));
        }
        if (chunk.done) return null;
        buf += chunk.value.replace(/\r\n?/g, '\n');
        for (let end; (end = buf.indexOf('\n\n')) >= 0; ) {
          const data = eventData(buf.slice(0, end));
          buf = buf.slice(end + 2);
          if (!data) continue; // a keep-alive comment
          const order = JSON.parse(data);
          if (done(order)) return order;
        }
      }
    } finally {
      reader.cancel().catch(() => {}); // closes the stream on the server too
    }
  }
}

/**
 * send is call with retries for requests that carry an idempotency key
 * (registration, order creation): network errors and 5xx are retried with
 * the same key, so payd does the work once. It throws NetworkError when
 * payd stays out of reach.
 */
export async function send(client, method, path, opts, tries = 4) {
  for (let n = 1; ; n++) {
    try {
      const r = await client.call(method, path, opts);
      if (r.status < 500 || n >= tries) return r;
      await sleep(r.retryAfter ?? backoff(n));
    } catch (err) {
      if (!(err instanceof NetworkError) || n >= tries) throw err;
      await sleep(backoff(n));
    }
  }
}

/** eventData joins the data: lines of one server-sent event. */
function eventData(frame) {
  return frame
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).replace(/^ /, ''))
    .join('\n');
}

function retryAfterMs(value) {
  if (!value) return null;
  const secs = Number(value);
  if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

// Plain words for decline codes payd passes on from the provider.
const declineWords = {
  insufficient_funds: 'The card does not have enough funds for this order.',
};

/**
 * describe turns an answer into {title, detail} a customer can read: the
 * problem's own title and detail when payd sent one (RFC 9457), plain
 * words for the status otherwise.
 */
export function describe(reply) {
  const p = reply.data && typeof reply.data === 'object' ? reply.data : {};
  if (p.title) {
    const detail = [p.detail, declineWords[p.decline_code]].filter(Boolean).join(' ');
    return { title: p.title, detail, code: p.code || '' };
  }
  if (reply.status >= 500) {
    return { title: 'Something went wrong on our side', detail: 'Please try again in a moment.', code: '' };
  }
  return { title: `Request failed (${reply.status})`, detail: 'Please try again.', code: '' };
}
