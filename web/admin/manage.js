// manage.js: adding, pausing, resuming, rotating and deleting the shop's
// endpoints from the console. A pause, a rotation and a deletion each ask
// first, inline (never window.confirm); a new secret (of a new endpoint or
// a rotation) is shown once, with a note saying so, until the operator
// hides it. Each action is one intent with one Idempotency-Key, sent again
// with that key after a lost answer or a 5xx and dropped once payd has
// answered it; payd's refusal (its problem's title and detail) stays next
// to the action, and the list is asked for again after every action.

import { h, $, stored, copyButton } from './dom.js';
import { send, describe, newKey, NetworkError } from './api.js';

/** TYPES are the events an endpoint can be told of: NotifyType in handler/openapi.yaml. */
export const TYPES = ['order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired',
  'order.refunded', 'order.disputed', 'order.dispute_closed', 'order.refund_reversed'];

// ACTIONS are what can be done to an endpoint; those with confirm ask first.
const ACTIONS = {
  pause: { label: 'Pause', method: 'PATCH', body: { enabled: false }, yes: 'Pause it', done: 'Paused: payd sends it nothing until it is resumed.',
    confirm: 'Pause deliveries to this endpoint? Its events wait, undelivered, until it is resumed.' },
  resume: { label: 'Resume', method: 'PATCH', body: { enabled: true }, done: 'Resumed: payd delivers to it again.' },
  rotate: { label: 'Rotate secret', method: 'POST', path: '/rotate-secret', body: {}, yes: 'Rotate it', done: 'Secret rotated: the new one is shown above, once.',
    confirm: 'Give this endpoint a new secret? The new one is shown once; the old one signs beside it for 24 hours while the shop switches.' },
  delete: { label: 'Delete', method: 'DELETE', yes: 'Delete it', done: 'Deleted.',
    confirm: 'Delete this endpoint? It gets nothing more and its pending deliveries fail; its delivery log stays readable.' },
};

let deps = null; // {reload}
const intents = new Map(); // "action id" or "create": {what, key}, until payd answers
const notes = new Map(); // endpoint id → {text, tone}: the last action's outcome, drawn with its card

/** initManage wires the form that adds an endpoint and the secret's box. */
export function initManage(d) {
  deps = d;
  $('ep-types').append(...TYPES.map((t) => h('div', { class: 'check' },
    h('input', { type: 'checkbox', id: `ep-type-${t.replace(/\W/g, '-')}`, name: 'ep-type', value: t }),
    h('label', { for: `ep-type-${t.replace(/\W/g, '-')}` }, t))));
  $('ep-new').addEventListener('submit', (e) => {
    e.preventDefault();
    if (!$('ep-create').disabled) create();
  });
  $('ep-secret-hide').addEventListener('click', hideSecret);
}

/** keyFor is the key of intent what under name: the same while it is the same intent. */
function keyFor(name, what) {
  const i = intents.get(name);
  if (i && i.what === what) return i.key;
  const key = newKey();
  intents.set(name, { what, key });
  return key;
}

/**
 * act sends one intent and settles its key: an answer below 500 (but a
 * 409, the same request still in flight) is payd's last word on it, and
 * the next click is a new intent. An answered action on an endpoint also
 * settles that endpoint's other actions still waiting for an answer: a
 * pause whose answer was lost, then a resume, then a pause again must send
 * a new pause, not replay the first (payd would answer its old 200 and
 * change nothing).
 */
async function act(name, what, method, path, body) {
  const key = keyFor(name, what);
  try {
    const r = await send(method, path, { key, body });
    if (r.status < 500 && r.status !== 409) {
      intents.delete(name);
      const target = name.split(' ')[1];
      if (target) {
        for (const other of [...intents.keys()]) {
          if (other.split(' ')[1] === target) intents.delete(other);
        }
      }
    }
    return r;
  } catch (err) {
    return { status: 0, error: err instanceof NetworkError ? 'payd did not answer. Try again: the same request is repeated under the same key.' : String(err) };
  }
}

const failure = (r) => r.error || describe(r);

// --- adding ---------------------------------------------------------------

async function create() {
  const url = $('ep-url').value.trim();
  const events = [...document.querySelectorAll('#ep-types input:checked')].map((c) => c.value);
  const description = $('ep-description').value.trim();
  const out = $('ep-new-result');
  $('ep-create').disabled = true; // before any await: a double click adds one endpoint
  out.className = 'result';
  out.textContent = 'Adding…';
  const r = await act('create', JSON.stringify([url, events, description]), 'POST', '/v1/admin/endpoints', { url, events, description });
  $('ep-create').disabled = false;
  if (r.status === 201 || r.status === 200) {
    out.className = 'result ok';
    out.replaceChildren('Added ', stored(r.data.url), '.');
    $('ep-new').reset();
    showSecret(r.data, 'The new endpoint\'s secret');
  } else {
    out.className = 'result bad';
    out.textContent = failure(r);
  }
  await deps.reload();
}

// --- the secret, shown once -------------------------------------------------

function showSecret(endpoint, what) {
  $('ep-secret').hidden = false;
  $('ep-secret').dataset.id = endpoint.id;
  $('ep-secret-of').replaceChildren(`${what}, for `, stored(endpoint.url), ':');
  $('ep-secret-value').textContent = endpoint.secret;
  $('ep-secret-copy').replaceChildren(copyButton(endpoint.secret, 'secret'));
  $('ep-secret').scrollIntoView({ block: 'nearest' });
  $('ep-secret-hide').focus({ preventScroll: true });
}

/** hideSecret takes the secret off the page: it is never shown again. */
function hideSecret() {
  $('ep-secret').hidden = true;
  $('ep-secret-value').textContent = '';
  $('ep-secret-copy').replaceChildren();
  delete $('ep-secret').dataset.id;
}

// --- acting on one endpoint -------------------------------------------------

/**
 * endpointActions is what endpoints.js draws in e's card: its buttons
 * (pause or resume, rotate, delete), the slot where a confirmation opens,
 * and the last action's outcome.
 */
export function endpointActions(e) {
  const slot = h('div', { class: 'confirm-slot' });
  const note = notes.get(e.id);
  const result = h('p', { class: `result ${note ? note.tone : ''}`.trim(), role: 'status' }, note ? note.text : '');
  const names = [e.status === 'disabled' ? 'resume' : 'pause', 'rotate', 'delete'];
  const buttons = names.map((name) => {
    const a = ACTIONS[name];
    const b = h('button', { type: 'button', class: `${name} quiet` }, a.label);
    b.addEventListener('click', () => (a.confirm ? ask(e, name, b, slot, result) : run(e, name, b, result)));
    return b;
  });
  return { buttons, below: [slot, result] };
}

/** ask opens the confirmation of action name on e: nothing is sent until it is confirmed. */
function ask(e, name, button, slot, result) {
  const a = ACTIONS[name];
  const no = h('button', { type: 'button', class: 'no quiet' }, 'Cancel');
  const yes = h('button', { type: 'button', class: `yes ${name === 'delete' ? 'danger' : ''}`.trim() }, a.yes);
  no.addEventListener('click', () => {
    slot.replaceChildren();
    button.focus();
  });
  yes.addEventListener('click', () => run(e, name, yes, result, slot));
  slot.replaceChildren(h('div', { class: 'confirm', role: 'group', 'aria-label': `Confirm: ${a.label}`, dataset: { action: name } },
    h('p', {}, a.confirm), h('div', { class: 'actions' }, yes, no)));
  no.focus();
}

/** run sends action name on e, says how it went beside it, and asks for the list again. */
async function run(e, name, button, result, slot) {
  const a = ACTIONS[name];
  button.disabled = true; // before any await: a double click is one action
  $('ep-result').textContent = '';
  result.className = 'result';
  result.textContent = `${a.label}…`;
  const r = await act(`${name} ${e.id}`, name, a.method, `/v1/admin/endpoints/${encodeURIComponent(e.id)}${a.path || ''}`, a.body);
  if (slot) slot.replaceChildren();
  if (r.status === 200) {
    notes.set(e.id, { text: a.done, tone: 'ok' });
    if (name === 'rotate') showSecret(r.data, 'The rotated secret');
    if (name === 'delete') {
      notes.delete(e.id);
      $('ep-result').className = 'result ok';
      $('ep-result').replaceChildren('Deleted ', stored(e.url), ': its delivery log stays readable.');
    }
  } else {
    notes.set(e.id, { text: failure(r), tone: 'bad' });
  }
  await deps.reload();
  // A card that is gone (deleted here or elsewhere) says nothing: its outcome goes above the list.
  if (r.status !== 200 && !document.querySelector(`#ep-list li[data-id="${e.id}"]`)) {
    $('ep-result').className = 'result bad';
    $('ep-result').replaceChildren(stored(e.url), ': ', failure(r));
  }
}
