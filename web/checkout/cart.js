// cart.js: the sandbox shop's cart, on payd's catalogue. The products, their
// prices and what is left of them come from GET /v1/products (no token);
// the cart sends payd SKUs and quantities only, and payd prices the order
// from its catalogue. The total shown before the order exists is a preview
// summed from the listed prices (in integer minor units, never through
// floating point); once the order exists, every amount shown is payd's.

import { Client, describe } from './api.js';

const MAX_QTY = 99;
const MAX_PAGES = 10; // 1,000 products: more than a sandbox shop lists

let products = []; // as payd listed them: {sku, name, unit_price, currency, stock}
const quantities = new Map(); // sku → quantity in the cart
const shortOf = new Map(); // sku → what the page says next to a product payd found short

/** money formats a decimal string exactly (Intl takes the string as is). */
export function money(amount, currency) {
  return new Intl.NumberFormat('en-US', { style: 'currency', currency }).format(amount);
}

/** minor turns a price as payd writes it ("4.95", "300") into [495, 2]. */
function minor(price) {
  const [whole, frac = ''] = String(price).split('.');
  return [BigInt(whole + frac), frac.length];
}

/** decimal turns [2190n, 2] back into "21.90". */
function decimal(units, scale) {
  const s = units.toString().padStart(scale + 1, '0');
  return scale === 0 ? s : `${s.slice(0, -scale)}.${s.slice(-scale)}`;
}

/**
 * loadCatalogue asks payd for the active products, page by page. It
 * resolves to null when it has them, else to a problem {title, detail} to
 * show; a request that got no answer throws NetworkError.
 */
export async function loadCatalogue() {
  const client = new Client(null); // the storefront's list needs no token
  const listed = [];
  let cursor = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const q = new URLSearchParams({ limit: '100' });
    if (cursor) q.set('cursor', cursor);
    const r = await client.call('GET', `/v1/products?${q}`);
    if (r.status !== 200 || !r.data || !Array.isArray(r.data.data)) return describe(r);
    listed.push(...r.data.data);
    cursor = r.data.next_cursor;
    if (!cursor) break;
  }
  products = listed;
  for (const sku of [...quantities.keys()]) {
    const p = products.find((x) => x.sku === sku);
    if (!p) quantities.delete(sku); // no longer sold
    else if (p.stock === 0) quantities.set(sku, 0); // nothing left to put in the cart
  }
  return null;
}

/** productName is the listed name of sku, or the SKU itself. */
export function productName(sku) {
  return products.find((p) => p.sku === sku)?.name ?? sku;
}

/** productLeft is how many of sku the catalogue last listed (null: unlimited, undefined: not listed). */
export function productLeft(sku) {
  return products.find((p) => p.sku === sku)?.stock;
}

/**
 * markShort notes, next to product sku, that payd found too few of it
 * for the cart; the note goes when the buyer changes that quantity.
 */
export function markShort(sku, text) {
  shortOf.set(sku, text);
}

/** availability is what a buyer reads about a product's stock. */
function availability(p) {
  if (p.stock === null || p.stock === undefined) return 'In stock';
  if (p.stock === 0) return 'Out of stock';
  return `${p.stock} left`;
}

/** renderCart draws the listed products with their quantities, and the preview total. */
export function renderCart(body, total, empty) {
  const renderTotal = () => {
    const lines = products.filter((p) => (quantities.get(p.sku) || 0) > 0);
    const currencies = new Set(lines.map((p) => p.currency));
    if (lines.length === 0 || currencies.size !== 1) {
      total.textContent = lines.length === 0 ? money('0', products[0]?.currency || 'USD') : '—';
      return;
    }
    let sum = 0n;
    let scale = 0;
    for (const p of lines) {
      const [units, s] = minor(p.unit_price);
      scale = s; // one currency: one scale
      sum += units * BigInt(quantities.get(p.sku));
    }
    total.textContent = money(decimal(sum, scale), lines[0].currency);
  };
  body.replaceChildren();
  empty.hidden = products.length !== 0;
  for (const p of products) {
    const out = p.stock === 0;
    const row = body.insertRow();
    row.dataset.sku = p.sku;
    row.dataset.unitPrice = p.unit_price;
    if (out) row.dataset.outOfStock = 'true';
    const item = row.insertCell();
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = p.name;
    const note = document.createElement('span');
    note.className = `avail${out ? ' out' : ''}`;
    note.id = `avail-${p.sku}`;
    note.textContent = availability(p);
    item.append(name, note);
    const problem = document.createElement('span');
    problem.className = 'short';
    problem.id = `short-${p.sku}`;
    problem.setAttribute('role', 'alert');
    problem.textContent = shortOf.get(p.sku) || '';
    problem.hidden = !shortOf.has(p.sku);
    item.append(problem);
    const price = row.insertCell();
    price.className = 'num price';
    price.textContent = money(p.unit_price, p.currency);
    const qty = document.createElement('input');
    const most = p.stock === null || p.stock === undefined ? MAX_QTY : Math.min(MAX_QTY, p.stock);
    Object.assign(qty, { type: 'number', min: 0, max: most, value: quantities.get(p.sku) || 0, id: `qty-${p.sku}`, disabled: out });
    qty.setAttribute('aria-label', out ? `${p.name} is out of stock` : `Quantity of ${p.name}`);
    qty.setAttribute('aria-describedby', `avail-${p.sku} short-${p.sku}`);
    if (shortOf.has(p.sku)) qty.setAttribute('aria-invalid', 'true');
    qty.addEventListener('input', () => {
      const n = Math.max(0, Math.min(most, Math.trunc(Number(qty.value) || 0)));
      quantities.set(p.sku, n);
      if (qty.value !== '' && Number(qty.value) !== n) qty.value = n; // what is shown is what is ordered
      if (shortOf.delete(p.sku)) {
        problem.hidden = true;
        qty.removeAttribute('aria-invalid');
      }
      renderTotal();
    });
    const cell = row.insertCell();
    cell.className = 'num';
    cell.append(qty);
  }
  renderTotal();
}

/** cartItems is the cart as payd's order items: SKUs and quantities, never a price. */
export function cartItems() {
  return products
    .filter((p) => (quantities.get(p.sku) || 0) > 0)
    .map((p) => ({ sku: p.sku, quantity: quantities.get(p.sku) }));
}

/** emptyCart takes every product out of the cart. */
export function emptyCart() {
  quantities.clear();
  shortOf.clear();
}
