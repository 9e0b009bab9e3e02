package stripeprovider

import (
	"fmt"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// stripeUnits is how Stripe writes an amount of a currency payd supports,
// where that differs from ISO 4217 (domain's scale), per Stripe's
// "Supported currencies" page:
//   - ISK is zero-decimal in ISO 4217 but two-decimal on Stripe's API for
//     backwards compatibility: 5 ISK is amount=500, and fractions are refused.
//   - The three-decimal currencies (BHD, JOD, KWD, OMR, TND) are sent in
//     thousandths, but the last digit must be 0: only whole hundredths
//     can be charged.
//
// (HUF and TWD are two-decimal with payouts in whole units, UGX is
// zero-decimal on Stripe; payd supports none of them, so ParseCurrency
// refuses them before they get here.) Every other currency payd supports
// uses its ISO 4217 exponent: JPY, KRW, VND and CLP are zero-decimal, the
// rest two-decimal.
var stripeUnits = map[domain.Currency]struct {
	exp    int32 // decimal places of Stripe's integer amount
	places int32 // decimal places Stripe can actually charge
}{
	"ISK": {exp: 2, places: 0},
	"BHD": {exp: 3, places: 2}, "JOD": {exp: 3, places: 2}, "KWD": {exp: 3, places: 2},
	"OMR": {exp: 3, places: 2}, "TND": {exp: 3, places: 2},
}

// stripeExponent is the number of decimal places of Stripe's integer
// amount for c.
func stripeExponent(c domain.Currency) int32 {
	if u, ok := stripeUnits[c]; ok {
		return u.exp
	}
	return c.Scale()
}

// toStripeAmount is d written as Stripe's integer amount of c. An amount
// Stripe cannot charge exactly (a fraction of a króna, a thousandth of a
// dinar, anything finer than c's scale) is refused here, before anything
// is sent: nothing is charged, and nothing is charged wrongly.
func toStripeAmount(d decimal.Decimal, c domain.Currency) (int64, error) {
	places := c.Scale()
	if u, ok := stripeUnits[c]; ok && u.places < places {
		places = u.places
	}
	if !d.IsPositive() || !d.Equal(d.Round(places)) {
		return 0, &domain.ValidationError{Field: "amount",
			Reason: fmt.Sprintf("%s is not a positive amount of %s that Stripe can charge (at most %d decimal places)", d, c, places)}
	}
	return d.Shift(stripeExponent(c)).IntPart(), nil
}

// fromStripeAmount reads Stripe's integer amount of c.
func fromStripeAmount(minor int64, c domain.Currency) decimal.Decimal {
	return decimal.New(minor, -stripeExponent(c))
}
