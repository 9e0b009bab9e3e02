// timeline.js: an order's story drawn as a vertical timeline. payd merges
// every record about the order in time order (GET /v1/admin/orders/{id},
// `timeline`); each entry is drawn with its outcome, looked up in the
// record it names: an attempt's status, a webhook's outcome, a refund's
// status, a discrepancy's status and resolution, a dispute's status, a
// ledger entry booked and a shipment shipped (neither ever changes), an
// operator action's HTTP result (so a refund answered 409 never looks
// like one answered 200).

import { h, when, badge, withIds } from './dom.js';
import { amountsOf } from './discrepancies.js';

/**
 * outcomeOf finds what became of the record a timeline entry names, from
 * the record itself; an entry's own outcome, where payd sends one, stands
 * in for a record the answer does not carry.
 */
export function outcomeOf(doc, entry) {
  return recordOutcome(doc, entry) || entry.outcome || '';
}

function recordOutcome(doc, entry) {
  const find = (list) => (list || []).find((r) => r.id === entry.id) || {};
  switch (entry.kind) {
    case 'order':
      return 'created';
    case 'attempt': {
      const a = find(doc.attempts);
      return a.status;
    }
    case 'webhook': {
      const e = find(doc.webhook_events);
      return e.id ? e.outcome || 'not processed' : '';
    }
    case 'refund':
      return find(doc.refunds).status;
    case 'discrepancy': {
      const d = find(doc.discrepancies);
      return d.resolution ? `${d.status}: ${d.resolution}` : d.status;
    }
    case 'ledger':
      return find(doc.ledger).id ? 'booked' : '';
    case 'dispute': {
      const d = find(doc.disputes);
      return d.status; // open, won or lost
    }
    case 'shipment':
      return find((doc.order || {}).shipments).id ? 'shipped' : '';
    case 'event': {
      const e = find(doc.events);
      return e.id ? (e.fanned_out ? 'fanned out' : 'to fan out') : '';
    }
    case 'audit': {
      const a = find(doc.audit);
      if (!a.result) return '';
      const replayed = a.replayed || (a.detail && a.detail.replayed) ? ' replayed' : '';
      return `${a.result}${a.code ? ` ${a.code}` : ''}${replayed}`;
    }
  }
  return '';
}

/**
 * detailOf is a second line for entries whose summary leaves out what an
 * operator needs: a list of [label, value] pairs, each value text stored
 * in payd (a reference, a note, a key), drawn on its own by details.
 */
function detailOf(doc, entry) {
  const find = (list) => (list || []).find((r) => r.id === entry.id);
  if (entry.kind === 'audit') {
    const a = find(doc.audit);
    if (!a) return null;
    const parts = [a.target ? ['about ', a.target] : null, a.request_id ? ['key ', a.request_id] : null];
    if (a.detail && typeof a.detail === 'object') {
      const shown = Object.entries(a.detail).filter(([k, v]) => k !== 'replayed' && v !== '' && v !== null && typeof v !== 'object');
      parts.push(...shown.map(([k, v]) => [`${k}=`, v]));
    }
    return parts.filter(Boolean);
  }
  if (entry.kind === 'discrepancy') {
    const d = find(doc.discrepancies);
    if (!d) return null;
    const amounts = amountsOf(d);
    return [['reference ', d.reference], amounts ? ['', amounts] : null, d.note ? ['note: ', d.note] : null].filter(Boolean);
  }
  if (entry.kind === 'ledger') {
    const e = find(doc.ledger);
    return e ? [['charge ', e.charge_id], e.note ? ['note: ', e.note] : null].filter(Boolean) : null;
  }
  if (entry.kind === 'attempt') {
    const a = find(doc.attempts);
    return a ? [['key ', a.request_id], a.provider_charge_id ? ['charge ', a.provider_charge_id] : null].filter(Boolean) : null;
  }
  return null;
}

/** details draws detailOf's pairs, " · " between them, each value isolated (withIds). */
const details = (parts) => parts.flatMap(([label, value], i) => [i ? ' · ' : '', label, withIds(value)]);

/**
 * renderTimeline draws doc.timeline into the list element ol. Redrawn for
 * the same order (after an action, or as it changes), the entries that
 * were not there before are marked new, for the eye to find them.
 */
export function renderTimeline(ol, doc) {
  const same = ol.dataset.order === doc.order.id;
  const seen = new Set([...ol.children].map((li) => `${li.dataset.kind} ${li.dataset.id}`));
  ol.replaceChildren();
  ol.dataset.order = doc.order.id;
  for (const entry of doc.timeline || []) {
    const outcome = outcomeOf(doc, entry);
    const detail = detailOf(doc, entry);
    const fresh = same && !seen.has(`${entry.kind} ${entry.id}`);
    ol.append(
      h('li', { class: `event kind-${entry.kind}${fresh ? ' new' : ''}`, dataset: { kind: entry.kind, id: entry.id, outcome: outcome || '' } },
        h('span', { class: 'dot', 'aria-hidden': 'true' }),
        h('div', { class: 'what' },
          h('span', { class: 'kind' }, entry.kind), ' ',
          h('span', { class: 'summary' }, withIds(entry.summary)), ' ',
          badge(outcome)),
        detail && detail.length ? h('div', { class: 'detail' }, details(detail)) : null,
        h('time', { datetime: entry.at }, when(entry.at))),
    );
  }
}
