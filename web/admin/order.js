// order.js: the open order, on the right: its money (amount, refunded,
// net), books, disputes, timeline and open discrepancies, and a refund
// form. It is drawn again after every action on it, whatever payd
// answered, and every few seconds while it is open (see live.js); a
// redraw that changes nothing is skipped, and one never loses a note being
// typed (discrepancies.js keeps them) or the focus.

import { call, send, describe, newKey, NetworkError } from './api.js';
import { h, $, when, badge, idRef, amount } from './dom.js';
import { renderTimeline } from './timeline.js';
import { card } from './discrepancies.js';
import { renderMoney, renderLedger, renderDisputes } from './books.js';

let deps = null; // {checked, say, cardOpts, onShown}
let shown = ''; // the order on screen
let drawn = ''; // payd's answer as last drawn, to skip redraws that change nothing
let asked = 0;

export const shownOrder = () => shown;

export function initOrder(d) {
  deps = d;
  $('refund-form').addEventListener('submit', (e) => {
    e.preventDefault();
    if (!$('refund').disabled) refund();
  });
}

/** closeOrder takes the order off the screen. */
export function closeOrder() {
  shown = '';
  drawn = '';
  $('order').hidden = true;
  $('order-none').hidden = false;
  $('timeline').replaceChildren();
  delete $('timeline').dataset.order;
  deps.onShown('');
}

/** busy: an action on the order is under way; a poll must not redraw under it. */
const busy = () => !!document.querySelector('#order [data-busy], #order button:disabled');

/**
 * openOrder draws order id. quiet (a poll) reports nothing, skips the
 * redraw when payd's answer is what is on screen, and waits while an
 * action is under way.
 */
export async function openOrder(id, { quiet = false } = {}) {
  if (quiet && (busy() || id !== shown)) return;
  // An operator's request outdates every one before it; a poll outdates
  // none, so it can never cover the order an operator just asked for.
  const n = quiet ? asked : ++asked;
  let r;
  try {
    r = deps.checked(await call('GET', `/v1/admin/orders/${encodeURIComponent(id)}`));
  } catch {
    if (!quiet) deps.say('payd did not answer. Is it running?', 'bad');
    return;
  }
  if (n !== asked || (quiet && id !== shown)) return; // a newer request is on its way, or another order is open
  if (r.status !== 200) {
    if (!quiet) deps.say(describe(r), 'bad');
    return;
  }
  const text = JSON.stringify(r.data);
  if (quiet && (text === drawn || busy())) return;
  const fresh = shown !== id;
  shown = id;
  drawn = text;
  draw(r.data, fresh);
  deps.onShown(id);
}

/** minus writes a negative amount with a true minus sign, as the money summary does. */
const minus = (v) => (typeof v === 'string' && v.startsWith('-') ? `\u2212${v.slice(1)}` : v);

function draw(doc, fresh) {
  const o = doc.order;
  // What has the focus, by the record it belongs to, to give it back after.
  const focus = document.activeElement;
  const focusCard = focus && focus.closest && focus.closest('#order-open [data-id]');
  const focusAt = focusCard ? [focusCard.dataset.id, focus.className] : null;

  $('order').hidden = false;
  $('order-none').hidden = true;
  $('order-id').replaceChildren(idRef(o.id, { what: 'order ID' }));
  $('order-amount').textContent = amount(o.amount, o.currency);
  const m = o.money || {};
  $('order-summary').replaceChildren(badge(o.status),
    ` refunded ${amount(m.refunded ?? o.refunded_amount, o.currency)} · net ${amount(minus(m.net), o.currency)}`,
    // A refund in flight is not money yet: said apart, never added in.
    o.refund_pending_amount && Number(o.refund_pending_amount) !== 0 ? ` · ${amount(o.refund_pending_amount, o.currency)} refund pending` : '',
    // A hold is not money yet: what is held, and until when; then what
    // its capture took (ADR 0060).
    o.status === 'authorized' && o.capture_before ? ` · ${amount(o.amount, o.currency)} held until ${when(o.capture_before)}` : '',
    o.capture_method === 'manual' && o.status !== 'authorized' && o.captured_amount && Number(o.captured_amount) !== 0
      ? ` · captured ${amount(o.captured_amount, o.currency)}` : '',
    // Shipping is the merchant's, apart from the money: said once it began.
    o.fulfillment_status && o.fulfillment_status !== 'unfulfilled' ? ` · ${o.fulfillment_status.replace('_', ' ')}` : '',
    ...(o.customer_id ? [' · customer ', idRef(o.customer_id, { what: 'customer ID' })] : [' · guest (created by the merchant)']),
    ` · created ${when(o.created_at)}`,
    // Every order has a client secret, handed to its creator; it opens the
    // order like a token, so operators learn that it exists, never what it is.
    h('span', { class: 'secret-note', title: 'A client secret opens this order for whoever created it (the checkout page, or the merchant\'s server). It is never shown here.' }, ' · client secret issued (not shown)'));
  renderMoney($('money'), o);
  renderLedger($('ledger-rows'), doc);
  $('ledger-table').hidden = !(doc.ledger || []).length;
  $('ledger-empty').hidden = !!(doc.ledger || []).length;
  renderDisputes($('disputes'), doc);
  $('disputes-box').hidden = !(doc.disputes || []).length;
  renderTimeline($('timeline'), doc);
  const open = (doc.discrepancies || []).filter((d) => d.status === 'open');
  document.getElementById('order-open')?.remove();
  if (open.length) {
    $('timeline').after(h('ul', { id: 'order-open', class: 'cards', 'aria-label': 'Open discrepancies of this order' }, open.map((d) => card(d, deps.cardOpts))));
  }
  $('refund-form').hidden = o.status !== 'paid';
  if (fresh) {
    $('refund-result').textContent = '';
    $('refund-result').className = '';
  }
  if (focusAt) {
    const again = document.querySelector(`#order-open [data-id="${focusAt[0]}"] [class="${focusAt[1]}"]`);
    if (again) again.focus();
  }
  $('order').dataset.loaded = `${o.id} ${doc.timeline.length}`;
}

// --- refunding ----------------------------------------------------------

// The refund asked for and its key, kept until payd answers it with a
// success: the same refund asked again (after an error or a lost answer)
// goes with the same key; another amount, reason or order is another intent.
let refundIntent = null;

async function refund() {
  const id = shown;
  const amt = $('refund-amount').value.trim();
  const reason = $('refund-reason').value.trim();
  const what = JSON.stringify([id, amt, reason]);
  if (!refundIntent || refundIntent.what !== what) refundIntent = { what, key: newKey() };
  const out = $('refund-result');
  $('refund').disabled = true; // before any await: a double click is one refund
  out.className = '';
  out.textContent = amt ? `Refunding ${amt}…` : 'Refunding what remains…';
  try {
    const body = { reason };
    if (amt) body.amount = amt;
    const r = deps.checked(await send('POST', `/v1/admin/orders/${encodeURIComponent(id)}/refund`, { key: refundIntent.key, body }));
    if (r.status === 200) {
      refundIntent = null;
      $('refund-amount').value = '';
      $('refund-reason').value = '';
      out.className = 'ok';
      out.textContent = `Refund ${r.data.refund.amount} ${r.data.refund.currency}: ${r.data.refund.status}${r.replayed ? ' (payd replayed its answer)' : ''}.`;
    } else {
      out.className = 'bad';
      out.textContent = describe(r) + (r.status >= 500 ? ' Refunding again with the same amount and reason repeats this request under the same key.' : '');
    }
  } catch (err) {
    out.className = 'bad';
    out.textContent = err instanceof NetworkError
      ? 'payd did not answer. Refund again: the same request is repeated, never a second refund.'
      : String(err);
  } finally {
    $('refund').disabled = false;
  }
  await deps.afterAction(); // the timeline shows what payd did, or refused
}
