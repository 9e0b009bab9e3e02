// books.js: an order's books as payd adds them up (GET /v1/admin/orders/{id}):
// the money summary on the order, the ledger's entries (every movement of
// money, whoever moved it) and the customers' disputes.

import { h, when, badge } from './dom.js';

const sums = [['charged', 'Charged'], ['refunded', 'Refunded'], ['disputed', 'Disputed'], ['lost', 'Lost'], ['net', 'Net']];

/** renderMoney draws order.money into the element dl, each sum with its currency. */
export function renderMoney(dl, order) {
  const m = order.money || {};
  dl.replaceChildren(...sums.map(([key, label]) =>
    h('div', { class: `sum sum-${key}`, dataset: { sum: key, value: m[key] ?? '' } },
      h('dt', {}, label),
      h('dd', { class: 'num' }, m[key] === undefined ? '—' : `${m[key]} ${order.currency}`))));
}

/** renderLedger draws doc.ledger as table rows into tbody. */
export function renderLedger(tbody, doc) {
  tbody.replaceChildren(...(doc.ledger || []).map((e) =>
    h('tr', { dataset: { id: e.id, kind: e.kind, source: e.source } },
      h('td', {}, e.kind.replaceAll('_', ' ')),
      h('td', { class: 'num' }, `${e.amount} ${e.currency}`),
      h('td', {}, e.actor ? `${e.source} (${e.actor})` : e.source),
      h('td', {}, h('time', { datetime: e.created_at }, when(e.created_at))),
      h('td', { class: 'note' }, e.note || ''))));
}

/** renderDisputes draws doc.disputes as cards into ul. */
export function renderDisputes(ul, doc) {
  ul.replaceChildren(...(doc.disputes || []).map((d) =>
    h('li', { class: 'card dispute', dataset: { id: d.id, status: d.status } },
      h('div', {}, badge(d.status), ' ', h('strong', {}, `${d.amount} ${d.currency}`),
        d.reason ? ` · ${d.reason}` : ''),
      h('div', { class: 'meta' }, `dispute ${d.id} · charge ${d.charge_id} · opened ${when(d.opened_at)}`,
        d.closed_at ? ` · closed ${when(d.closed_at)}` : ' · not decided yet'))));
}
