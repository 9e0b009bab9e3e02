package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsoleShowsTheCatalogue: the console lists every product of the
// catalogue by SKU — its name, price, currency, stock ("unlimited" when
// not counted) and whether buyers see it, inactive products too — and
// shows a change the merchant made when reloaded. It only reads: nothing
// but GET /v1/admin/products goes out for it.
func TestConsoleShowsTheCatalogue(t *testing.T) {
	chromium(t)
	s := start(t)
	stockShop(s.driver, []shopItem{
		{"tea-green", "Green tea, 100 g", "4.95", nil},
		{"mug-stone", "Stoneware mug", "12.00", 0},
		{"honey-wild", "Wildflower honey", "7.50", 3},
	})
	if r := s.merchant(testMerchantKey, "PATCH", "/v1/products/honey-wild", uuid.NewString(), map[string]any{"active": false}); r.Status != http.StatusOK {
		t.Fatalf("hide the honey = %d %s", r.Status, r.Body)
	}
	p := newTap(t, s.base)
	b := consoleFor(t, s, p, 1280, true)
	b.waitFor("the catalogue listed", func() bool { return b.attr("#cat-rows", "loaded") == "3" })
	if !b.displayed("#catalogue") || !b.displayed("#cat-table") {
		t.Fatal("the catalogue section or its table is not shown")
	}
	rows, err := eval[[]string](b, `[...document.querySelectorAll('#cat-rows tr')].map((r) => [...r.cells].slice(0, 6).map((c) => c.innerText.trim()).join('|'))`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"honey-wild|Wildflower honey|7.50|USD|3|inactive",
		"mug-stone|Stoneware mug|12.00|USD|0 (out of stock)|active",
		"tea-green|Green tea, 100 g|4.95|USD|unlimited|active",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("catalogue rows =\n  %s\nwant\n  %s", strings.Join(rows, "\n  "), strings.Join(want, "\n  "))
	}
	if got := b.attr(`#cat-rows tr[data-sku="honey-wild"]`, "active"); got != "false" {
		t.Errorf("the inactive honey's row: data-active = %q, want false", got)
	}
	b.shot("console-catalogue", "#catalogue")

	if r := s.merchant(testMerchantKey, "POST", "/v1/products/mug-stone/stock", uuid.NewString(), map[string]any{"adjust": 4}); r.Status != http.StatusOK {
		t.Fatalf("restock the mug = %d %s", r.Status, r.Body)
	}
	b.do("reload the catalogue", chromedp.Click("#cat-refresh"))
	b.waitFor("the restocked mug", func() bool {
		return b.attr(`#cat-rows tr[data-sku="mug-stone"]`, "stock") == "4"
	})
	if got := b.text(`#cat-rows tr[data-sku="mug-stone"] td:nth-child(5)`); got != "4" {
		t.Errorf("the mug's stock reads %q, want 4", got)
	}
	for _, x := range p.exchanges(nil) {
		if strings.Contains(x.URI, "products") && (x.Method != "GET" || !strings.HasPrefix(x.URI, "/v1/admin/products")) {
			t.Errorf("the console sent %s %s: the catalogue view only reads GET /v1/admin/products", x.Method, x.URI)
		}
	}
	if n := len(p.exchanges(func(x exchange) bool {
		return strings.HasPrefix(x.URI, "/v1/admin/products") && x.Status == http.StatusOK
	})); n < 2 {
		t.Errorf("GET /v1/admin/products answered 200 %d times, want at least 2 (sign-in, reload)", n)
	}
}
