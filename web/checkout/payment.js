// payment.js: the frontend half of payd's idempotency promise.
//
// A payment intent is one decision of the customer to pay an order with a
// method. It gets one idempotency key (a UUID v4), saved in localStorage
// with the order ID *before* the first request leaves, and every retry of
// that intent — after a network error, a 409 "in use", a 5xx or a page
// reload — sends the same key, so payd executes it at most once. Only a
// deliberate new click after a decline (or a refused request) starts a new
// intent with a new key.
//
// Outcomes are never guessed: when the page does not know what became of a
// request, it asks payd (GET /v1/requests/{key} and GET /v1/orders/{id}).

import { NetworkError, backoff, describe, sleep } from './api.js';

const INTENT = 'payd.checkout.intent';
const MAX_RETRIES = 6; // network errors and 5xx in a row before handing back to the customer
const MAX_IN_USE = 20; // 409 idempotency_key_in_use waits before handing back

/** savedIntent is the stored intent, or null. */
export function savedIntent() {
  try {
    return JSON.parse(localStorage.getItem(INTENT)) || null;
  } catch {
    return null;
  }
}

export function saveIntent(intent) {
  localStorage.setItem(INTENT, JSON.stringify(intent));
}

export function forgetIntent() {
  localStorage.removeItem(INTENT);
}

/** open reports whether intent is a payment whose outcome is not yet known. */
export const isOpen = (intent, orderId) => !!intent && intent.orderId === orderId && intent.status === 'open';

/**
 * intentFor returns the intent a click on Pay sends: the open one for this
 * order if there is one (a retry), else a new one with a new key.
 */
export function intentFor(orderId, method) {
  const saved = savedIntent();
  if (isOpen(saved, orderId)) return saved;
  const intent = { orderId, key: crypto.randomUUID(), method, status: 'open' };
  saveIntent(intent); // stored before the request leaves: a reload can always find it
  return intent;
}

/**
 * pay sends the intent's pay request until payd answers something the page
 * can act on, and returns an outcome:
 *   {kind: 'paid', order} (paid, or authorized: its money held) · {kind: 'processing'} · {kind: 'declined', problem}
 *   {kind: 'check'} (ask payd what happened) · {kind: 'unreachable'}
 *   {kind: 'refused', problem} (payd would not run it; a new click may try anew)
 */
export async function pay(client, intent, progress) {
  const path = `/v1/orders/${encodeURIComponent(intent.orderId)}/pay`;
  let retries = 0;
  let waits = 0;
  for (;;) {
    let r;
    try {
      r = await client.call('POST', path, { key: intent.key, body: { payment_method: intent.method } });
    } catch (err) {
      if (!(err instanceof NetworkError) || ++retries > MAX_RETRIES) return { kind: 'unreachable' };
      progress(`The connection dropped. Trying again with the same payment key (retry ${retries})…`);
      await sleep(backoff(retries));
      continue;
    }
    const code = r.data && r.data.code;
    if (r.status === 200) return { kind: 'paid', order: r.data };
    if (r.status === 202) return { kind: 'processing', action: r.data && r.data.next_action };
    if (r.status === 402) return { kind: 'declined', problem: describe(r) };
    if (r.status === 409 && code === 'idempotency_key_in_use') {
      // An earlier send of this very intent is still running. Never resend
      // before Retry-After; meanwhile the order's stream may bring the outcome.
      if (++waits > MAX_IN_USE) return { kind: 'unreachable' };
      progress('Your payment is still being processed. Waiting for it…', 'processing');
      if (await settledWithin(client, intent.orderId, r.retryAfter ?? backoff(waits))) return { kind: 'check' };
      continue;
    }
    if (r.status === 409 && (code === 'order_payment_in_progress' || code === 'order_already_paid')) {
      return { kind: 'check' }; // the order is taken: find out by whom and how it ends
    }
    if (r.status >= 500 || r.status === 429 || r.status === 408) {
      if (++retries > MAX_RETRIES) return { kind: 'unreachable' };
      progress('The payment service is busy. Trying again with the same payment key…');
      await sleep(r.retryAfter ?? backoff(retries));
      continue;
    }
    return { kind: 'refused', problem: describe(r) };
  }
}

/**
 * check asks payd what became of the intent: the idempotency record says
 * what happened to this key, the order says where the money stands (and
 * wins). Returns an outcome as pay does, plus {kind: 'waiting'} (payd is
 * still working on the request), {kind: 'closed', order} (cancelled or
 * expired) and {kind: 'unsent'} (payd never ran it; resending the same key
 * is safe).
 */
export async function check(client, intent) {
  const [rec, o] = await Promise.all([
    client.call('GET', `/v1/requests/${encodeURIComponent(intent.key)}`),
    client.call('GET', `/v1/orders/${encodeURIComponent(intent.orderId)}`),
  ]);
  if (o.status >= 500 || rec.status >= 500) throw new NetworkError(`payd answered ${o.status}/${rec.status}`);
  if (o.status !== 200) return { kind: 'refused', problem: describe(o) };
  const order = o.data;
  if (order.status === 'paid' || order.status === 'refunded' || order.status === 'authorized') return { kind: 'paid', order };
  if (order.status === 'cancelled' || order.status === 'expired') return { kind: 'closed', order };
  if (order.status === 'processing') return { kind: 'processing' };
  // pending: this key's payment was declined, is yet to claim the order, or never ran.
  const stored = rec.status === 200 && rec.data ? rec.data : null;
  if (stored && stored.response && stored.response.status === 402) {
    return { kind: 'declined', problem: describe({ status: 402, data: stored.response.body }) };
  }
  const mine = (order.attempts || []).filter((a) => a.request_id === intent.key).pop();
  if (mine && mine.status === 'failed') {
    return { kind: 'declined', problem: { title: 'Payment declined', detail: 'The payment was declined. Try another payment method.' } };
  }
  if (stored && stored.status === 'processing') return { kind: 'waiting' };
  return { kind: 'unsent' };
}

/**
 * settle drives an outcome to a final one: it follows the order while the
 * payment is processing and asks payd whenever the page cannot know.
 * It never sends a pay request: only the customer's click does that.
 */
export async function settle(client, intent, outcome, progress) {
  let failures = 0;
  let waits = 0;
  for (;;) {
    try {
      switch (outcome.kind) {
        case 'processing':
          progress('Waiting for the bank to confirm the payment…', 'processing');
          await follow(client, intent.orderId);
          outcome = await check(client, intent);
          break;
        case 'waiting':
          if (++waits > 10) return { kind: 'unsent' }; // resending the same key will take the request over
          progress('Your payment is being processed…', 'processing');
          await sleep(1000);
          outcome = await check(client, intent);
          break;
        case 'check':
          progress('Checking on your payment…', 'checking');
          outcome = await check(client, intent);
          break;
        default:
          return outcome;
      }
      failures = 0;
    } catch (err) {
      if (!(err instanceof NetworkError) || ++failures > MAX_RETRIES) return { kind: 'unreachable' };
      progress('Connection lost. Reconnecting…');
      await sleep(backoff(failures));
      outcome = { kind: 'check' };
    }
  }
}

/**
 * settledWithin resolves true if the order reaches an outcome within ms
 * (paid or closed, or back to pending after processing: a decline), and
 * false once ms have passed without one.
 */
async function settledWithin(client, orderId, ms) {
  const stop = new AbortController();
  const timeUp = sleep(ms).then(() => false);
  let claimed = false;
  const outcome = (o) => {
    if (o.status === 'processing') claimed = true;
    return o.status !== 'processing' && (o.status !== 'pending' || claimed);
  };
  const watched = client.watch(orderId, outcome, stop.signal).then(
    (o) => (o ? true : timeUp),
    () => timeUp, // no stream: just wait as told
  );
  try {
    return await Promise.race([timeUp, watched]);
  } finally {
    stop.abort();
  }
}

/**
 * follow returns once the order has left 'processing', as told by its event
 * stream; if the stream fails it falls back to polling the order, and
 * reconnects. Network errors from polling propagate to settle's retry.
 */
async function follow(client, orderId) {
  for (let n = 1; ; n++) {
    try {
      if (await client.watch(orderId, (o) => o.status !== 'processing')) return;
    } catch (err) {
      if (!(err instanceof NetworkError)) throw err;
    }
    const r = await client.call('GET', `/v1/orders/${encodeURIComponent(orderId)}`);
    if (r.status !== 200 || r.data.status !== 'processing') return; // check() reads the details
    await sleep(backoff(Math.min(n, 4)));
  }
}
