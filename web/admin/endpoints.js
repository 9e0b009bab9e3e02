// endpoints.js: the shop's endpoints (ADR 0053), each with its health (how
// deliveries to it go: failing never looks like healthy), and its delivery
// log: each delivery with every request payd sent (its headers, signature
// included) and what came back, and a redeliver button for one that
// ended. A redelivery is one intent with one Idempotency-Key, kept until
// payd answers it with a success, as every change the console asks for.
// Adding, pausing, resuming, rotating and deleting endpoints is manage.js.

import { h, $, when, badge, stored, idRef } from './dom.js';
import { call, send, describe, newKey } from './api.js';
import { initManage, endpointActions } from './manage.js';

const redeliveries = new Map(); // event id → the key of a redelivery not yet answered with a success
let shown = null; // {id, url} of the endpoint whose deliveries are drawn

// healthTone gives each health state its colour: failing is bad, never
// the colour of a healthy endpoint; idle and disabled wait.
const healthTone = { healthy: 'ok', failing: 'bad', idle: 'wait', disabled: 'wait' };

const healthHint = {
  healthy: 'Its last delivery attempt was answered 2xx.',
  failing: 'Its last delivery attempt got no 2xx answer.',
  idle: 'payd has not tried it yet.',
  disabled: 'Disabled: payd sends it nothing until it is resumed.',
};

/** loadEndpoints draws every endpoint, and the open one's deliveries again. */
export async function loadEndpoints() {
  const r = await call('GET', '/v1/admin/endpoints');
  const list = $('ep-list');
  if (r.status !== 200) {
    list.replaceChildren();
    $('ep-empty').hidden = false;
    $('ep-empty').textContent = describe(r);
    return;
  }
  list.replaceChildren(...r.data.data.map((e) => endpointCard(e)));
  list.dataset.loaded = String(list.children.length);
  $('ep-empty').hidden = list.children.length !== 0;
  $('ep-empty').textContent = 'No endpoint yet: add one above, or set PAYD_NOTIFY_URL.';
  if (shown) await loadDeliveries(shown.id, shown.url);
}

function endpointCard(e) {
  const health = e.health || { state: e.status === 'disabled' ? 'disabled' : 'idle' };
  const acts = endpointActions(e);
  return h('li', { class: 'card endpoint', dataset: { id: e.id, status: e.status, health: health.state } },
    h('div', { class: 'head' }, h('strong', { class: 'url' }, stored(e.url)), ' ',
      h('span', { class: `badge health ${healthTone[health.state] || 'wait'}`, title: healthHint[health.state] || '' }, health.state)),
    h('div', { class: 'meta' }, e.events.join(', ')),
    h('div', { class: 'meta' }, ...[e.from_env ? 'from PAYD_NOTIFY_URL' : e.description && stored(e.description),
      e.disabled_reason && stored(e.disabled_reason)].filter(Boolean).flatMap((x, i) => (i ? [' · ', x] : [x]))),
    healthLines(health),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'deliveries quiet', onclick: () => loadDeliveries(e.id, e.url) }, 'Delivery log'),
      ...acts.buttons),
    ...acts.below);
}

/** healthLines says what waits for the endpoint, what failed and how its last attempt went. */
function healthLines(health) {
  if (health.pending === undefined) return null;
  const pending = Number(health.pending) || 0;
  const lines = [h('div', { class: 'meta health-counts' },
    h('span', { class: 'pending' }, `${pending} pending`, pending && health.oldest_pending_at ? ` (oldest since ${when(health.oldest_pending_at)})` : ''),
    ' · ', h('span', { class: 'failed' }, `${Number(health.failed) || 0} failed`),
    ' · ', h('span', { class: 'last-attempt' }, health.last_attempt_at
      ? `last attempt ${when(health.last_attempt_at)}${health.last_status ? `, answered ${health.last_status}` : ''}`
      : 'never tried'))];
  if (health.last_error) lines.push(h('div', { class: 'meta last-error' }, 'Last error: ', stored(health.last_error)));
  return lines;
}

/** loadDeliveries draws endpoint id's delivery log, newest first, titled with its URL. */
export async function loadDeliveries(id, url) {
  shown = { id, url: url ?? (shown && shown.id === id ? shown.url : '') };
  const q = new URLSearchParams();
  if ($('ep-status').value) q.set('status', $('ep-status').value);
  const r = await call('GET', `/v1/admin/endpoints/${id}/deliveries?${q}`);
  const list = $('ep-deliveries');
  $('ep-log').hidden = false;
  $('ep-log').dataset.id = id;
  $('ep-log-of').replaceChildren(...(shown.url ? [stored(shown.url), ' '] : []), idRef(id, { what: 'endpoint ID' }));
  if (r.status !== 200) {
    list.replaceChildren(h('li', { class: 'hint' }, describe(r)));
    return;
  }
  list.replaceChildren(...r.data.data.map((d) => deliveryCard(d)));
  list.dataset.loaded = String(list.children.length);
  if (list.children.length === 0) list.append(h('li', { class: 'hint' }, 'No delivery yet.'));
}

function deliveryCard(d) {
  const ended = d.status !== 'pending';
  const result = h('p', { class: 'result' });
  const button = h('button', { type: 'button', class: 'redeliver', hidden: !ended }, 'Redeliver');
  button.addEventListener('click', async () => {
    button.disabled = true;
    const key = redeliveries.get(d.event_id) || newKey();
    redeliveries.set(d.event_id, key);
    const r = await send('POST', `/v1/admin/events/${d.event_id}/redeliver`, { key, body: {} });
    if (r.status === 200) {
      redeliveries.delete(d.event_id);
      result.textContent = '';
      await loadDeliveries(shown.id);
      return;
    }
    button.disabled = false;
    result.textContent = describe(r);
  });
  return h('li', { class: 'card delivery', dataset: { id: d.id, event: d.event_id, status: d.status } },
    h('div', { class: 'head' }, h('strong', {}, stored(d.event_type)), ' ', badge(d.status)),
    h('div', { class: 'meta' }, `event ${d.event_id} · order ${d.order_id} · ${d.attempts} attempts · created ${when(d.created_at)}`),
    d.status === 'pending' && d.next_attempt_at ? h('div', { class: 'meta' }, `next attempt ${when(d.next_attempt_at)}`) : null,
    d.last_error ? h('div', { class: 'meta' }, `last: ${d.last_status || 'no answer'} `, stored(d.last_error)) : null,
    h('ol', { class: 'attempts' }, d.log.map((a) => h('li', { dataset: { n: a.n, status: a.status } },
      h('details', {},
        h('summary', {}, `#${a.n} ${when(a.started_at)} → ${a.status || 'no answer'} `, stored(a.error), ` (${a.duration_ms} ms)`),
        h('pre', { class: 'request' }, a.request),
        h('pre', { class: 'response' }, a.response))))),
    h('div', { class: 'actions' }, button),
    result);
}

initManage({ reload: () => loadEndpoints() });
