package domain

import (
	"errors"
	"testing"
)

func TestParseAmount(t *testing.T) {
	tests := []struct {
		in       string
		currency Currency
		want     string // formatted; empty means an error is expected
	}{
		{"12.30", "USD", "12.30"},
		{"12.3", "USD", "12.30"},
		{"12", "USD", "12.00"},
		{"0.01", "EUR", "0.01"},
		{"500", "JPY", "500"},
		{"1.234", "KWD", "1.234"},
		{"12.301", "USD", ""},
		{"12.300", "USD", ""},
		{"5.0", "JPY", ""},
		{"1.2345", "KWD", ""},
		{"-1.00", "USD", ""},
		{"+1.00", "USD", ""},
		{"1e3", "USD", ""},
		{" 1.00", "USD", ""},
		{"", "USD", ""},
		{".5", "USD", ""},
		{"1.", "USD", ""},
		{"NaN", "USD", ""},
	}
	for _, tt := range tests {
		got, err := ParseAmount(tt.in, tt.currency, "amount")
		if tt.want == "" {
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != "amount" {
				t.Errorf("ParseAmount(%q, %s) = %v, %v; want a ValidationError on amount", tt.in, tt.currency, got, err)
			}
			continue
		}
		if err != nil || FormatAmount(got, tt.currency) != tt.want {
			t.Errorf("ParseAmount(%q, %s) = %v, %v; want %s", tt.in, tt.currency, got, err, tt.want)
		}
	}
}

func TestParseCurrency(t *testing.T) {
	for _, ok := range []string{"USD", "EUR", "JPY", "KWD", "CNY"} {
		if _, err := ParseCurrency(ok); err != nil {
			t.Errorf("ParseCurrency(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "usd", "US", "XXX", "USDD"} {
		if _, err := ParseCurrency(bad); err == nil {
			t.Errorf("ParseCurrency(%q) = nil error, want one", bad)
		}
	}
}

func TestMinorUnitsRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		in    string
		c     Currency
		minor int64
	}{
		{"19.90", "USD", 1990}, {"500", "JPY", 500}, {"1.234", "KWD", 1234}, {"999999.99", "EUR", 99999999},
	} {
		d, err := ParseAmount(tt.in, tt.c, "amount")
		if err != nil {
			t.Fatal(err)
		}
		if got := MinorUnits(d, tt.c); got != tt.minor {
			t.Errorf("MinorUnits(%s %s) = %d, want %d", tt.in, tt.c, got, tt.minor)
		}
		if back := FormatAmount(FromMinorUnits(tt.minor, tt.c), tt.c); back != FormatAmount(d, tt.c) {
			t.Errorf("FromMinorUnits(%d, %s) = %s, want %s", tt.minor, tt.c, back, tt.in)
		}
	}
}

func TestValidKey(t *testing.T) {
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'a'
	}
	for _, tt := range []struct {
		key string
		ok  bool
	}{
		{"0b7c5f34-8d2e-4c1a-9f3e-2a1b3c4d5e6f", true}, {"a", true}, {"ord:1.pay_2-x", true},
		{string(long[:255]), true}, {string(long), false}, {"", false}, {"has space", false}, {"ключ", false}, {"a/b", false},
	} {
		if got := ValidKey(tt.key); got != tt.ok {
			t.Errorf("ValidKey(%q) = %v, want %v", tt.key, got, tt.ok)
		}
	}
}

func TestNormalizeEmail(t *testing.T) {
	if got, err := NormalizeEmail("  Ada@Example.COM "); err != nil || got != "ada@example.com" {
		t.Errorf("NormalizeEmail = %q, %v; want ada@example.com", got, err)
	}
	for _, bad := range []string{"", "nope", "Ada <ada@example.com>", "a@"} {
		if _, err := NormalizeEmail(bad); err == nil {
			t.Errorf("NormalizeEmail(%q) = nil error, want one", bad)
		}
	}
}
