package domain

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/shopspring/decimal"
)

// minorUnits lists the currencies payd accepts and how many decimal places
// each one's smallest unit has (ISO 4217). A currency not listed here is
// rejected rather than guessed at.
var minorUnits = map[string]int32{
	"USD": 2, "EUR": 2, "GBP": 2, "CNY": 2, "CHF": 2, "CAD": 2, "AUD": 2,
	"SEK": 2, "NOK": 2, "DKK": 2, "PLN": 2, "INR": 2, "BRL": 2, "MXN": 2,
	"SGD": 2, "HKD": 2, "NZD": 2, "ZAR": 2,
	"JPY": 0, "KRW": 0, "VND": 0, "CLP": 0, "ISK": 0,
	"KWD": 3, "BHD": 3, "JOD": 3, "OMR": 3, "TND": 3,
}

// DefaultMaxAmount is the largest amount, in major units, that one order may
// total unless configured otherwise.
var DefaultMaxAmount = decimal.NewFromInt(1_000_000)

// amountPattern is the only accepted spelling of an amount: plain decimal
// digits with an optional fraction. No sign, exponent or spaces.
var amountPattern = regexp.MustCompile(`^[0-9]{1,15}(\.[0-9]{1,6})?$`)

// Currency is an upper-case ISO 4217 code that payd knows.
type Currency string

// ParseCurrency validates code against the currencies payd supports.
func ParseCurrency(code string) (Currency, error) {
	if _, ok := minorUnits[code]; !ok {
		return "", &ValidationError{Field: "currency", Reason: fmt.Sprintf("%q is not a supported ISO 4217 currency code", code)}
	}
	return Currency(code), nil
}

// Scale is the number of decimal places of the currency's minor unit.
func (c Currency) Scale() int32 { return minorUnits[string(c)] }

// Money is an exact amount in one currency. The zero value is not valid money.
type Money struct {
	Amount   decimal.Decimal
	Currency Currency
}

// ParseAmount reads a decimal string such as "12.30" as an amount of c,
// rejecting anything that is not a plain positive decimal or that has more
// decimal places than the currency's minor unit.
func ParseAmount(s string, c Currency, field string) (decimal.Decimal, error) {
	d, err := ParseDecimal(s, field)
	if err != nil {
		return decimal.Decimal{}, err
	}
	// The written scale counts, not the value: "12.300" USD is refused even
	// though it equals 12.30, so a client's rounding bug is caught early.
	if frac := strings.IndexByte(s, '.'); frac >= 0 && int32(len(s)-frac-1) > c.Scale() {
		return decimal.Decimal{}, &ValidationError{Field: field, Reason: fmt.Sprintf("%s allows at most %d decimal places", c, c.Scale())}
	}
	return d, nil
}

// ParseDecimal reads a plain decimal string such as "12.30" without regard
// to a currency: what can be checked of an amount whose currency is itself
// invalid, so that both mistakes are reported at once.
func ParseDecimal(s, field string) (decimal.Decimal, error) {
	if !amountPattern.MatchString(s) {
		return decimal.Decimal{}, &ValidationError{Field: field, Reason: "must be a decimal string such as \"12.30\""}
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, &ValidationError{Field: field, Reason: "must be a decimal string such as \"12.30\""}
	}
	return d, nil
}

// MinorUnits converts an amount of c into an integer count of minor units
// (cents for USD). The amount must already respect c's scale.
func MinorUnits(d decimal.Decimal, c Currency) int64 {
	return d.Shift(c.Scale()).IntPart()
}

// FromMinorUnits is the inverse of MinorUnits.
func FromMinorUnits(minor int64, c Currency) decimal.Decimal {
	return decimal.New(minor, -c.Scale())
}

// FormatAmount renders d with exactly the currency's scale: "19.90", not "19.9".
func FormatAmount(d decimal.Decimal, c Currency) string {
	return d.StringFixed(c.Scale())
}

// String renders m as "19.90 USD".
func (m Money) String() string { return FormatAmount(m.Amount, m.Currency) + " " + string(m.Currency) }
