// app.js: the operators' console. It signs in with an operator token, then
// works only through payd's admin API (/v1/admin/...): an overview of how
// payments are going (overview.js), orders on the left and the open one on
// the right (order.js), discrepancies with resolve buttons, customers'
// disputes with when their evidence is due and where to answer them
// (disputes.js), reconciliations, the shop's endpoints with their health (endpoints.js),
// added, paused, rotated and deleted from the page (manage.js), and its catalogue
// (catalogue.js, read-only), with a bar that leads to each (nav.js). Every
// time it shows or takes reads "2026-12-03 12:33:03 UTC" (times.js), and
// text someone stored is drawn with its direction isolated (dom.js's
// stored). Every change it asks for carries an
// idempotency key made once per operator intent (see discrepancies.js,
// order.js and runReconcile); what is on screen is asked for again after
// every action and every few seconds (live.js).

import { call, send, describe, newKey, savedToken, saveToken, forgetToken, NetworkError } from './api.js';
import { h, $, when, badge, idRef, amount, short, copyButton, stored } from './dom.js';
import { card } from './discrepancies.js';
import { initOverview, refreshOverview } from './overview.js';
import { initOrder, openOrder, closeOrder, shownOrder } from './order.js';
import { every } from './live.js';
import { loadEndpoints } from './endpoints.js';
import { loadCatalogue } from './catalogue.js';
import { initDisputes, loadDisputes, showOpenDisputes } from './disputes.js';
import { initNav, showSection } from './nav.js';
import { timeField, timeValue, setTime } from './times.js';

const app = $('app');
let orderCursor = null;
let discCursor = null;

// Each list may be asked for again before its last answer is in (a search
// while the first load runs): only the newest request's answer is drawn.
const asked = {};
function ticket(what) {
  const n = (asked[what] = (asked[what] || 0) + 1);
  return () => asked[what] === n;
}

/** say reports in the status bar: ok, bad or wait. */
function say(text, tone = 'wait') {
  const s = $('status');
  s.hidden = false;
  s.className = `status ${tone}`;
  s.textContent = text;
}

function setState(state) {
  app.dataset.state = state;
  $('sign-in').hidden = state !== 'signed-out';
  $('console').hidden = state !== 'ready';
  $('signed-in').hidden = state !== 'ready';
  if (state === 'ready') live.start();
  else live.stop();
}

// --- live -----------------------------------------------------------------

/** POLL is how often the overview and the open order are asked for again. */
const POLL = 5000;

const live = every(POLL, async () => {
  await Promise.all([refreshOverview(), shownOrder() ? openOrder(shownOrder(), { quiet: true }) : null]);
}, (state) => {
  $('live').dataset.live = state;
  $('live').textContent = { on: `Live: updated every ${POLL / 1000} s`, paused: 'Paused while this tab is hidden', off: '' }[state];
});

// --- signing in -----------------------------------------------------------

/** verify asks payd whether the saved token is an operator's, and whose. */
async function verify() {
  let r;
  try {
    r = await call('GET', '/v1/admin/whoami');
  } catch {
    return 'payd did not answer. Is it running?';
  }
  if (r.status === 200) {
    $('who').replaceChildren('Signed in as ', stored(r.data.operator), '.');
    return '';
  }
  if (r.status === 403) return 'This token is not an operator token (403).';
  return describe(r);
}

async function signIn(token) {
  saveToken(token);
  const problem = await verify();
  $('token').value = ''; // never left in the page, right or wrong
  if (problem) {
    forgetToken();
    $('sign-in-error').textContent = problem;
    setState('signed-out');
    return;
  }
  $('sign-in-error').textContent = '';
  setState('ready');
  await Promise.all([refreshOverview(), loadDiscrepancies(), loadDisputes(), loadRuns(), searchOrders(), loadEndpoints(), loadCatalogue()]);
}

function signOut() {
  forgetToken();
  closeOrder();
  $('status').hidden = true;
  setState('signed-out');
}

/** checked handles an answer that says the token stopped working. */
function checked(r) {
  if (r.status === 401) {
    signOut();
    $('sign-in-error').textContent = describe(r);
  }
  return r;
}

// --- orders ---------------------------------------------------------------

async function searchOrders(more = false) {
  const q = new URLSearchParams();
  const status = $('q-status').value;
  if (status) q.set('status', status);
  const customer = $('q-customer').value.trim();
  if (customer) q.set('customer', customer); // an ID or an email: payd tells them apart
  if (timeValue($('q-from'))) q.set('from', timeValue($('q-from')));
  if (timeValue($('q-to'))) q.set('to', timeValue($('q-to')));
  if ($('q-failed').checked) q.set('attempt', 'failed'); // the orders a card was declined for, paid since or not
  if (more && orderCursor) q.set('cursor', orderCursor);
  q.set('limit', '20');
  const newest = ticket('orders');
  const r = checked(await call('GET', `/v1/admin/orders?${q}`));
  if (!newest()) return;
  if (r.status !== 200) {
    say(describe(r), 'bad');
    return;
  }
  const rows = $('orders-rows');
  if (!more) rows.replaceChildren();
  for (const o of r.data.data) {
    const refunded = o.refunded_amount && Number(o.refunded_amount) !== 0;
    // The row is the control: a click anywhere, or Enter when it has the focus, opens the order.
    const tr = h('tr', { dataset: { id: o.id }, tabindex: '0', 'aria-label': `Order ${o.id}, ${o.status}, ${o.amount} ${o.currency}, last attempt ${attemptText(o.last_attempt)}` },
      h('td', {}, h('span', { class: 'idref', dataset: { id: o.id } },
        h('span', { class: 'id open-order', title: o.id }, short(o.id)), copyButton(o.id, 'order ID'))),
      h('td', {}, badge(o.status)),
      h('td', { class: 'num' }, amount(o.amount, o.currency)),
      h('td', { class: `num${refunded ? '' : ' none'}` }, refunded ? amount(o.refunded_amount, o.currency) : '—'),
      lastAttempt(o.last_attempt),
      h('td', { class: 'when' }, when(o.created_at)));
    tr.addEventListener('click', () => openOrder(o.id));
    tr.addEventListener('keydown', (e) => {
      if (e.target === tr && (e.key === 'Enter' || e.key === ' ')) {
        e.preventDefault();
        openOrder(o.id);
      }
    });
    rows.append(tr);
  }
  markShown(shownOrder());
  rows.dataset.query = q.toString(); // what the rows answer, for a reader (or a test) to tell searches apart
  orderCursor = r.data.next_cursor;
  $('more').hidden = !orderCursor;
  $('orders-table').hidden = rows.children.length === 0;
  $('orders-empty').hidden = rows.children.length !== 0;
}

/** attemptText is an order's last payment attempt in words: "failed · insufficient_funds", or "none". */
const attemptText = (a) => (a ? [a.status, a.failure_code].filter(Boolean).join(' · ') : 'none');

/** lastAttempt is the list's cell of an order's last payment attempt: its status and a decline's code. */
function lastAttempt(a) {
  if (!a) return h('td', { class: 'attempt none' }, '—');
  return h('td', { class: 'attempt', dataset: { status: a.status } }, badge(a.status),
    a.failure_code ? h('span', { class: 'code' }, ' · ', stored(a.failure_code)) : null);
}

/** markShown marks the open order's row in the list. */
function markShown(id) {
  for (const tr of $('orders-rows').children) {
    if (tr.dataset.id === id) tr.setAttribute('aria-current', 'true');
    else tr.removeAttribute('aria-current');
  }
}

// --- discrepancies --------------------------------------------------------

/**
 * afterAction asks again for everything an action may have changed, the
 * open order's timeline first: a refusal is on the timeline too.
 */
async function afterAction() {
  await Promise.all([shownOrder() ? openOrder(shownOrder()) : null, refreshOverview(), loadDiscrepancies(), loadDisputes(), refreshRun(), searchOrders()]);
}

const cardOpts = {
  openOrder: (id) => openOrder(id),
  say,
  onSettled: () => afterAction(),
};

/** showOpenDiscrepancies lists the open ones and brings the list into view. */
function showOpenDiscrepancies() {
  $('d-status').value = 'open';
  $('d-type').value = '';
  $('d-order').value = '';
  showSection('discrepancies');
  return loadDiscrepancies();
}

async function loadDiscrepancies(more = false) {
  const q = new URLSearchParams({ status: $('d-status').value });
  if ($('d-type').value) q.set('type', $('d-type').value);
  if ($('d-order').value.trim()) q.set('order', $('d-order').value.trim());
  if (more && discCursor) q.set('cursor', discCursor);
  const newest = ticket('discrepancies');
  const r = checked(await call('GET', `/v1/admin/discrepancies?${q}`));
  if (!newest()) return;
  const list = $('disc-list');
  if (r.status !== 200) {
    list.replaceChildren();
    $('disc-empty').hidden = false;
    $('disc-empty').textContent = r.status === 404 || r.status === 405
      ? 'This payd lists discrepancies only on their order and run.' : describe(r);
    return;
  }
  if (!more) list.replaceChildren();
  for (const d of r.data.data) list.append(card(d, cardOpts));
  discCursor = r.data.next_cursor;
  $('disc-more').hidden = !discCursor;
  $('disc-empty').hidden = list.children.length !== 0;
  $('disc-empty').textContent = 'None.';
  list.dataset.loaded = String(list.children.length);
}

// --- reconciliation -------------------------------------------------------

let runIntent = null; // {what, key} of a run whose answer has not come back

async function runReconcile() {
  const from = timeValue($('r-from'));
  const to = timeValue($('r-to'));
  const dry = $('r-dry').checked;
  const file = $('r-file').files[0];
  const what = JSON.stringify([from, to, dry, file ? [file.name, file.size, file.lastModified] : null]);
  if (!runIntent || runIntent.what !== what) runIntent = { what, key: newKey() };
  let opts;
  if (file) {
    const form = new FormData();
    form.set('from', from);
    form.set('to', to);
    form.set('dry_run', String(dry));
    form.set('file', file);
    opts = { key: runIntent.key, form };
  } else {
    opts = { key: runIntent.key, body: { from, to, dry_run: dry } };
  }
  $('run').disabled = true; // before any await: a double click is one run
  say(dry ? 'Dry run…' : 'Reconciling…');
  try {
    const r = checked(await send('POST', '/v1/admin/reconciliations', opts));
    runIntent = null;
    if (r.status === 200 || r.status === 201) {
      ticket('run'); // a run opened before this one answered must not cover it
      showRun(r.data);
      say(`${r.data.dry_run ? 'Dry run' : 'Run'} finished: ${r.data.found} found, ${r.data.new} new, ${r.data.matched} matched.`, 'ok');
      // What the run found is on the open order's timeline and in the
      // overview at once, as after any other action.
      if (!r.data.dry_run) await Promise.all([loadRuns(), afterAction()]);
    } else {
      say(describe(r), 'bad');
    }
  } catch (err) {
    say(err instanceof NetworkError ? 'payd did not answer. Run again: the same request is repeated, never a second run.' : String(err), 'bad');
  } finally {
    $('run').disabled = false;
  }
}

function showRun(run) {
  $('run-result').hidden = false;
  $('run-result').dataset.id = run.dry_run ? '' : run.id;
  $('run-result-id').textContent = run.dry_run ? 'dry run (not recorded)' : run.id;
  const source = { csv: 'Settlement file', provider: "Provider's charge list", schedule: "Scheduled, provider's charge list" }[run.source] || run.source;
  $('run-summary').textContent = `${source}, ${when(run.from)} to ${when(run.to)}: ` +
    `${run.matched} matched, ${run.found} discrepancies found, ${run.new} new.`;
  $('run-discrepancies').replaceChildren(...run.discrepancies.map((d) => card(d, cardOpts)));
}

async function openRun(id) {
  const newest = ticket('run');
  const r = checked(await call('GET', `/v1/admin/reconciliations/${encodeURIComponent(id)}`));
  if (!newest()) return;
  if (r.status !== 200) {
    say(describe(r), 'bad');
    return;
  }
  showRun(r.data);
}

/** refreshRun redraws the run on screen after a resolution changed its findings. */
async function refreshRun() {
  const id = $('run-result').dataset.id;
  if (id && !$('run-result').hidden) await openRun(id);
}

async function loadRuns() {
  const newest = ticket('runs');
  const r = checked(await call('GET', '/v1/admin/reconciliations?limit=10'));
  if (!newest()) return;
  if (r.status !== 200) {
    $('runs-empty').textContent = r.status === 404 || r.status === 405
      ? 'This payd does not list runs: open one by its ID.' : describe(r);
    return;
  }
  const rows = $('runs-rows');
  rows.replaceChildren();
  for (const run of r.data.data) {
    rows.append(h('tr', { dataset: { id: run.id } },
      h('td', {}, idRef(run.id, { what: 'run ID', open: (id) => openRun(id) })),
      h('td', {}, stored(run.source)),
      h('td', {}, `${when(run.from)} – ${when(run.to)}`),
      h('td', { class: 'num' }, String(run.found)),
      h('td', { class: 'num' }, String(run.new))));
  }
  $('runs-table').hidden = rows.children.length === 0;
  $('runs-empty').textContent = rows.children.length === 0 ? 'No run yet.' : '';
}

// --- wiring ---------------------------------------------------------------

function on(id, event, fn) {
  $(id).addEventListener(event, (e) => {
    e.preventDefault();
    fn(e);
  });
}

on('token-form', 'submit', () => signIn($('token').value.trim()));
on('sign-out', 'click', signOut);
on('search-form', 'submit', () => searchOrders());
on('more', 'click', () => searchOrders(true));
on('open-form', 'submit', () => { const id = $('open-id').value.trim(); if (id) openOrder(id); });
on('reload-order', 'click', () => shownOrder() && openOrder(shownOrder()));
on('close-order', 'click', () => closeOrder());
on('disc-form', 'submit', () => loadDiscrepancies());
on('disc-more', 'click', () => loadDiscrepancies(true));
on('reconcile-form', 'submit', () => { if (!$('run').disabled) runReconcile(); });
on('show-run-form', 'submit', () => { const id = $('run-id').value.trim(); if (id) openRun(id); });
on('ep-refresh', 'click', () => loadEndpoints());
on('dp-form', 'submit', () => loadDisputes());
on('dp-more', 'click', () => loadDisputes(true));
$('dp-status').addEventListener('change', () => loadDisputes());
on('cat-refresh', 'click', () => loadCatalogue());
on('cat-more', 'click', () => loadCatalogue(true));
$('ep-status').addEventListener('change', () => loadEndpoints());

initOverview({ call, checked, describe, openOrder: (id) => openOrder(id), showOpenDiscrepancies, showOpenDisputes });
initDisputes({ checked, openOrder: (id) => openOrder(id) });
initOrder({ checked, say, cardOpts, afterAction, onShown: markShown });
initNav();
for (const id of ['q-from', 'q-to', 'r-from', 'r-to']) timeField($(id));

const now = new Date();
setTime($('r-from'), new Date(now.getTime() - 24 * 3600 * 1000));
setTime($('r-to'), new Date(now.getTime() + 60 * 1000));

if (savedToken()) {
  signIn(savedToken());
} else {
  setState('signed-out');
}
