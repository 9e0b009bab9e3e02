package domain

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// TestNewProduct: a creation is checked field by field, every invalid
// field named at once; a valid one is an active product.
func TestNewProduct(t *testing.T) {
	maxPrice := decimal.NewFromInt(1000)
	stock := func(n int64) *int64 { return &n }
	valid := NewProduct{SKU: "tea_1.a-B", Name: " Tea ", UnitPrice: "4.95", Currency: "USD", Stock: stock(0)}
	tests := []struct {
		name   string
		change func(*NewProduct)
		fields []string
	}{
		{"valid", func(*NewProduct) {}, nil},
		{"unlimited", func(n *NewProduct) { n.Stock = nil }, nil},
		{"64-character SKU", func(n *NewProduct) { n.SKU = strings.Repeat("a", 64) }, nil},
		{"65-character SKU", func(n *NewProduct) { n.SKU = strings.Repeat("a", 65) }, []string{"sku"}},
		{"SKU with a colon", func(n *NewProduct) { n.SKU = "a:b" }, []string{"sku"}},
		{"empty name", func(n *NewProduct) { n.Name = " " }, []string{"name"}},
		{"zero price", func(n *NewProduct) { n.UnitPrice = "0" }, []string{"unit_price"}},
		{"price over the maximum", func(n *NewProduct) { n.UnitPrice = "1000.01" }, []string{"unit_price"}},
		{"price at the maximum", func(n *NewProduct) { n.UnitPrice = "1000" }, nil},
		{"three decimals in USD", func(n *NewProduct) { n.UnitPrice = "1.001" }, []string{"unit_price"}},
		{"three decimals in KWD", func(n *NewProduct) { n.UnitPrice = "1.001"; n.Currency = "KWD" }, nil},
		{"bad currency and price", func(n *NewProduct) { n.Currency = "usd"; n.UnitPrice = "x" }, []string{"currency", "unit_price"}},
		{"negative stock", func(n *NewProduct) { n.Stock = stock(-1) }, []string{"stock"}},
		{"stock over the maximum", func(n *NewProduct) { n.Stock = stock(MaxStock + 1) }, []string{"stock"}},
		{"everything wrong", func(n *NewProduct) { *n = NewProduct{Stock: stock(-1)} }, []string{"sku", "name", "currency", "unit_price", "stock"}},
	}
	for _, tt := range tests {
		n := valid
		tt.change(&n)
		p, err := n.Product(maxPrice, time.Now())
		var invalid ValidationErrors
		var one *ValidationError
		var got []string
		switch {
		case errors.As(err, &invalid):
			for _, e := range invalid {
				got = append(got, e.Field)
			}
		case errors.As(err, &one):
			got = []string{one.Field}
		case err != nil:
			t.Fatalf("%s: Product() = %v, want a validation error or nil", tt.name, err)
		}
		if strings.Join(got, ",") != strings.Join(tt.fields, ",") {
			t.Errorf("%s: Product() fields = %v, want %v", tt.name, got, tt.fields)
		}
		if err == nil && (!p.Active || p.Name != "Tea") {
			t.Errorf("%s: Product() = %+v, want active and named Tea", tt.name, p)
		}
	}
}

// TestProductApply: a change applies what it names, checks a price at the
// product's own currency, and refuses an empty change.
func TestProductApply(t *testing.T) {
	p := Product{SKU: "x", Name: "X", UnitPrice: decimal.RequireFromString("5"), Currency: "JPY", Active: true}
	price, name, off := "700", "Y", false
	got, err := p.Apply(ProductChange{UnitPrice: &price, Name: &name, Active: &off}, decimal.NewFromInt(1000), time.Now())
	if err != nil || !got.UnitPrice.Equal(decimal.NewFromInt(700)) || got.Name != "Y" || got.Active {
		t.Errorf("Apply = %+v, %v; want 700 JPY, Y, inactive", got, err)
	}
	frac := "1.5"
	if _, err := p.Apply(ProductChange{UnitPrice: &frac}, decimal.NewFromInt(1000), time.Now()); err == nil {
		t.Error("Apply(1.5 JPY) = nil, want a validation error: JPY has no decimals")
	}
	if _, err := p.Apply(ProductChange{}, decimal.NewFromInt(1000), time.Now()); err == nil {
		t.Error("Apply(nothing) = nil, want a validation error")
	}
}

// TestStockChange: an adjustment is a non-zero whole number within MaxStock.
func TestStockChange(t *testing.T) {
	for adjust, ok := range map[int64]bool{1: true, -1: true, MaxStock: true, -MaxStock: true, 0: false, MaxStock + 1: false, -MaxStock - 1: false} {
		if err := StockChange(adjust); (err == nil) != ok {
			t.Errorf("StockChange(%d) = %v, want ok %v", adjust, err, ok)
		}
	}
}
