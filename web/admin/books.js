// books.js: an order's books as payd adds them up (GET /v1/admin/orders/{id}):
// the money summary on the order, the ledger's entries (every movement of
// money, whoever moved it) and the customers' disputes, each with when its
// evidence is due and where to answer it (disputes.js).

import { h, when, badge, withIds, stored } from './dom.js';
import { dueOf, providerLink } from './disputes.js';

const sums = [['charged', 'Charged'], ['refunded', 'Refunded'], ['disputed', 'Disputed'], ['lost', 'Lost'], ['net', 'Net']];

/**
 * renderMoney draws order.money into the element dl, each sum with its
 * currency. A sum below zero (a net, when refunds and lost disputes took
 * back more than was charged) is marked negative and written with a true
 * minus sign, which a hyphen is too easily misread as.
 */
export function renderMoney(dl, order) {
  const m = order.money || {};
  dl.replaceChildren(...sums.map(([key, label]) => {
    const v = m[key];
    const negative = typeof v === 'string' && v.startsWith('-');
    return h('div', { class: `sum sum-${key}${negative ? ' negative' : ''}`, dataset: { sum: key, value: v ?? '' } },
      h('dt', {}, label),
      h('dd', { class: 'num' }, v === undefined ? '—' : `${negative ? `\u2212${v.slice(1)}` : v} ${order.currency}`));
  }));
}

/** renderLedger draws doc.ledger as table rows into tbody. */
export function renderLedger(tbody, doc) {
  tbody.replaceChildren(...(doc.ledger || []).map((e) =>
    h('tr', { dataset: { id: e.id, kind: e.kind, source: e.source } },
      h('td', {}, e.kind.replaceAll('_', ' ')),
      h('td', { class: 'num' }, `${e.amount} ${e.currency}`),
      h('td', {}, stored(e.source), e.actor ? [' (', stored(e.actor), ')'] : null),
      h('td', { class: 'when' }, h('time', { datetime: e.created_at }, when(e.created_at))),
      h('td', { class: 'note' }, withIds(e.note || '')))));
}

/**
 * renderDisputes draws doc.disputes as cards into ul: each with when its
 * evidence is due and a link to answer it at the provider (disputes.js).
 */
export function renderDisputes(ul, doc) {
  const now = Date.now();
  ul.replaceChildren(...(doc.disputes || []).map((d) => {
    const due = dueOf(d, now);
    return h('li', { class: 'card dispute', dataset: { id: d.id, status: d.status } },
      h('div', {}, badge(d.status), ' ', h('strong', {}, `${d.amount} ${d.currency}`),
        d.reason ? [' · ', stored(d.reason)] : ''),
      h('div', { class: 'meta' }, 'dispute ', withIds(d.id), ' · charge ', withIds(d.charge_id), ` · opened ${when(d.opened_at)}`,
        d.closed_at ? ` · closed ${when(d.closed_at)}` : ' · not decided yet'),
      h('div', { class: `meta due ${due.tone}`.trim() }, `evidence due: ${due.text}`,
        d.provider_url ? [' · ', providerLink(d, 'answer at the provider')] : ''));
  }));
}
