// disputes.js: customers' disputes of their charges with their banks
// (GET /v1/admin/disputes), newest first, each with its order, amount,
// reason, status, when the provider wants the merchant's evidence and a
// link to the dispute at the provider, where it is answered: payd keeps
// the books of a dispute, the provider takes the evidence. The "Open
// disputes" tile leads here (showOpenDisputes).

import { h, $, when, badge, idRef, stored } from './dom.js';
import { call, describe } from './api.js';
import { showSection } from './nav.js';

let cursor = null;
let asked = 0; // only the newest request's answer is drawn
let deps = { checked: (r) => r, openOrder: () => {} };

/** initDisputes takes what the list needs from the page: checked, openOrder. */
export function initDisputes(d) {
  deps = { ...deps, ...d };
}

const day = 24 * 3600 * 1000;

/**
 * dueOf says when a dispute's evidence is due: for an open one, also how
 * long is left (or that the date has passed), with a tone for its colour;
 * a decided one only the date. A provider that named no date says so.
 */
export function dueOf(d, now = Date.now()) {
  if (!d.evidence_due_by) return { text: 'no date named', tone: 'none' };
  const at = when(d.evidence_due_by);
  if (d.status !== 'open') return { text: at, tone: '' };
  const left = Date.parse(d.evidence_due_by) - now;
  if (left < 0) return { text: `${at} · overdue`, tone: 'bad-text' };
  const days = Math.floor(left / day);
  const words = days >= 1 ? `${days} ${days === 1 ? 'day' : 'days'} left` : `${Math.max(1, Math.floor(left / 3600000))} h left`;
  return { text: `${at} · ${words}`, tone: days < 3 ? 'bad-text' : '' };
}

/**
 * providerLink is the dispute at the provider: its ID, linked to where
 * it is answered when payd knows the place (Stripe's dashboard, the
 * sandbox's record), in a new tab. Only an http(s) address is a link.
 * With label, the link reads label instead, and there is none without a
 * place.
 */
export function providerLink(d, label = null) {
  const text = label || h('code', { class: 'provider-id' }, stored(d.id));
  if (!d.provider_url || !/^https?:\/\//.test(d.provider_url)) return label ? null : text;
  return h('a', { class: 'provider', href: d.provider_url, target: '_blank', rel: 'noopener noreferrer',
    title: `Answer dispute ${d.id} at the provider` }, text, ' ↗');
}

/**
 * disputeCard draws listed dispute d: its status, amount and reason; when
 * its evidence is due; its ID at the provider with the link to answer it
 * there; its order (which opens) and when it opened and closed.
 */
function disputeCard(d, now) {
  const due = dueOf(d, now);
  return h('li', { class: 'card dispute', dataset: { id: d.id, status: d.status, order: d.order_id } },
    h('div', { class: 'head' }, badge(d.status), ' ', h('strong', { class: 'amount' }, `${d.amount} ${d.currency}`), ' · ',
      h('span', { class: 'reason' }, d.reason ? stored(d.reason.replaceAll('_', ' ')) : 'no reason given')),
    h('div', { class: `meta due ${due.tone}`.trim() }, 'evidence due ',
      d.evidence_due_by ? h('time', { datetime: d.evidence_due_by }, due.text) : due.text),
    h('div', { class: 'meta' }, 'dispute ', idRef(d.id, { what: 'dispute ID' }),
      d.provider_url ? [' · ', providerLink(d, 'answer at the provider')] : ' · no link to the provider'),
    h('div', { class: 'meta' }, 'order ', idRef(d.order_id, { what: 'order ID', open: deps.openOrder, cls: 'open-order' }),
      ' · opened ', h('time', { class: 'opened', datetime: d.opened_at }, when(d.opened_at)),
      ' · ', d.closed_at ? ['closed ', h('time', { class: 'closed', datetime: d.closed_at }, when(d.closed_at))] : h('span', { class: 'closed' }, 'not decided')));
}

/** showOpenDisputes lists the open disputes and brings the list into view. */
export function showOpenDisputes() {
  $('dp-status').value = 'open';
  showSection('disputes-section');
  return loadDisputes();
}

/** loadDisputes draws the first page again, or the next one (more). */
export async function loadDisputes(more = false) {
  const q = new URLSearchParams({ limit: '20' });
  if ($('dp-status').value) q.set('status', $('dp-status').value);
  if (more && cursor) q.set('cursor', cursor);
  const n = ++asked;
  const r = deps.checked(await call('GET', `/v1/admin/disputes?${q}`));
  if (n !== asked) return;
  const list = $('dp-list');
  if (r.status !== 200) {
    list.replaceChildren();
    $('dp-more').hidden = true;
    $('dp-empty').hidden = false;
    $('dp-empty').textContent = r.status === 404 || r.status === 405
      ? 'This payd shows disputes only on their order.' : describe(r);
    return;
  }
  if (!more) list.replaceChildren();
  const now = Date.now();
  for (const d of r.data.data) list.append(disputeCard(d, now));
  cursor = r.data.next_cursor;
  $('dp-more').hidden = !cursor;
  $('dp-empty').hidden = list.children.length !== 0;
  $('dp-empty').textContent = $('dp-status').value === 'open' ? 'No open dispute: nothing to answer.' : 'None.';
  list.dataset.loaded = String(list.children.length);
}
