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

/** when shows an RFC 3339 time as "2026-01-31 12:00:05 UTC". */
export function when(ts) {
  if (!ts) return '—';
  return ts.replace('T', ' ').replace(/(\.\d+)?Z$/, ' UTC');
}

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
