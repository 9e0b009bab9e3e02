// discrepancies.js: a discrepancy drawn as a card with its resolve buttons.
// Resolving is idempotent end to end: a click is one intent with one
// Idempotency-Key, the buttons are disabled before anything awaits (a
// double click sends one request), and an answer lost on the way is asked
// for again with the same key, so payd resolves (and refunds) once.

import { h, when, badge } from './dom.js';
import { send, describe, newKey, NetworkError } from './api.js';

// intents remembers, per discrepancy, the resolution an operator asked for
// and its key until payd answers it: clicking again after a lost answer
// repeats the same request rather than making a second one.
const intents = new Map();

function intentKey(id, action, note) {
  const prev = intents.get(id);
  if (prev && prev.action === action && prev.note === note) return prev.key;
  const key = newKey();
  intents.set(id, { action, note, key });
  return key;
}

/**
 * card draws discrepancy d, resolved by its ID alone (whoever found it);
 * onResolved(d) runs with payd's answer; say(text, tone) reports.
 */
export function card(d, { onResolved, openOrder, say }) {
  const open = d.status === 'open';
  const amounts = d.provider_amount || d.local_amount
    ? `provider ${d.provider_amount ?? '—'} · payd ${d.local_amount ?? '—'} ${d.currency ?? ''}` : '';
  const el = h('li', { class: 'card discrepancy', dataset: { id: d.id, type: d.type, status: d.status } },
    h('div', { class: 'head' },
      h('strong', {}, d.type.replaceAll('_', ' ')), ' ',
      badge(d.resolution ? `${d.status}: ${d.resolution}` : d.status)),
    h('div', { class: 'meta' },
      `reference ${d.reference}`,
      amounts ? ` · ${amounts}` : '',
      ` · found ${when(d.detected_at)}`,
      d.run_id ? ` · run ${d.run_id}` : ' · found outside a run'),
    d.order_id
      ? h('div', { class: 'meta' }, 'order ', h('button', { type: 'button', class: 'link open-order', onclick: () => openOrder(d.order_id) }, d.order_id))
      : null,
    d.note ? h('div', { class: 'meta' }, `note: ${d.note}`) : null,
  );
  if (!open) return el;

  const note = h('input', { class: 'note', 'aria-label': `Note for ${d.type} ${d.reference}`, placeholder: 'Note (why)', maxlength: 1000 });
  const buttons = ['apply', 'refund', 'ignore'].map((action) =>
    h('button', { type: 'button', class: `resolve ${action}`, dataset: { action }, 'aria-label': `${action} ${d.type} ${d.reference}` }, action));
  const out = h('p', { class: 'result', role: 'status' });
  const setBusy = (busy) => buttons.forEach((b) => { b.disabled = busy; });
  for (const b of buttons) {
    b.addEventListener('click', async () => {
      if (b.disabled) return;
      setBusy(true); // before any await: a double click is one request
      const action = b.dataset.action;
      const key = intentKey(d.id, action, note.value);
      out.textContent = `Resolving with ${action}…`;
      try {
        const r = await send('POST', `/v1/admin/discrepancies/${encodeURIComponent(d.id)}/resolve`,
          { key, body: { action, note: note.value } });
        intents.delete(d.id); // payd answered: the intent is settled either way
        if (r.status === 200) {
          say(`Discrepancy ${d.id} resolved: ${r.data.resolution}${r.replayed ? ' (payd replayed its answer)' : ''}.`, 'ok');
          onResolved(r.data);
          return;
        }
        out.textContent = describe(r);
      } catch (err) {
        out.textContent = err instanceof NetworkError
          ? 'payd did not answer. Click again: the same request is repeated, never a second resolution.'
          : String(err);
      }
      setBusy(false);
    });
  }
  el.append(h('div', { class: 'actions' }, note, ...buttons), out);
  return el;
}
