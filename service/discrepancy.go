package service

import (
	"strings"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// withProviderAmount records what the provider said a charge was worth. A
// discrepancy holds money in one currency: payd's (the attempt's) when
// known, else the provider's. When the provider's amount cannot be held
// exactly in it — another currency, one payd does not know, more decimals
// than the currency has — it goes into the note instead, so a strange
// provider event is still recorded rather than refused.
func withProviderAmount(d domain.Discrepancy, amount, currency string) domain.Discrepancy {
	if d.Currency == "" {
		if c, err := domain.ParseCurrency(currency); err == nil {
			d.Currency = c
		}
	}
	v, err := domain.ParseAmount(amount, d.Currency, "amount")
	if d.Currency != "" && currency == string(d.Currency) && err == nil {
		d.ProviderAmount = v
		return d
	}
	d.ProviderAmount = decimal.Zero
	d.Note = strings.TrimSpace(d.Note + " (provider: " + truncate(amount, 32) + " " + truncate(currency, 8) + ")")
	return d
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
