// dom.js: building the page from payd's answers. Everything payd returns
// goes in as text (textContent), never as HTML: a note or a reference an
// operator typed cannot become script in another operator's console.

/** h makes an element: h('td', {class: 'num'}, 'text', child, ...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'onclick') el.addEventListener('click', v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const $ = (id) => document.getElementById(id);

/**
 * when shows an RFC 3339 time as "2026-01-31 12:00:05 UTC", the one format
 * the console writes and reads times in (times.js takes them the same
 * way). A time with an offset is shown in UTC too.
 */
export function when(ts) {
  if (!ts) return '—';
  const s = String(ts);
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(s)) return s.slice(0, 19).replace('T', ' ') + ' UTC';
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? s : utc(d);
}

/** utc shows a Date as "2026-01-31 12:00:05 UTC". */
export const utc = (d) => `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;

/**
 * stored is text someone stored (a URL, a name, a reason, a note) as the
 * page shows it: in a <bdi>, so its direction is its own. A right-to-left
 * override inside it (U+202E) turns nothing around it, and pulls no badge
 * or time into it; a long unbroken value wraps (style.css).
 */
export const stored = (value) => h('bdi', {}, String(value ?? ''));

/**
 * tone sorts an outcome into ok, wait or bad, for its colour: the words are
 * payd's (statuses, resolutions, HTTP results), the colour only a hint.
 */
export function tone(outcome) {
  const s = String(outcome ?? '');
  if (/^[2]\d\d\b/.test(s)) return 'ok';
  if (/^[45]\d\d\b/.test(s)) return 'bad';
  if (/(^|\b)(succeeded|paid|applied|resolved|refunded|auto_refunded|ok|created|booked|won)\b/.test(s)) return 'ok';
  if (/(^|\b)(failed|declined|rejected|error|expired|cancelled|duplicate|mismatch|lost)\b/.test(s)) return 'bad';
  return 'wait';
}

/** badge is an outcome as a coloured label. */
export const badge = (outcome) => h('span', { class: `badge ${tone(outcome)}` }, outcome || '—');

/**
 * short is an ID as the console shows it: its first 8 and last 4
 * characters. payd's IDs are UUIDv7, whose first characters are a
 * timestamp shared by everything made in the same minute; the last ones
 * are random and tell neighbours apart.
 */
export const short = (id) => {
  const s = String(id ?? '');
  return s.length > 14 ? `${s.slice(0, 8)}…${s.slice(-4)}` : s;
};

/**
 * copyText puts text on the clipboard: the Clipboard API where the page
 * may use it (a secure context), else a selected, off-screen textarea and
 * the older copy command. It reports whether either worked.
 */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // denied: try the older way
  }
  const area = h('textarea', { class: 'offscreen', readonly: true, 'aria-hidden': 'true', tabindex: '-1' });
  area.value = text;
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** copyButton copies text when pressed and says whether it could. */
export function copyButton(text, what) {
  const b = h('button', { type: 'button', class: 'copy', title: `Copy the whole ${what}`, 'aria-label': `Copy ${what} ${text}` }, 'copy');
  b.addEventListener('click', async (e) => {
    e.stopPropagation(); // a copy in a row is not a click on the row
    const ok = await copyText(text);
    b.dataset.copied = ok ? 'yes' : 'no';
    b.textContent = ok ? 'copied' : 'select it';
    setTimeout(() => {
      b.textContent = 'copy';
      delete b.dataset.copied;
    }, 1500);
  });
  return b;
}

/**
 * idRef shows an ID shortened, whole on hover (title) and in data-id,
 * with a copy button. With open, the ID is a button that opens it.
 */
export function idRef(id, { what = 'ID', open, cls = '' } = {}) {
  if (!id) return h('span', { class: 'none' }, '—');
  const label = open
    ? h('button', { type: 'button', class: `link id ${cls}`.trim(), title: id, 'aria-label': `Open ${what} ${id}`, onclick: (e) => { e.stopPropagation(); open(id); } }, short(id))
    : h('span', { class: `id ${cls}`.trim(), title: id }, short(id));
  return h('span', { class: 'idref', dataset: { id } }, label, copyButton(id, what));
}

/** amount is "9.90 USD", or "—" when payd sent none. */
export const amount = (value, currency) => (value === undefined || value === null || value === '' ? '—' : `${value} ${currency ?? ''}`.trim());

/** age says how long ago a number of seconds is, in words an operator reads at a glance. */
export function age(seconds) {
  const s = Math.max(0, Math.round(Number(seconds) || 0));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs} h ${m % 60} min`;
  return `${Math.floor(hrs / 24)} d ${hrs % 24} h`;
}

// idPattern finds payd's IDs (UUIDs) in text, with a provider's prefix
// (ch_, dp_, re_, ...) when they carry one.
const idPattern = /(?:[a-z]{2,4}_)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/**
 * withIds is stored text with every ID in it drawn as idRef draws one
 * (shortened, whole on hover and copy), so a note, a reference or a
 * timeline line does not wrap on a 36-character ID; the whole in a <bdi>,
 * as stored() draws text.
 */
export function withIds(text, what = 'ID') {
  const s = String(text ?? '');
  const out = [];
  let last = 0;
  for (const m of s.matchAll(idPattern)) {
    if (m.index > last) out.push(s.slice(last, m.index));
    out.push(idRef(m[0], { what }));
    last = m.index + m[0].length;
  }
  if (last < s.length) out.push(s.slice(last));
  return h('bdi', {}, out); // stored text: isolated, as stored() does
}
