package app

import (
	"context"
	"log/slog"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// demoCatalogue is the sandbox shop's products: what the checkout page
// (/checkout) lists when payd runs out of the box. The mug's stock is
// counted, so "out of stock" can be tried from the page; the others are
// unlimited.
var demoCatalogue = []domain.NewProduct{
	{SKU: "tea-green", Name: "Green tea, 100 g", UnitPrice: "4.95", Currency: "USD"},
	{SKU: "mug-stone", Name: "Stoneware mug", UnitPrice: "12.00", Currency: "USD", Stock: new(int64(5))},
	{SKU: "honey-wild", Name: "Wildflower honey", UnitPrice: "7.50", Currency: "USD"},
}

// seedDemoCatalogue fills an empty catalogue with demoCatalogue, through
// the catalogue's own rules, when payd runs in development with its
// in-process sandbox (the shop a developer opens at /checkout), and logs
// it once. Never in production, never with another provider (a payd
// pointed at a provider of its own, as the end-to-end tests run it, keeps
// the catalogue its merchant makes), and never over a catalogue that
// holds any product, active or not: a second start adds nothing. A
// failure is logged and payd starts with the catalogue as it is.
func seedDemoCatalogue(ctx context.Context, cfg Config, inProcessSandbox bool, cat *service.Catalogue, log *slog.Logger) {
	if cfg.Env != "development" || !inProcessSandbox || cat == nil {
		return
	}
	n, err := cat.SeedIfEmpty(ctx, demoCatalogue)
	if err != nil {
		log.Warn("demo catalogue not seeded", "err", err, "created", n)
		return
	}
	if n > 0 {
		log.Info("demo catalogue seeded: the catalogue was empty (development, sandbox)", "products", n)
	}
}
