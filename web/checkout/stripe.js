// stripe.js: the checkout page in Stripe mode (PAYD_PROVIDER=stripe).
//
// The page reads /checkout/config.json. In Stripe mode it offers Stripe's
// test PaymentMethods (pm_card_visa, ...; what the browser tests use) and,
// when payd has a publishable key, a real card field: Stripe.js Elements,
// loaded from js.stripe.com (it needs the internet). Card data goes from
// that field to Stripe only; payd receives the pm_… id it makes. A payment
// that needs 3-D Secure comes back 202 with next_action; the page hands its
// client_secret to Stripe.js, and Stripe's webhook settles the order.

const TEST_METHODS = [
  ['pm_card_visa', 'Test card that pays (pm_card_visa)'],
  ['pm_card_chargeDeclined', 'Test card that is declined'],
  ['pm_card_chargeDeclinedInsufficientFunds', 'Test card without funds'],
  ['pm_card_threeDSecure2Required', 'Test card that asks for 3-D Secure'],
];
const ELEMENTS = 'elements'; // the option that pays with the card field

let stripe = null; // Stripe.js, once loaded
let card = null; // the Elements card field

/** loadConfig returns the page's provider settings (sandbox when unreadable). */
export async function loadConfig() {
  try {
    const r = await fetch('/checkout/config.json', { cache: 'no-cache' });
    if (r.ok) return await r.json();
  } catch {
    // the sandbox page still works
  }
  return { provider: 'sandbox' };
}

/** setUp turns the method list into Stripe's, and mounts Elements if it can. */
export async function setUp(cfg, select, cardBox, label) {
  if (cfg.provider !== 'stripe') return;
  label.textContent = 'Payment method (Stripe)';
  const options = TEST_METHODS.map(([value, text]) => new Option(text, value));
  if (cfg.stripe_publishable_key) {
    try {
      await loadScript('https://js.stripe.com/v3/');
      stripe = window.Stripe(cfg.stripe_publishable_key);
      card = stripe.elements().create('card');
      card.mount(cardBox);
      options.unshift(new Option('Card', ELEMENTS));
    } catch {
      stripe = null; // offline: the test methods remain
    }
  }
  select.replaceChildren(...options);
  const show = () => { cardBox.hidden = select.value !== ELEMENTS; };
  select.addEventListener('change', show);
  show();
}

/** needsCard reports whether paying with value first needs Stripe.js (the card field). */
export const needsCard = (value) => value === ELEMENTS;

/**
 * methodFor is the payment method a click pays with: the chosen test id,
 * or a PaymentMethod Stripe.js makes from the card field (null when the
 * card is incomplete; Stripe.js shows why).
 */
export async function methodFor(value) {
  if (value !== ELEMENTS) return value;
  if (!stripe || !card) return null;
  const { paymentMethod, error } = await stripe.createPaymentMethod({ type: 'card', card });
  return error ? null : paymentMethod.id;
}

/**
 * complete lets the customer finish a step Stripe asks for (3-D Secure),
 * when Stripe.js is loaded; the outcome still comes from payd (the
 * webhook), never from this promise. Without Stripe.js (test methods,
 * offline) the page just waits: in test mode the step is completed at
 * Stripe (the Dashboard, or the tests' fake).
 */
export async function complete(action) {
  if (!action || !stripe) return false;
  try {
    await stripe.handleNextAction({ clientSecret: action.client_secret });
  } catch {
    // the outcome is read from payd either way
  }
  return true;
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement('script');
    s.src = src;
    s.onload = resolve;
    s.onerror = reject;
    document.head.append(s);
  });
}
