package app

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
)

// startOn builds payd from env (on port 0, with its in-process sandbox on
// port 0) on the SQLite database in dir, closes it again, and returns its
// log.
func startOn(t *testing.T, dir string, env map[string]string) string {
	t.Helper()
	get := func(k string) string {
		switch k {
		case "PAYD_DATABASE_URL":
			return "sqlite://" + filepath.Join(dir, "payd.db")
		case "PAYD_SANDBOX_DATABASE_URL":
			return "sqlite://" + filepath.Join(dir, "sandbox.db")
		case "PAYD_ADDR", "PAYD_SANDBOX_ADDR":
			return "127.0.0.1:0"
		case "PAYD_LOG_LEVEL":
			return "info"
		}
		return env[k]
	}
	cfg, err := loadConfig("serve", nil, get, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a, err := Build(t.Context(), cfg, Logs(&logs))
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, logs.String())
	}
	a.Close()
	return logs.String()
}

// catalogueIn is every product of the database in dir, by SKU.
func catalogueIn(t *testing.T, dir string) []domain.Product {
	t.Helper()
	db, err := repository.Open(t.Context(), "sqlite://"+filepath.Join(dir, "payd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all, err := repository.NewProductStore(db).ListAll(t.Context(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

const seededLine = "demo catalogue seeded"

// TestDemoCatalogueSeededInDevelopment: a development payd with its
// in-process sandbox starts with the sandbox shop's products in an empty
// catalogue, logged once; a second start on the same database adds
// nothing and logs nothing, also once the merchant has changed them.
func TestDemoCatalogueSeededInDevelopment(t *testing.T) {
	dir := t.TempDir()
	dev := map[string]string{"PAYD_ENV": "development"}
	logs := startOn(t, dir, dev)
	if n := strings.Count(logs, seededLine); n != 1 {
		t.Errorf("seeding logged %d times, want once\n%s", n, logs)
	}
	got := catalogueIn(t, dir)
	want := map[string]struct {
		name, price string
		stock       *int64
	}{
		"tea-green":  {"Green tea, 100 g", "4.95", nil},
		"mug-stone":  {"Stoneware mug", "12", new(int64(5))},
		"honey-wild": {"Wildflower honey", "7.5", nil},
	}
	if len(got) != len(want) {
		t.Fatalf("catalogue after the first start = %+v, want the %d demo products", got, len(want))
	}
	for _, p := range got {
		w, ok := want[p.SKU]
		if !ok || p.Name != w.name || p.UnitPrice.String() != w.price || p.Currency != "USD" || !p.Active ||
			(p.Stock == nil) != (w.stock == nil) || (p.Stock != nil && *p.Stock != *w.stock) {
			t.Errorf("seeded %+v (stock %v), want %+v", p, p.Stock, w)
		}
	}

	// The merchant hides every product: the catalogue is not empty, it is
	// the merchant's, and a restart leaves it so.
	db, err := repository.Open(t.Context(), "sqlite://"+filepath.Join(dir, "payd.db"))
	if err != nil {
		t.Fatal(err)
	}
	store := repository.NewProductStore(db)
	for _, p := range got {
		if _, err := store.Update(t.Context(), p.SKU, func(p domain.Product) (domain.Product, error) { p.Active = false; return p, nil }); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	logs = startOn(t, dir, dev)
	if strings.Contains(logs, seededLine) {
		t.Errorf("the second start seeded again:\n%s", logs)
	}
	again := catalogueIn(t, dir)
	if len(again) != len(want) {
		t.Errorf("catalogue after the second start = %+v, want the same %d products", again, len(want))
	}
	for _, p := range again {
		if p.Active {
			t.Errorf("%s is active again after a restart: the seed wrote over the merchant's change", p.SKU)
		}
	}
}

// TestDemoCatalogueNotOverTheMerchants: a catalogue the merchant started
// before payd's first development start is left as it is.
func TestDemoCatalogueNotOverTheMerchants(t *testing.T) {
	dir := t.TempDir()
	db, err := repository.Open(t.Context(), "sqlite://"+filepath.Join(dir, "payd.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repository.MigrateUp(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	own, err := domain.NewProduct{SKU: "own", Name: "The merchant's own", UnitPrice: "1.00", Currency: "EUR"}.Product(decimal.NewFromInt(100), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repository.NewProductStore(db).Create(t.Context(), own); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if logs := startOn(t, dir, map[string]string{"PAYD_ENV": "development"}); strings.Contains(logs, seededLine) {
		t.Errorf("seeded over the merchant's catalogue:\n%s", logs)
	}
	if got := catalogueIn(t, dir); len(got) != 1 || got[0].SKU != "own" {
		t.Errorf("catalogue = %+v, want only the merchant's own product", got)
	}
}

// TestDemoCatalogueNotInProduction: a production payd, even with the
// in-process sandbox, starts with the catalogue empty.
func TestDemoCatalogueNotInProduction(t *testing.T) {
	dir := t.TempDir()
	logs := startOn(t, dir, map[string]string{
		"PAYD_ENV": "production", "PAYD_ADMIN_TOKEN": "adm_9f8e7d6c5b4a39281716151413121110",
		"PAYD_WEBHOOK_SECRET": testWebhookSecret, "PAYD_SECRET_KEY": "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a",
		"PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c",
	})
	if strings.Contains(logs, seededLine) {
		t.Errorf("production seeded the demo catalogue:\n%s", logs)
	}
	if got := catalogueIn(t, dir); len(got) != 0 {
		t.Errorf("production catalogue = %+v, want empty", got)
	}
}

// TestDemoCatalogueNotWithAnotherProvider: a development payd pointed at
// a provider of its own (no in-process sandbox) keeps the catalogue empty.
func TestDemoCatalogueNotWithAnotherProvider(t *testing.T) {
	dir := t.TempDir()
	logs := startOn(t, dir, map[string]string{"PAYD_ENV": "development", "PAYD_PROVIDER_URL": "http://127.0.0.1:9"})
	if strings.Contains(logs, seededLine) {
		t.Errorf("seeded with another provider:\n%s", logs)
	}
	if got := catalogueIn(t, dir); len(got) != 0 {
		t.Errorf("catalogue = %+v, want empty", got)
	}
}
