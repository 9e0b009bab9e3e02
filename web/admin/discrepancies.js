// discrepancies.js: a discrepancy drawn as a card with its resolve buttons.
// Resolving is idempotent end to end: a click is one intent with one
// Idempotency-Key, the buttons are disabled before anything awaits (a
// double click sends one request), and the same intent asked again, after
// a lost answer or any answer but a success, goes with the same key, so
// payd resolves (and refunds) once and keeps one answer for it. Another
// action or another note is another intent, with a key of its own.

import { h, when, badge, idRef, withIds } from './dom.js';
import { send, describe, newKey, NetworkError } from './api.js';

// Per discrepancy, kept while cards are redrawn (the open order is
// redrawn every few seconds and after every action): the intent asked
// for and its key until payd answers it with a success, the note being
// typed, and the last answer that was not a success.
const intents = new Map();
const drafts = new Map();
const results = new Map();

/** intentKey is the key of this intent: the one asked before, if it is the same, else a new one. */
export function intentKey(id, action, note) {
  const prev = intents.get(id);
  if (prev && prev.action === action && prev.note === note) return prev.key;
  const key = newKey();
  intents.set(id, { action, note, key });
  return key;
}

/**
 * amountsOf says what each side holds, in words where one holds nothing:
 * "provider 9.90 USD · none in payd's books", never "payd —".
 */
export function amountsOf(d) {
  if (!d.provider_amount && !d.local_amount) return '';
  const cur = d.currency || '';
  if (d.type === 'disputed' && !d.local_amount) {
    // A dispute payd booked is in its books as a dispute of the order
    // (the order's Disputes and Ledger), not as an amount of its own.
    const provider = d.provider_amount ? `disputed at the provider ${d.provider_amount} ${cur}`.trim() : 'no amount at the provider';
    return `${provider} · ${d.order_id ? "in payd's books as a dispute of its order" : 'no order of payd\'s to book it on'}`;
  }
  const provider = d.provider_amount ? `provider ${d.provider_amount} ${cur}`.trim() : 'no amount at the provider';
  const local = d.local_amount ? `payd ${d.local_amount} ${cur}`.trim() : "none in payd's books";
  return `${provider} · ${local}`;
}

/** fitting reads the actions payd says would fit from a problem's `actions` member. */
export function fitting(reply) {
  const list = reply && reply.data && Array.isArray(reply.data.actions) ? reply.data.actions : [];
  return list.map((a) => (typeof a === 'string' ? a : a && (a.action || a.name))).filter(Boolean);
}

/**
 * card draws discrepancy d, resolved by its ID alone (whoever found it).
 * onSettled(ok, data) runs after every answer payd gives, a success or
 * not, so what is on screen follows; say(text, tone) reports.
 */
export function card(d, { onSettled, openOrder, say }) {
  const open = d.status === 'open';
  const amounts = amountsOf(d);
  const el = h('li', { class: 'card discrepancy', dataset: { id: d.id, type: d.type, status: d.status } },
    h('div', { class: 'head' },
      h('strong', {}, d.type.replaceAll('_', ' ')), ' ',
      badge(d.resolution ? `${d.status}: ${d.resolution}` : d.status)),
    h('div', { class: 'meta' },
      'reference ', withIds(d.reference, 'reference'),
      amounts ? ` · ${amounts}` : '',
      ` · found ${when(d.detected_at)}`,
      d.run_id ? [' · run ', idRef(d.run_id, { what: 'run ID' })] : ' · found outside a run'),
    d.order_id
      ? h('div', { class: 'meta' }, 'order ', idRef(d.order_id, { what: 'order ID', open: openOrder, cls: 'open-order' }))
      : null,
    d.note ? h('div', { class: 'meta' }, 'note: ', withIds(d.note)) : null,
  );
  if (!open) return el;

  const note = h('input', { class: 'note', 'aria-label': `Note for ${d.type} ${d.reference}`, placeholder: 'Note (why)', maxlength: 1000 });
  note.value = drafts.get(d.id) || '';
  note.addEventListener('input', () => drafts.set(d.id, note.value));
  // Only the actions payd says fit it now: another would be refused.
  const buttons = (Array.isArray(d.actions) ? d.actions : ['apply', 'refund', 'ignore']).map((action) =>
    h('button', { type: 'button', class: `resolve ${action}`, dataset: { action }, 'aria-label': `${action} ${d.type} ${d.reference}` }, action));
  const out = h('p', { class: 'result', role: 'status' });
  const fits = h('p', { class: 'fits' });
  const show = (res) => {
    out.textContent = res ? res.text : '';
    fits.replaceChildren();
    fits.hidden = !(res && res.fits && res.fits.length);
    for (const b of buttons) b.dataset.fits = res && res.fits && res.fits.includes(b.dataset.action) ? 'yes' : '';
    if (res && res.fits && res.fits.length) {
      fits.append('payd says these fit: ', ...res.fits.map((a, i) => [i ? ', ' : '', h('strong', {}, a)]).flat(), '.');
    }
  };
  show(results.get(d.id));
  const setBusy = (busy) => buttons.forEach((b) => { b.disabled = busy; });
  for (const b of buttons) {
    b.addEventListener('click', async () => {
      if (b.disabled) return;
      setBusy(true); // before any await: a double click is one request
      el.dataset.busy = 'yes';
      const action = b.dataset.action;
      const key = intentKey(d.id, action, note.value);
      out.textContent = `Resolving with ${action}…`;
      let ok = false;
      let data = null;
      try {
        const r = await send('POST', `/v1/admin/discrepancies/${encodeURIComponent(d.id)}/resolve`,
          { key, body: { action, note: note.value } });
        data = r.data;
        if (r.status === 200) {
          ok = true;
          intents.delete(d.id); // done: a new click would be a new intent
          drafts.delete(d.id);
          results.delete(d.id);
          say(`Discrepancy ${d.id} resolved: ${r.data.resolution}${r.replayed ? ' (payd replayed its answer)' : ''}.`, 'ok');
        } else {
          // Not resolved: the same intent asked again keeps its key, and
          // payd answers it as it did (or finishes what it started).
          const res = { text: describe(r), fits: r.status === 409 ? fitting(r) : [] };
          if (res.fits.length === 0 && r.status >= 500) res.text += ' Asking again with the same action and note repeats this request under the same key.';
          results.set(d.id, res);
          show(res);
        }
      } catch (err) {
        const res = {
          text: err instanceof NetworkError
            ? 'payd did not answer. Click again: the same request is repeated, never a second resolution.'
            : String(err),
        };
        results.set(d.id, res);
        show(res);
      }
      setBusy(false);
      delete el.dataset.busy;
      onSettled(ok, data);
    });
  }
  el.append(h('div', { class: 'actions' }, note, ...buttons), out, fits);
  return el;
}
