// cart.js: the sandbox shop's catalogue and cart. Prices are decimal
// strings, as payd's API speaks them; totals are summed in integer cents and
// never pass through floating point. payd computes the order's amount
// itself: the total shown here is only a preview.

const catalogue = [
  { sku: 'tea-green', name: 'Green tea, 100 g', price: '4.95', qty: 2 },
  { sku: 'mug-stone', name: 'Stoneware mug', price: '12.00', qty: 1 },
  { sku: 'honey-wild', name: 'Wildflower honey', price: '7.50', qty: 0 },
];

/** money formats a decimal string exactly (Intl takes the string as is). */
export function money(amount, currency) {
  return new Intl.NumberFormat('en-US', { style: 'currency', currency }).format(amount);
}

/** cents turns "4.95" into 495. */
function cents(price) {
  const [whole, frac = ''] = price.split('.');
  return Number(whole) * 100 + Number((frac + '00').slice(0, 2));
}

/** decimal turns 2190 into "21.90". */
function decimal(c) {
  return `${Math.trunc(c / 100)}.${String(c % 100).padStart(2, '0')}`;
}

/** renderCart fills the cart table's body and keeps its total up to date. */
export function renderCart(body, total) {
  const renderTotal = () => {
    total.textContent = money(decimal(catalogue.reduce((sum, i) => sum + i.qty * cents(i.price), 0)), 'USD');
  };
  body.replaceChildren();
  for (const item of catalogue) {
    const row = body.insertRow();
    row.insertCell().textContent = item.name;
    const price = row.insertCell();
    price.className = 'num';
    price.textContent = money(item.price, 'USD');
    const qty = document.createElement('input');
    Object.assign(qty, { type: 'number', min: 0, max: 99, value: item.qty, id: `qty-${item.sku}` });
    qty.setAttribute('aria-label', `Quantity of ${item.name}`);
    qty.addEventListener('input', () => {
      item.qty = Math.max(0, Math.min(99, Math.trunc(Number(qty.value) || 0)));
      renderTotal();
    });
    const cell = row.insertCell();
    cell.className = 'num';
    cell.append(qty);
  }
  renderTotal();
}

/** cartItems is the cart as payd's order items. */
export function cartItems() {
  return catalogue
    .filter((i) => i.qty > 0)
    .map((i) => ({ sku: i.sku, name: i.name, quantity: i.qty, unit_price: i.price }));
}
