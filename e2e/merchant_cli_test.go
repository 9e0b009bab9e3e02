package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// merchantCLI runs `payd merchant ARGS` in-process against the stack,
// with PAYD_URL and PAYD_MERCHANT_KEY (key; "" for none) set.
func (s *stack) merchantCLI(key string, args ...string) (string, error) {
	s.t.Helper()
	e := env{"PAYD_URL": s.base, "PAYD_MERCHANT_KEY": key}
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"merchant"}, args...), e.get, &out, &errOut)
	return out.String(), err
}

// TestMerchantCLI drives `payd merchant products` against a running payd:
// create, stock, reprice and hide with the merchant key, list and show
// without one; a repeated -key acts once; a refusal is payd's problem, a
// write without the key or with an admin token is refused.
func TestMerchantCLI(t *testing.T) {
	s := start(t)
	must := func(key string, args ...string) string {
		t.Helper()
		out, err := s.merchantCLI(key, args...)
		if err != nil {
			t.Fatalf("payd merchant %s = %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	out := must(testMerchantKey, "products", "create", "mug-1", "-name", "Blue mug", "-price", "12.50", "-currency", "EUR", "-stock", "3")
	wantLines(t, "create", out, `^mug-1\s+Blue mug\s+12.50 EUR\s+3\s+true$`)
	for range 2 { // one key: one adjustment
		out = must(testMerchantKey, "products", "stock", "mug-1", "-2", "-key", "cli-stock-1")
	}
	wantLines(t, "stock", out, `^mug-1\s+.*\s+1\s+true$`)
	if _, err := s.merchantCLI(testMerchantKey, "products", "stock", "mug-1", "-5"); err == nil || !strings.Contains(err.Error(), "insufficient_stock") {
		t.Errorf("taking 5 of 1 = %v, want payd's insufficient_stock", err)
	}
	must(testMerchantKey, "products", "update", "mug-1", "-price", "13.00")
	wantLines(t, "list", must("", "products", "list"), `^mug-1\s+Blue mug\s+13.00 EUR\s+1\s+true$`)
	must(testMerchantKey, "products", "create", "tea", "-name", "Tea", "-price", "3", "-currency", "JPY")
	wantLines(t, "show", must("", "products", "show", "tea"), `^tea\s+Tea\s+3 JPY\s+unlimited\s+true$`)
	must(testMerchantKey, "products", "update", "tea", "-deactivate")
	if _, err := s.merchantCLI("", "products", "show", "tea"); err == nil || !strings.Contains(err.Error(), "product_not_found") {
		t.Errorf("show an inactive product = %v, want payd's product_not_found", err)
	}
	if _, err := s.merchantCLI("", "products", "stock", "mug-1", "1"); err == nil || !strings.Contains(err.Error(), "PAYD_MERCHANT_KEY") {
		t.Errorf("a write without a key = %v, want it to name PAYD_MERCHANT_KEY", err)
	}
	if _, err := s.merchantCLI(testAdminToken, "products", "stock", "mug-1", "1"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a write with the admin token = %v, want payd's 403", err)
	}
	if _, err := s.merchantCLI(testMerchantKey, "products", "stock", "mug-1", "many"); err == nil || !strings.Contains(err.Error(), "ADJUST") {
		t.Errorf("ADJUST many = %v, want a usage error naming ADJUST", err)
	}
}
