// The example shop's page. It never sees the merchant key: it asks the
// shop to create the order, gets the order's id and client secret back,
// and pays with the client secret (through the shop, which passes the
// call on to payd: see README.md, "Why the page pays through the shop").
"use strict";

const $ = (id) => document.getElementById(id);
let products = [];
let cartID = crypto.randomUUID(); // the order's idempotency key: a new one when the cart changes
let order = null;                 // {order_id, client_secret, amount, currency}
let payKey = null;                // one per pay attempt, kept for its retries

async function call(method, path, body, headers = {}) {
  const res = await fetch(path, {
    method, headers: { "Content-Type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch { /* no body */ }
  return { status: res.status, data };
}

function say(text) { $("message").textContent = text || ""; }

async function load() {
  const r = await call("GET", "/api/products");
  const list = $("products");
  list.replaceChildren();
  if (r.status !== 200) { say("The products could not be loaded (" + r.status + ")."); return; }
  products = r.data.data;
  for (const p of products) {
    const li = document.createElement("li");
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = p.name;
    const price = document.createElement("span");
    price.textContent = p.unit_price + " " + p.currency;
    const left = document.createElement("span");
    left.className = "stock";
    left.textContent = p.stock === null ? "" : (p.stock === 0 ? "sold out" : p.stock + " left");
    const qty = document.createElement("input");
    qty.type = "number"; qty.min = "0"; qty.max = "99"; qty.value = "0";
    qty.dataset.sku = p.sku;
    qty.disabled = p.stock === 0;
    qty.addEventListener("change", () => { cartID = crypto.randomUUID(); });
    li.append(name, price, left, qty);
    list.append(li);
  }
  $("checkout").disabled = products.length === 0;
}

function cart() {
  return [...document.querySelectorAll("#products input")]
    .map((i) => ({ sku: i.dataset.sku, quantity: Number(i.value) }))
    .filter((l) => l.quantity > 0);
}

async function checkout() {
  say("");
  const items = cart();
  if (items.length === 0) { say("Choose something first."); return; }
  const r = await call("POST", "/api/orders", { cart_id: cartID, items });
  if (r.status !== 201) {
    if (r.data && r.data.code === "out_of_stock") {
      const p = products.find((x) => x.sku === r.data.sku);
      say("Sorry, not enough " + (p ? p.name : r.data.sku) + " left. Choose fewer.");
      load();
    } else {
      say((r.data && (r.data.detail || r.data.title)) || "The order could not be created (" + r.status + ").");
    }
    return;
  }
  order = r.data;
  payKey = null;
  $("order-id").textContent = order.order_id;
  $("order-amount").textContent = order.amount + " " + order.currency;
  $("order").hidden = false;
  cartID = crypto.randomUUID();
}

async function pay() {
  if (!order) return;
  say("");
  payKey = payKey || crypto.randomUUID();
  const r = await call("POST", "/api/orders/" + encodeURIComponent(order.order_id) + "/pay",
    { payment_method: $("method").value },
    { "Authorization": "Bearer " + order.client_secret, "Idempotency-Key": payKey });
  if (r.status === 200 || r.status === 202) {
    $("pay-status").textContent = r.data.status;
    if (r.status === 200) payKey = null;
  } else {
    $("pay-status").textContent = (r.data && (r.data.code || r.data.title)) || String(r.status);
    if (r.status >= 400 && r.status < 500) payKey = null; // a decline: the next try is a new attempt
  }
  watch();
}

// watch shows what payd's signed events told the shop.
async function watch() {
  for (let i = 0; i < 30 && order; i++) {
    const r = await call("GET", "/api/orders/" + encodeURIComponent(order.order_id));
    if (r.status === 200) {
      $("shop-status").textContent = r.data.status + (r.data.events.length ? " (" + r.data.events.join(", ") + ")" : "");
      if (r.data.status === "paid") { load(); return; }
    }
    await new Promise((ok) => setTimeout(ok, 1000));
  }
}

$("checkout").addEventListener("click", checkout);
$("pay").addEventListener("click", pay);
load();
