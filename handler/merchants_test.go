package handler

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// stockCatalogue is the catalogue's port with one product of unlimited
// stock, whatever the SKU asked.
type stockCatalogue struct{ Catalogue }

func (stockCatalogue) Shown(_ context.Context, sku string) (domain.Product, error) {
	return domain.Product{SKU: sku, Name: "X", UnitPrice: decimal.NewFromInt(1), Currency: "USD", Active: true}, nil
}

func (c stockCatalogue) AdjustStock(ctx context.Context, sku string, _ int64) (domain.Product, error) {
	return c.Shown(ctx, sku)
}

// trail keeps the audit entries it is given.
type trail struct{ entries []domain.AuditEntry }

func (a *trail) Record(_ context.Context, e domain.AuditEntry) error {
	a.entries = append(a.entries, e)
	return nil
}

const merchantKey, erpKey = "sk_handler_test_0123456789abcdef", "sk_handler_erp_0123456789abcdef0"

// merchantServer is payd's routes with rl's limits, the merchant's two
// keys, customer a (token a1) and the admin token.
func merchantServer(t *testing.T, rl RateLimits, audit *trail) http.Handler {
	t.Helper()
	custs := &tokenCustomers{byToken: map[string]string{"a1": "cust-a"}}
	sealer, err := idempotency.NewSealer("a server secret of enough length")
	if err != nil {
		t.Fatal(err)
	}
	engine := &idempotency.Engine{Records: repository.NewRecordStore(dbtest.Open(t, migrations.SQLite)), Sealer: sealer,
		Lease: 30 * time.Second, InflightWait: 50 * time.Millisecond, TTL: time.Hour, Now: time.Now}
	return New(Deps{Log: slog.New(slog.DiscardHandler), Customers: custs, Orders: emptyOrders{}, Admin: &Admin{},
		Idempotency: engine, AdminToken: adminTok, MerchantKey: merchantKey, Merchants: []Merchant{{Name: "erp", Key: erpKey}},
		Products: &Products{Service: stockCatalogue{}, Audit: audit}, RateLimits: rl})
}

// TestRateLimitMerchants: each merchant key is limited by its own name,
// apart from the other keys, the operators and the customers; the public
// catalogue reads are limited by address.
func TestRateLimitMerchants(t *testing.T) {
	e := merchantServer(t, RateLimits{Rate: slow, Burst: 2}, &trail{})
	adjust := func(tok, key string) int {
		return call(e, "POST", "/v1/products/x/stock", "192.0.2.1", tok, "Idempotency-Key", key, "Content-Type", "application/json").Code
	}
	for _, tok := range []string{merchantKey, erpKey} {
		for i := range 2 {
			if got := adjust(tok, tok[:10]+string(rune('a'+i))); got != http.StatusBadRequest { // no body: 400, yet a request of the key's
				t.Fatalf("adjust %d with %s = %d, want 400", i, tok[:10], got)
			}
		}
		wantLimited(t, call(e, "POST", "/v1/products/x/stock", "192.0.2.1", tok, "Idempotency-Key", "k-over"), "merchant", 2, 2000)
	}
	wantStatus(t, call(e, "GET", "/v1/admin/whoami", "192.0.2.1", adminTok), "operator beside the merchant", 200)
	wantStatus(t, call(e, "GET", "/v1/orders", "192.0.2.1", "a1"), "customer beside the merchant", 200)
	wantStatus(t, call(e, "GET", "/v1/products/x", "192.0.2.2", ""), "a public read", 200)
}

// TestMerchantAudited: a catalogue write is audited under merchant:NAME,
// the product named as its target, and the merchant's idempotency scope
// is one for every key.
func TestMerchantAudited(t *testing.T) {
	audit := &trail{}
	e := merchantServer(t, RateLimits{}, audit)
	for _, tok := range []string{merchantKey, erpKey} {
		call(e, "POST", "/v1/products/tea.1/stock", "192.0.2.1", tok, "Idempotency-Key", "k-"+tok[:6], "Content-Type", "application/json")
	}
	var got []string
	for _, a := range audit.entries {
		got = append(got, a.Actor+" "+a.Action+" "+a.Target)
	}
	want := "merchant:default adjust_stock product:tea.1; merchant:erp adjust_stock product:tea.1"
	if strings.Join(got, "; ") != want {
		t.Errorf("audit = %q, want %q", strings.Join(got, "; "), want)
	}
	if domain.ScopeMerchant == domain.ScopeAdmin || domain.ScopeMerchant == domain.ScopePublic {
		t.Errorf("the merchant's scope %q is another caller's", domain.ScopeMerchant)
	}
}
