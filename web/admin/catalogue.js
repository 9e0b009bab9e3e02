// catalogue.js: the merchant's catalogue as operators see it, read-only:
// every product by SKU (GET /v1/admin/products), inactive ones too, with
// its price, its stock ("unlimited" when payd does not count it) and
// whether buyers see it. Only the merchant's key changes a product; the
// console changes nothing here.

import { h, $, stored } from './dom.js';
import { call, describe } from './api.js';

let cursor = null;
let asked = 0; // only the newest request's answer is drawn

/** stockOf is a product's stock in words: a count, or unlimited. */
const stockOf = (p) => (p.stock === null || p.stock === undefined ? 'unlimited' : String(p.stock));

/** loadCatalogue draws the first page of products again, or the next one (more). */
export async function loadCatalogue(more = false) {
  const q = new URLSearchParams({ limit: '50' });
  if (more && cursor) q.set('cursor', cursor);
  const n = ++asked;
  const r = await call('GET', `/v1/admin/products?${q}`);
  if (n !== asked) return;
  const rows = $('cat-rows');
  if (r.status !== 200) {
    rows.replaceChildren();
    $('cat-table').hidden = true;
    $('cat-empty').hidden = false;
    $('cat-empty').textContent = r.status === 404 || r.status === 405
      ? 'This payd has no catalogue view.' : describe(r);
    return;
  }
  if (!more) rows.replaceChildren();
  for (const p of r.data.data) {
    const counted = p.stock !== null && p.stock !== undefined;
    rows.append(h('tr', { dataset: { sku: p.sku, active: String(p.active), stock: stockOf(p) }, class: p.active ? '' : 'inactive' },
      h('td', { class: 'sku' }, h('code', {}, stored(p.sku))),
      h('td', { class: 'name' }, stored(p.name)),
      h('td', { class: 'num' }, p.unit_price),
      h('td', {}, p.currency),
      h('td', { class: `num${counted ? (p.stock === 0 ? ' bad-text' : '') : ' none'}` }, counted && p.stock === 0 ? '0 (out of stock)' : stockOf(p)),
      h('td', {}, h('span', { class: `badge ${p.active ? 'ok' : 'wait'}` }, p.active ? 'active' : 'inactive'))));
  }
  cursor = r.data.next_cursor;
  $('cat-more').hidden = !cursor;
  $('cat-table').hidden = rows.children.length === 0;
  $('cat-empty').hidden = rows.children.length !== 0;
  $('cat-empty').textContent = 'No product yet: the merchant adds them with its key (POST /v1/products, or payd merchant products create).';
  rows.dataset.loaded = String(rows.children.length);
}
