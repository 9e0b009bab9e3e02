package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// The checkout page on payd's catalogue: it lists what payd sells, sends
// SKUs and quantities only, shows payd's prices once the order exists,
// and says "out of stock" where a buyer looks for it.

// TestCheckoutListsTheCatalogue: the cart is the catalogue as payd lists
// it, not a list of its own: a product the page never knew, a price the
// merchant changed, no inactive product; a product with nothing left is
// shown out of stock and cannot be put in the cart; the total before the
// order exists is labelled an estimate.
func TestCheckoutListsTheCatalogue(t *testing.T) {
	chromium(t)
	b := startShopper(t, "sqlite", checkoutOptions{catalogue: []shopItem{
		{"mug-stone", "Stoneware mug", "12.00", 5},
		{"scarf-wool", "Wool scarf", "19.99", nil},
		{"honey-wild", "Wildflower honey", "7.50", 0},
		{"tea-green", "Green tea, 100 g", "4.95", nil},
	}})
	if r := b.s.merchant(testMerchantKey, "PATCH", "/v1/products/mug-stone", uuid.NewString(), map[string]any{"unit_price": "13.50"}); r.Status != http.StatusOK {
		t.Fatalf("reprice the mug = %d %s", r.Status, r.Body)
	}
	if r := b.s.merchant(testMerchantKey, "PATCH", "/v1/products/tea-green", uuid.NewString(), map[string]any{"active": false}); r.Status != http.StatusOK {
		t.Fatalf("hide the tea = %d %s", r.Status, r.Body)
	}
	b.signUp("catalogue@example.com")
	b.screenshot("catalogue-cart")

	rows, err := eval[[]string](b, `[...document.querySelectorAll('#cart-items tr')].map((r) => r.dataset.sku + '|' + r.innerText.replace(/\s+/g, ' ').trim())`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"honey-wild|Wildflower honey Out of stock $7.50", "mug-stone|Stoneware mug 5 left $13.50", "scarf-wool|Wool scarf In stock $19.99"}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("cart rows =\n  %s\nwant\n  %s", strings.Join(rows, "\n  "), strings.Join(want, "\n  "))
	}
	if disabled, err := eval[bool](b, `document.getElementById('qty-honey-wild').disabled`); err != nil || !disabled {
		t.Errorf("the sold-out honey's quantity is not disabled (%v)", err)
	}
	if out := b.attr(`#cart-items tr[data-sku="honey-wild"]`, "outOfStock"); out != "true" {
		t.Errorf("the honey's row is not marked out of stock (data-out-of-stock = %q)", out)
	}
	// Typed at anyway (the disabled field takes no keys), it stays out of the cart.
	b.do("type into the sold-out quantity", chromedp.Evaluate[chromedp.Void](`document.getElementById('qty-honey-wild').focus()`), chromedp.KeyEvent("3"))
	b.fillCart(map[string]int{"mug-stone": 2, "scarf-wool": 1})
	if got := b.text("#cart-total"); got != "$46.99" {
		t.Errorf("estimated total = %q, want $46.99 (2 × 13.50 + 19.99)", got)
	}
	if foot := b.text("#cart tfoot"); !strings.Contains(foot, "Estimated total") {
		t.Errorf("the total is not labelled an estimate: %q", foot)
	}
	if v, err := eval[string](b, `document.getElementById('qty-honey-wild').value`); err != nil || v != "0" {
		t.Errorf("the sold-out honey's quantity = %q (%v), want 0", v, err)
	}
	// A counted stock bounds the quantity: what is shown is what is ordered.
	b.setQuantity("mug-stone", 9)
	if v, _ := eval[string](b, `document.getElementById('qty-mug-stone').value`); v != "5" {
		t.Errorf("mug quantity after typing 9 of 5 left = %q, want 5", v)
	}
	for _, x := range b.tap.exchanges(nil) {
		if x.Method == "GET" && strings.HasPrefix(x.URI, "/v1/products") && x.Status != http.StatusOK {
			t.Errorf("%s %s = %d, want 200", x.Method, x.URI, x.Status)
		}
	}
}

// TestCheckoutTamperedPriceChargesTheCatalogue: a buyer who edits the
// prices in the page — the catalogue the script holds (its fetch of
// GET /v1/products rewritten) and the price shown in the DOM — changes
// only what the page previews. The page sends SKUs and quantities; payd
// prices the order from its catalogue, the page shows payd's amount, and
// the paid order and the provider's charge are the catalogue's. A page
// that sends a price anyway is refused (400 validation_failed naming
// items[0].unit_price) and nothing is written.
func TestCheckoutTamperedPriceChargesTheCatalogue(t *testing.T) {
	chromium(t)
	eachDialect(t, func(t *testing.T, dialect string) {
		b := startShopper(t, dialect, checkoutOptions{})
		// Before the page's own script runs: its catalogue says the mug costs
		// 0.01, and window.sendPrice makes every order line carry one.
		b.do("tamper with the page's fetch", func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
				const real = window.fetch;
				window.sendPrice = false;
				window.fetch = async (url, opts = {}) => {
					const path = String(url);
					if (path === '/v1/orders' && opts.method === 'POST' && window.sendPrice) {
						const body = JSON.parse(opts.body);
						body.items = body.items.map((i) => ({ ...i, unit_price: '0.01' }));
						opts = { ...opts, body: JSON.stringify(body) };
					}
					const res = await real(url, opts);
					if (!path.startsWith('/v1/products')) return res;
					const list = await res.json();
					for (const p of list.data) if (p.sku === 'mug-stone') p.unit_price = '0.01';
					return new Response(JSON.stringify(list), { status: res.status, headers: res.headers });
				};
			})()`})
			return chromedp.Void{}, err
		})
		email := "tamper@example.com"
		b.signUp(email)
		if got := b.text(`#cart-items tr[data-sku="mug-stone"] .price`); got != "$0.01" {
			t.Fatalf("the tampered mug shows %q, want $0.01: the tampering did not reach the page", got)
		}
		// And the DOM: the tea's price cell and row say 0.01 too.
		if _, err := eval[bool](b, `(() => { const r = document.querySelector('#cart-items tr[data-sku="tea-green"]');
			r.dataset.unitPrice = '0.01'; r.querySelector('.price').textContent = '$0.01'; return true; })()`); err != nil {
			t.Fatal(err)
		}
		b.fillCart(usualCart)
		if got := b.text("#cart-total"); got != "$9.91" {
			t.Errorf("estimated total with the tampered mug = %q, want $9.91 (2 × 4.95 + 0.01): the page previews what it was told", got)
		}

		// A price sent anyway: refused, nothing written.
		if _, err := eval[bool](b, `window.sendPrice = true`); err != nil {
			t.Fatal(err)
		}
		b.do("place the order with a price", chromedp.Click(chromedp.CSS("#place-order")))
		b.waitFor("payd's refusal on the page", func() bool {
			return b.displayed("#status") && b.state() == "cart" && len(b.tap.creates()) == 1 && b.tap.creates()[0].Status != 0
		})
		refused := b.tap.creates()[0]
		var p struct {
			Code   string `json:"code"`
			Errors []struct {
				Param string `json:"param"`
			} `json:"errors"`
		}
		_ = json.Unmarshal(refused.Body, &p)
		named := false
		for _, e := range p.Errors {
			named = named || e.Param == "items[0].unit_price"
		}
		if refused.Status != http.StatusBadRequest || p.Code != "validation_failed" || !named {
			t.Errorf("order with a price = %d %s, want 400 validation_failed naming items[0].unit_price", refused.Status, refused.Body)
		}
		if n := b.s.count("orders o JOIN customers c ON c.id = o.customer_id WHERE c.email = ?", email); n != 0 {
			t.Errorf("orders written for the refused creation = %d, want 0", n)
		}

		// The page as it ships: SKUs and quantities only.
		if _, err := eval[bool](b, `window.sendPrice = false`); err != nil {
			t.Fatal(err)
		}
		order := b.placeOrder()
		sent := b.tap.creates()[1].Sent
		var body struct {
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal(sent, &body); err != nil || len(body.Items) != 2 {
			t.Fatalf("order creation sent %s (%v), want two items", sent, err)
		}
		for _, it := range body.Items {
			if len(it) != 2 || it["sku"] == nil || it["quantity"] == nil {
				t.Errorf("an order line the page sent = %v, want only sku and quantity", it)
			}
		}
		if got := b.text("#order-amount"); got != "$21.90" {
			t.Errorf("the order's amount on the page = %q, want payd's $21.90", got)
		}
		if got := b.text("#order-items"); !strings.Contains(got, "1 × Stoneware mug at $12.00") || !strings.Contains(got, "2 × Green tea, 100 g at $4.95") {
			t.Errorf("the order's lines on the page = %q, want payd's prices", got)
		}
		b.choose("pm_ok")
		b.click("#pay", 1)
		b.waitState("paid")
		b.screenshot("tampered-price-paid")
		if got := b.text("#status-detail"); !strings.Contains(got, "$21.90") {
			t.Errorf("the paid message = %q, want payd's $21.90", got)
		}
		if n := b.s.count("orders WHERE id = ? AND status = 'paid' AND amount_minor = 2190", order); n != 1 {
			t.Errorf("order %s is not paid at 21.90 in payd's database", order)
		}
		charges := b.s.sandboxCharges(order, domain.ChargeSucceeded)
		if len(charges) != 1 || charges[0].Amount.StringFixed(2) != "21.90" {
			t.Errorf("the provider's charges for the order = %+v, want one of 21.90", charges)
		}
	})
}

// TestCheckoutOutOfStock: "out of stock" as a buyer expects it. A sold-out
// product is shown so and cannot be added. When another buyer takes what
// the cart counted on between listing and ordering, payd's 409
// out_of_stock is shown next to that product and named in the message,
// nothing is ordered, the cart stays as filled with what is left now, and
// the buyer lowers the quantity and orders.
func TestCheckoutOutOfStock(t *testing.T) {
	chromium(t)
	eachDialect(t, func(t *testing.T, dialect string) {
		b := startShopper(t, dialect, checkoutOptions{catalogue: []shopItem{
			{"tea-green", "Green tea, 100 g", "4.95", nil},
			{"mug-stone", "Stoneware mug", "12.00", 2},
			{"honey-wild", "Wildflower honey", "7.50", 0},
		}})
		email := "short@example.com"
		b.signUp(email)
		if got := b.text(`#avail-honey-wild`); got != "Out of stock" {
			t.Errorf("the sold-out honey says %q, want Out of stock", got)
		}
		if disabled, _ := eval[bool](b, `document.getElementById('qty-honey-wild').disabled`); !disabled {
			t.Error("the sold-out honey can be put in the cart")
		}
		b.fillCart(map[string]int{"mug-stone": 2, "tea-green": 1})

		// Another buyer takes one of the two mugs first.
		_, other := b.s.register("quicker@example.com")
		if r := b.s.do(request{method: "POST", path: "/v1/orders", token: other, key: uuid.NewString(),
			body: map[string]any{"items": []map[string]any{{"sku": "mug-stone", "quantity": 1}}}}); r.Status != http.StatusCreated {
			t.Fatalf("the other buyer's order = %d %s, want 201", r.Status, r.Body)
		}
		b.do("place the order", chromedp.Click(chromedp.CSS("#place-order")))
		b.waitFor("the out-of-stock message", func() bool { return b.attr("#app", "outOfStock") == "mug-stone" })
		b.screenshot("out-of-stock")
		if s := b.state(); s != "cart" {
			t.Errorf("page state after out_of_stock = %q, want cart: the buyer changes the cart", s)
		}
		creates := b.tap.creates()
		var p struct {
			Code string `json:"code"`
			SKU  string `json:"sku"`
		}
		_ = json.Unmarshal(creates[0].Body, &p)
		if len(creates) != 1 || creates[0].Status != http.StatusConflict || p.Code != "out_of_stock" || p.SKU != "mug-stone" {
			t.Fatalf("order creations = %+v (%s), want one 409 out_of_stock naming mug-stone", creates, creates[0].Body)
		}
		if got := b.text("#status-title"); !strings.Contains(got, "Stoneware mug") || !strings.Contains(got, "out of stock") {
			t.Errorf("status title = %q, want it to name the Stoneware mug, out of stock", got)
		}
		if got := b.text("#short-mug-stone"); got != "Only 1 left: lower the quantity." || !b.displayed("#short-mug-stone") {
			t.Errorf("next to the mug: %q (shown %v), want Only 1 left: lower the quantity.", got, b.displayed("#short-mug-stone"))
		}
		if got := b.text("#avail-mug-stone"); got != "1 left" {
			t.Errorf("the mug's stock on the page = %q, want 1 left (listed again)", got)
		}
		if v, _ := eval[string](b, `document.getElementById('qty-mug-stone').value`); v != "2" {
			t.Errorf("the mug's quantity = %q, want the buyer's 2 kept until they change it", v)
		}
		if n := b.s.count("orders o JOIN customers c ON c.id = o.customer_id WHERE c.email = ?", email); n != 0 {
			t.Errorf("orders written for the refused cart = %d, want 0", n)
		}
		if n := b.s.count("products WHERE sku = 'mug-stone' AND stock = 1"); n != 1 {
			t.Error("the refused order took stock")
		}

		b.setQuantity("mug-stone", 1)
		if b.displayed("#short-mug-stone") {
			t.Error("the note next to the mug stays after the buyer lowered the quantity")
		}
		order := b.placeOrder()
		if got := b.text("#order-amount"); got != "$16.95" {
			t.Errorf("the order's amount = %q, want payd's $16.95 (12.00 + 4.95)", got)
		}
		b.choose("pm_ok")
		b.click("#pay", 1)
		b.waitState("paid")
		b.checkCounts(order, 1)
		if n := b.s.count("products WHERE sku = 'mug-stone' AND stock = 0"); n != 1 {
			t.Error("the mug's stock is not 0 after both orders")
		}

		// The next cart shows the mug sold out.
		b.click("#new-order", 1)
		b.waitState("cart")
		if got := b.text("#avail-mug-stone"); got != "Out of stock" {
			t.Errorf("the sold-out mug says %q in a new cart, want Out of stock", got)
		}
	})
}
