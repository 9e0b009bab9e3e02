// overview.js: how payments are going, first thing on the page. Tiles and
// two charts for a chosen window (the last hour, day or week), from
// GET /v1/admin/stats?from=&to=&bucket=. The counts of open discrepancies
// and disputes and the oldest unknown outcome are payd's of right now,
// whatever the window.

import { h, $, when, age, idRef } from './dom.js';
import { barChart } from './chart.js';

const HOUR = 3600 * 1000;
export const windows = {
  hour: { span: HOUR, bucket: 'hour', words: 'the last hour' },
  day: { span: 24 * HOUR, bucket: 'hour', words: 'the last day' },
  week: { span: 7 * 24 * HOUR, bucket: 'day', words: 'the last week' },
};

let chosen = 'day';
let deps = null; // {call, checked, openOrder, showOpenDiscrepancies, showOpenDisputes}

const rfc3339 = (d) => d.toISOString().replace(/\.\d+Z$/, 'Z');

/** query is the stats request for the chosen window, ending now. */
export function query(name = chosen, now = new Date()) {
  const w = windows[name];
  const q = new URLSearchParams({ from: rfc3339(new Date(now.getTime() - w.span)), to: rfc3339(now), bucket: w.bucket });
  return `/v1/admin/stats?${q}`;
}

/** initOverview wires the window chooser; refreshOverview draws. */
export function initOverview(d) {
  deps = d;
  for (const b of $('window').querySelectorAll('button')) {
    b.addEventListener('click', () => {
      chosen = b.dataset.window;
      for (const o of $('window').querySelectorAll('button')) o.setAttribute('aria-pressed', String(o === b));
      refreshOverview();
    });
  }
}

let asked = 0;

/** refreshOverview asks payd for the window's stats and draws them; only the newest answer is drawn. */
export async function refreshOverview() {
  const n = ++asked;
  const name = chosen;
  const err = $('overview-error');
  let r;
  try {
    r = deps.checked(await deps.call('GET', query(name)));
  } catch {
    if (n === asked) {
      err.hidden = false;
      err.textContent = 'payd did not answer; the overview shows its last answer.';
    }
    return;
  }
  if (n !== asked) return;
  if (r.status !== 200) {
    err.hidden = false;
    err.textContent = r.status === 404 || r.status === 405
      ? 'This payd has no statistics to show (GET /v1/admin/stats is not there).'
      : `The overview could not be loaded: ${deps.describe(r)}`;
    return;
  }
  err.hidden = true;
  draw(r.data, name);
}

function tile(key, label, value, ...more) {
  return h('div', { class: `tile ${key}`, dataset: { tile: key, value } },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value' }, value),
    h('div', { class: 'more' }, ...more));
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

function draw(st, name) {
  const t = st.totals || {};
  const money = st.money || [];
  const decided = (t.paid || 0) + (t.declined || 0);
  const rate = t.success_rate === null || t.success_rate === undefined ? '—' : `${Math.round(t.success_rate * 1000) / 10} %`;
  // Only the currencies with something to say: no "0 JPY refunded" for a
  // currency that was charged and never refunded.
  const perCurrency = (field, words) => {
    const some = money.filter((m) => m[field] !== undefined && m[field] !== null && Number(m[field]) !== 0);
    return some.length
      ? [h('div', {}, words), ...some.map((m) => h('div', { class: 'sum', dataset: { currency: m.currency } }, `${m[field]} ${m.currency}`))]
      : [h('div', {}, `nothing ${words}`)];
  };
  const oldest = st.oldest_unknown;
  $('tiles').replaceChildren(
    tile('success', 'Success rate', rate, decided ? `${t.paid} paid of ${plural(decided, 'decided payment', 'decided payments')}` : 'no payment decided'),
    tile('paid', 'Paid', String(t.paid ?? 0), ...perCurrency('charged', 'charged')),
    tile('declined', 'Declined', String(t.declined ?? 0), 'definitely not charged'),
    tile('unknown', 'Unknown', String(t.unknown ?? 0), 'outcome not known yet'),
    tile('refunds', 'Refunds', String(t.refunds ?? 0), ...perCurrency('refunded', 'refunded')),
    tile('discrepancies', 'Open discrepancies', String(st.open_discrepancies ?? 0),
      st.open_discrepancies ? h('button', { type: 'button', class: 'link', onclick: () => deps.showOpenDiscrepancies() }, 'show them') : 'none to resolve'),
    tile('disputes', 'Open disputes', String(st.open_disputes ?? 0),
      st.open_disputes ? h('button', { type: 'button', class: 'link', onclick: () => deps.showOpenDisputes() }, 'answer them') : 'none to answer'),
    oldest
      ? tile('oldest', 'Oldest unknown outcome', age(oldest.age_seconds), h('div', {}, `since ${when(oldest.since)}`),
        h('div', {}, 'order ', idRef(oldest.order_id, { what: 'order ID', open: deps.openOrder, cls: 'open-order' })))
      : tile('oldest', 'Oldest unknown outcome', 'none', 'every outcome is known'),
  );
  if (oldest) $('tiles').lastElementChild.classList.add('alert');

  const series = st.series || [];
  const per = st.bucket === 'day' ? 'daily' : 'hourly';
  barChart($('chart-payments'), {
    id: 'chart-payments', bucket: st.bucket, rows: series,
    keys: [{ key: 'paid', label: 'paid' }, { key: 'declined', label: 'declined' }, { key: 'unknown', label: 'unknown' }],
    title: `Payments by outcome, ${per}, ${windows[name].words}`,
    desc: `${t.paid ?? 0} paid, ${t.declined ?? 0} declined, ${t.unknown ?? 0} unknown, from ${when(st.from)} to ${when(st.to)}.`,
    empty: 'No payment in this window',
  });
  barChart($('chart-refunds'), {
    id: 'chart-refunds', bucket: st.bucket, rows: series,
    keys: [{ key: 'refunds', label: 'refunds' }],
    title: `Refunds, ${per}, ${windows[name].words}`,
    desc: `${plural(t.refunds ?? 0, 'refund', 'refunds')} from ${when(st.from)} to ${when(st.to)}.`,
    empty: 'No refund in this window',
  });
  $('overview-window').textContent = `${when(st.from)} – ${when(st.to)}, ${per}`;
  $('overview').dataset.loaded = `${name} ${st.to}`;
}
