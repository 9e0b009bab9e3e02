// times.js: the time fields (the order search's and the reconciliation's
// window). An operator reads and types a time in the one format the page
// shows every time in, "2026-12-03 12:33:03 UTC" (dom.js's when), never in
// the browser's locale ("12/03/2026, 12:33:03 PM", which a datetime-local
// field shows, in local time at that). The field is plain text; what goes
// to payd is RFC 3339 in UTC, "2026-12-03T12:33:03Z", as before.

import { utc } from './dom.js';

// shape is what a field takes: the date, a space (or T), the time with or
// without its seconds, and UTC (or Z), which may be left off: every field
// is in UTC.
const shape = '(\\d{4})-(\\d{2})-(\\d{2})[ T](\\d{2}):(\\d{2})(?::(\\d{2}))?(?: ?UTC| ?Z)?';
const whole = new RegExp(`^${shape}$`);

/** SAY is what a field says of a time it cannot read. */
export const SAY = 'Write a UTC time as YYYY-MM-DD HH:MM:SS UTC, e.g. 2026-12-03 12:33:03 UTC.';

/**
 * parseTime reads text as a field takes it and returns the time in RFC 3339
 * ("2026-12-03T12:33:03Z"), or null when it is no such time (another
 * shape, or a date that does not exist, such as 2026-02-30).
 */
export function parseTime(text) {
  const m = whole.exec(String(text ?? '').trim());
  if (!m) return null;
  const [y, mo, d, hh, mm, ss = '00'] = m.slice(1);
  const t = new Date(Date.UTC(+y, +mo - 1, +d, +hh, +mm, +ss));
  const back = t.toISOString().slice(0, 19);
  const asked = `${y}-${mo}-${d}T${hh}:${mm}:${ss}`;
  return back === asked ? `${asked}Z` : null;
}

/** timeValue is what field holds, in RFC 3339 for payd; '' when it is empty. */
export const timeValue = (field) => parseTime(field.value) ?? '';

/** setTime writes the Date d into field, as the page writes times. */
export function setTime(field, d) {
  field.value = utc(d);
  check(field, true);
}

/**
 * check marks field valid or not (its form is not sent while it is not,
 * and the browser shows SAY); with say, it also says so beside the field
 * (its -error element), as it does once the operator leaves the field or
 * sends the form, not at every key.
 */
function check(field, say) {
  const v = field.value.trim();
  const ok = v === '' || parseTime(v) !== null;
  field.setCustomValidity(ok ? '' : SAY);
  if (!ok && !say) return;
  if (ok) field.removeAttribute('aria-invalid');
  else field.setAttribute('aria-invalid', 'true');
  const out = document.getElementById(`${field.id}-error`);
  if (out) out.textContent = ok ? '' : SAY;
}

/**
 * timeField wires a text field to take times: the shape as its pattern
 * and placeholder, a clear message when it is not a time, and, once left,
 * a time typed another way it takes (no seconds, a T, no UTC) written
 * back the page's way.
 */
export function timeField(field) {
  field.pattern = shape;
  field.placeholder = '2026-12-03 12:33:03 UTC';
  field.addEventListener('input', () => check(field, field.hasAttribute('aria-invalid')));
  field.addEventListener('invalid', () => check(field, true));
  field.addEventListener('change', () => {
    const t = parseTime(field.value);
    if (t) field.value = utc(new Date(t));
    check(field, true);
  });
  check(field, false);
}
