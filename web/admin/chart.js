// chart.js: bar charts drawn as inline SVG, by the console itself (no
// library, nothing fetched). One bar per bucket of payd's stats, stacked
// by key; axes with labels, a title and a description for screen readers,
// and the axes still drawn when there is nothing to count. Every bar
// carries data-key, data-start and data-value: what it stands for, not
// only its height.

import { when } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** niceMax rounds a count up to 1, 2 or 5 times a power of ten, so the axis reads in round numbers. */
export function niceMax(n) {
  if (n <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(n));
  for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}

/** bucketLabel names a bucket's start on the x axis: its UTC hour, or its UTC day. */
export function bucketLabel(start, bucket) {
  const t = String(start);
  return bucket === 'day' ? t.slice(5, 10) : t.slice(11, 16);
}

const H = 220;
const M = { top: 12, right: 10, bottom: 40, left: 40 };

/**
 * barChart draws rows (payd's stats series) into svg as stacked bars, one
 * per bucket, keys stacked bottom up: keys is [{key, label}]. title and
 * desc name the chart for those who cannot see it; empty is what it says
 * when every count is zero.
 */
export function barChart(svg, { id, title, desc, keys, rows, bucket, empty }) {
  // Drawn at the width it has on screen, so its text is the page's size
  // whatever the chart's width; the height stays.
  const W = Math.max(320, Math.round(svg.getBoundingClientRect().width) || 640);
  svg.replaceChildren();
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.append(s('title', { id: `${id}-title` }, title), s('desc', { id: `${id}-desc` }, desc));
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const totals = rows.map((r) => keys.reduce((sum, k) => sum + (Number(r[k.key]) || 0), 0));
  const top = niceMax(Math.max(0, ...totals));
  const y = (v) => M.top + ph - (v / top) * ph;

  // y axis: 0, the middle (when it is a whole number) and the top, with grid lines.
  const ticks = [0, top];
  if (top >= 2 && top % 2 === 0) ticks.splice(1, 0, top / 2);
  for (const v of ticks) {
    svg.append(
      s('line', { class: v === 0 ? 'axis' : 'grid-line', x1: M.left, x2: W - M.right, y1: y(v), y2: y(v) }),
      s('text', { x: M.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, v));
  }
  svg.append(s('line', { class: 'axis', x1: M.left, x2: M.left, y1: M.top, y2: M.top + ph }));
  svg.append(s('text', { x: 12, y: M.top + ph / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${M.top + ph / 2})` }, 'count'));

  // x axis: at most about eight labels, evenly spread.
  const n = Math.max(rows.length, 1);
  const band = pw / n;
  const every = Math.max(1, Math.ceil(rows.length / 8));
  rows.forEach((r, i) => {
    if (i % every !== 0) return;
    const x = M.left + band * (i + 0.5);
    svg.append(s('line', { class: 'axis', x1: x, x2: x, y1: M.top + ph, y2: M.top + ph + 4 }),
      s('text', { x, y: M.top + ph + 16, 'text-anchor': 'middle' }, bucketLabel(r.start, bucket)));
  });
  svg.append(s('text', { x: M.left + pw / 2, y: H - 6, 'text-anchor': 'middle' }, bucket === 'day' ? 'day (UTC)' : 'hour (UTC)'));

  // the bars
  const bw = Math.max(1, Math.min(band * 0.7, 48));
  const bars = s('g', { class: 'bars' });
  rows.forEach((r, i) => {
    const x = M.left + band * (i + 0.5) - bw / 2;
    let base = 0;
    for (const k of keys) {
      const v = Number(r[k.key]) || 0;
      if (v <= 0) continue;
      const y0 = y(base + v);
      bars.append(s('rect', { class: `bar bar-${k.key}`, x, y: y0, width: bw, height: y(base) - y0, dataset: { key: k.key, start: r.start, value: v } },
        s('title', {}, `${when(r.start)}: ${v} ${k.label}`)));
      base += v;
    }
  });
  svg.append(bars);
  if (totals.every((t) => t === 0)) {
    svg.append(s('text', { class: 'empty', x: M.left + pw / 2, y: M.top + ph / 2, 'text-anchor': 'middle' }, empty));
  }
  svg.dataset.drawn = String(rows.length);
}
