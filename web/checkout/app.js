// app.js: the checkout page's screens. The cart, on payd's catalogue, lives
// in cart.js and the payment rules in payment.js; this file wires them to
// the page. main[data-state] names the screen the customer sees
// (signed-out, cart (once the catalogue is drawn), ready, paying,
// processing, checking, recovering, authenticating (3-D Secure, Stripe
// mode), paid, declined, error, offline, closed); main[data-out-of-stock]
// names the SKU payd last found short.

import { Client, NetworkError, describe, send } from './api.js';
import { cartItems, emptyCart, loadCatalogue, markShort, money, productLeft, productName, renderCart } from './cart.js';
import { forgetIntent, intentFor, isOpen, pay, saveIntent, savedIntent, settle } from './payment.js';
import { complete, loadConfig, methodFor, needsCard, setUp } from './stripe.js';

const $ = (id) => document.getElementById(id);
const SESSION = 'payd.checkout.session'; // sessionStorage: the token lives no longer than the tab
const ORDER = 'payd.checkout.order'; // localStorage, beside the payment intent
const SIGNUP = 'payd.checkout.signup'; // the registration's key, until it succeeds

let client = new Client(null);
let busy = false; // a payment is on its way: every other click on Pay is ignored

const read = (store, k) => {
  try {
    return JSON.parse(store.getItem(k));
  } catch {
    return null;
  }
};
const write = (store, k, v) => (v == null ? store.removeItem(k) : store.setItem(k, JSON.stringify(v)));

function setState(state) {
  $('app').dataset.state = state;
}

function showStatus(tone, title, detail) {
  const box = $('status');
  box.dataset.tone = tone;
  $('status-title').textContent = title;
  $('status-detail').textContent = detail || '';
  box.hidden = false;
}

function hideStatus() {
  $('status').hidden = true;
}

function progress(text, state) {
  $('progress-text').textContent = text;
  $('progress').hidden = false;
  $('payment').setAttribute('aria-busy', 'true');
  if (state) setState(state);
}

function stopProgress() {
  $('progress').hidden = true;
  $('payment').removeAttribute('aria-busy');
}

function signedIn(who) {
  $('who').textContent = who;
  $('signed-in').hidden = false;
  $('signed-out').hidden = true;
}

/** drawCart draws the catalogue as last listed, with the cart's quantities. */
function drawCart() {
  renderCart($('cart-items'), $('cart-total'), $('catalogue-empty'));
}

/**
 * refreshCatalogue lists payd's products again (what is for sale, at
 * what price, how many are left) and draws the cart; it reports whether
 * it could.
 */
async function refreshCatalogue() {
  let problem;
  try {
    problem = await loadCatalogue();
  } catch (err) {
    if (!(err instanceof NetworkError)) throw err;
    problem = { title: 'We could not reach the shop', detail: 'Check your connection and reload the page.' };
  }
  drawCart();
  if (problem) showStatus('bad', problem.title, problem.detail);
  return !problem;
}

/** showCart shows the cart, once the shop's products are listed (data-state cart). */
async function showCart() {
  $('cart').hidden = false;
  $('payment').hidden = true;
  $('new-order').hidden = true;
  $('cart').setAttribute('aria-busy', 'true');
  await refreshCatalogue();
  $('cart').removeAttribute('aria-busy');
  if (!$('cart').hidden) setState('cart'); // not signed out meanwhile
}

function showOrder(order) {
  $('cart').hidden = true;
  $('payment').hidden = false;
  $('order-id').textContent = order.id;
  $('order-amount').textContent = money(order.amount, order.currency);
  // payd's prices, as it priced the order: the page adds nothing up here.
  $('order-items').replaceChildren(...(order.items || []).map((i) => {
    const li = document.createElement('li');
    li.textContent = `${i.quantity} × ${i.name}${i.unit_price ? ` at ${money(i.unit_price, order.currency)}` : ''}`;
    return li;
  }));
  $('app').dataset.orderId = order.id;
  $('method').closest('.field').hidden = false;
}

/**
 * lockMethod keeps an open intent's method: its key was made for it. The
 * hint is shown only once the payment rests (explain), never while it is in
 * flight: nothing may move under the customer's cursor between two clicks.
 */
function lockMethod(intent, explain = false) {
  const locked = !!intent && intent.status === 'open';
  if (locked) $('method').value = intent.method;
  $('method').disabled = locked;
  $('method-hint').hidden = !(locked && explain);
}

function payButton(label, show = true) {
  $('pay').textContent = label;
  $('pay').hidden = !show;
  $('pay').disabled = false;
}

/** finish shows a settled outcome and records it on the intent. */
function finish(intent, outcome) {
  stopProgress();
  // Only the page's own open intent is recorded; an order paid elsewhere is just shown.
  if (intent.status === 'open' && ['paid', 'declined', 'refused', 'closed'].includes(outcome.kind)) {
    intent.status = outcome.kind;
    saveIntent(intent);
  }
  lockMethod(intent, true);
  $('method').closest('.field').hidden = ['paid', 'closed'].includes(outcome.kind);
  $('new-order').hidden = !['paid', 'closed'].includes(outcome.kind);
  const order = read(localStorage, ORDER);
  switch (outcome.kind) {
    case 'paid':
      setState('paid');
      payButton('Pay', false);
      if (outcome.order && outcome.order.status === 'authorized') {
        // A manual-capture order: the money is held, and charged when the shop captures it.
        showStatus('ok', 'Payment authorized', `Thank you! ${money(order.amount, order.currency)} is authorized on your card for order ${order.id}: the shop charges it when your order ships.`);
      } else {
        showStatus('ok', 'Payment received', `Thank you! Order ${order.id} is paid (${money(order.amount, order.currency)}).`);
      }
      break;
    case 'declined':
      setState('declined');
      payButton('Pay again');
      showStatus('bad', outcome.problem.title, outcome.problem.detail);
      break;
    case 'refused':
      setState('error');
      payButton('Pay');
      showStatus('bad', outcome.problem.title, outcome.problem.detail);
      break;
    case 'closed':
      setState('closed');
      payButton('Pay', false);
      showStatus('bad', 'This order can no longer be paid',
        `${outcome.order.status === 'expired' ? 'It expired before it was paid' : 'It was cancelled'}. Start a new order to buy these items.`);
      break;
    case 'unsent':
      setState('ready');
      payButton('Continue payment');
      showStatus('info', 'Your payment has not gone through yet',
        'Press “Continue payment” to send it. It keeps its payment key, so you cannot be charged twice.');
      break;
    default: // unreachable
      setState('offline');
      payButton('Try again');
      showStatus('bad', 'We could not reach the payment service',
        'Your payment is kept. Press “Try again”: it uses the same payment key, so you cannot be charged twice.');
  }
  $('status-title').focus();
}

/** run drives an intent to its outcome with the Pay button held down. */
async function run(intent, firstStep) {
  busy = true;
  $('pay').disabled = true;
  $('new-order').hidden = true;
  lockMethod(intent);
  try {
    let outcome = await firstStep();
    if (outcome.kind === 'processing' && outcome.action) {
      // 3-D Secure: the customer completes it at Stripe; the webhook settles it.
      progress('Confirm the payment with your bank (3-D Secure)…', 'authenticating');
      await complete(outcome.action);
    }
    finish(intent, await settle(client, intent, outcome, progress));
  } catch (err) {
    finish(intent, { kind: 'unreachable' }); // never leave the customer with a dead button
    throw err;
  } finally {
    busy = false;
  }
}

async function onPay() {
  if (busy) return; // the button is disabled too; this covers clicks queued before it was
  busy = true;
  $('pay').disabled = true; // synchronously, before anything awaits
  const order = read(localStorage, ORDER);
  const open = savedIntent();
  // An open intent keeps its method; a new one in Stripe mode may need the
  // card field turned into a PaymentMethod first.
  // Nothing is awaited before the intent is stored unless the card field
  // must become a PaymentMethod first: a second click finds the page busy.
  const chosen = isOpen(open, order.id) ? open.method : $('method').value;
  const method = needsCard(chosen) ? await methodFor(chosen) : chosen;
  if (!method) {
    busy = false;
    $('pay').disabled = false;
    return showStatus('bad', 'Check your card', 'The card details are incomplete.');
  }
  const intent = intentFor(order.id, method);
  hideStatus();
  progress('Sending your payment…', 'paying');
  return run(intent, () => pay(client, intent, progress));
}

async function onRegister(event) {
  event.preventDefault();
  const email = $('email').value.trim();
  const name = $('name').value.trim();
  // One key per registration, kept until it succeeds: a retry (or a reload)
  // gets the same customer and token back instead of "email taken".
  let signup = read(localStorage, SIGNUP);
  if (!signup || signup.email !== email || signup.name !== name) {
    signup = { key: crypto.randomUUID(), email, name };
    write(localStorage, SIGNUP, signup);
  }
  const r = await guarded($('register'), () =>
    send(new Client(null), 'POST', '/v1/customers', { key: signup.key, body: { email, name } }));
  if (!r) return;
  if (r.status !== 201) return problem(r);
  write(localStorage, SIGNUP, null);
  start(r.data.token, `${r.data.customer.name} (${r.data.customer.email})`);
}

async function onToken(event) {
  event.preventDefault();
  const token = $('token').value.trim();
  const r = await guarded($('use-token'), () => new Client(token).call('GET', '/v1/orders?limit=1'));
  if (!r) return;
  if (r.status !== 200) return problem(r);
  $('token').value = '';
  start(token, 'a saved customer token');
}

async function onPlaceOrder(event) {
  event.preventDefault();
  const items = cartItems(); // SKUs and quantities: payd prices them from its catalogue
  if (items.length === 0) return showStatus('bad', 'Your cart is empty', 'Add at least one item.');
  const key = crypto.randomUUID(); // a retry of this press makes one order, not two
  const r = await guarded($('place-order'), () =>
    send(client, 'POST', '/v1/orders', { key, body: { items } }));
  if (!r) return;
  if (r.status === 409 && r.data && r.data.code === 'out_of_stock') return outOfStock(r);
  if (r.status !== 201) {
    problem(r);
    // A product may have changed or gone since the list was drawn: show
    // the shop as it is now, and keep payd's words on screen.
    if (r.status === 400 || r.status === 404 || r.status === 409) await refreshCatalogue();
    return;
  }
  delete $('app').dataset.outOfStock;
  const order = orderOf(r.data);
  write(localStorage, ORDER, order);
  showOrder(order);
  lockMethod(null);
  payButton('Pay');
  setState('ready');
}

/** orderOf is what the page keeps of payd's order: its amounts as payd priced them. */
function orderOf(o) {
  return {
    id: o.id, amount: o.amount, currency: o.currency,
    items: (o.items || []).map(({ name, quantity, unit_price }) => ({ name, quantity, unit_price })),
  };
}

/**
 * outOfStock is payd's 409 out_of_stock at order creation: nothing was
 * ordered. The cart stays as the buyer filled it, drawn again with what is
 * left now; the product payd named says so in its row, and the status
 * names it.
 */
async function outOfStock(r) {
  const sku = r.data.sku;
  const name = productName(sku);
  await refreshCatalogue();
  const left = productLeft(sku);
  const soldOut = left === 0 || left === undefined;
  markShort(sku, soldOut ? 'Sold out: taken out of your cart.' : `Only ${left} left: lower the quantity.`);
  drawCart();
  showStatus('bad', `${name} is out of stock`,
    `There are not enough of ${name} left for your order${soldOut ? '' : ` (${left} left)`}. Nothing was ordered. ` +
    'Change your cart and place the order again.');
  $('app').dataset.outOfStock = sku;
  const qty = document.getElementById(`qty-${sku}`);
  if (qty && !qty.disabled) qty.focus();
}

/** guarded runs one request with its button disabled; null when payd was out of reach. */
async function guarded(button, request) {
  button.disabled = true;
  hideStatus();
  try {
    return await request();
  } catch (err) {
    if (!(err instanceof NetworkError)) throw err;
    showStatus('bad', 'We could not reach the shop', 'Check your connection and try again.');
    return null;
  } finally {
    button.disabled = false;
  }
}

function problem(reply) {
  const p = describe(reply);
  showStatus('bad', p.title, p.detail);
}

function start(token, who) {
  delete $('app').dataset.outOfStock;
  write(sessionStorage, SESSION, { token, who });
  client = new Client(token);
  signedIn(who);
  hideStatus();
  resume();
}

/** resume shows the stored order as payd has it, and recovers an open payment. */
async function resume() {
  const order = read(localStorage, ORDER);
  if (!order) return showCart();
  showOrder(order);
  const intent = savedIntent();
  if (isOpen(intent, order.id)) {
    // Reloaded mid-payment: find out what happened; never send a new payment.
    progress('Checking on your payment…', 'recovering');
    return run(intent, async () => ({ kind: 'check' }));
  }
  lockMethod(null);
  let r;
  try {
    r = await client.call('GET', `/v1/orders/${encodeURIComponent(order.id)}`);
  } catch {
    return finish({ orderId: order.id, status: 'none' }, { kind: 'unreachable' });
  }
  if (r.status === 401) {
    signOut();
    return problem(r); // the token no longer works: say so, plainly
  }
  if (r.status === 404) {
    write(localStorage, ORDER, null); // not this customer's order
    return showCart();
  }
  const o = r.data || {};
  if (o.id === order.id && o.amount) {
    write(localStorage, ORDER, orderOf(o)); // payd's order as it stands
    showOrder(orderOf(o));
  }
  if (o.status === 'pending') {
    payButton(intent && intent.orderId === order.id && intent.status === 'declined' ? 'Pay again' : 'Pay');
    return setState('ready');
  }
  // Paid, closed, or a payment started elsewhere: follow it under its own key.
  const other = { orderId: order.id, key: o.pay_request_id || 'none', method: '', status: 'watch' };
  return run(other, async () => ({ kind: 'check' }));
}

function newOrder() {
  write(localStorage, ORDER, null);
  forgetIntent();
  emptyCart();
  hideStatus();
  lockMethod(null);
  showCart();
}

function signOut() {
  write(sessionStorage, SESSION, null);
  client = new Client(null);
  $('signed-in').hidden = true;
  $('signed-out').hidden = false;
  $('cart').hidden = true;
  $('payment').hidden = true;
  hideStatus();
  setState('signed-out');
}

await setUp(await loadConfig(), $('method'), $('card-element'), document.querySelector('label[for="method"]'));
$('register-form').addEventListener('submit', onRegister);
$('token-form').addEventListener('submit', onToken);
$('cart-form').addEventListener('submit', onPlaceOrder);
$('pay').addEventListener('click', onPay);
$('new-order').addEventListener('click', newOrder);
$('sign-out').addEventListener('click', signOut);
const session = read(sessionStorage, SESSION);
if (session && session.token) start(session.token, session.who);
else setState('signed-out');
