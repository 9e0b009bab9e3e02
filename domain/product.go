package domain

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// Product is one entry of the merchant's catalogue: what a SKU costs, and
// how many are left. Only the merchant writes it
// (docs/adr/0058-the-merchant-key-and-the-catalogue.md).
type Product struct {
	SKU       string
	Name      string
	UnitPrice decimal.Decimal // in Currency, at its scale
	Currency  Currency
	// Stock is how many are left; nil is unlimited (not counted). A
	// counted stock is never below 0: the database's CHECK holds it, and
	// every change is one guarded statement (StockChange).
	Stock     *int64
	Active    bool // only active products are shown to buyers
	CreatedAt time.Time
	UpdatedAt time.Time
}

// The catalogue's bounds.
const (
	// MaxStock is the most a counted stock may hold, and the largest
	// adjustment of one: far beyond any shop, far below int64's end, so
	// stock + adjust never overflows in SQL.
	MaxStock int64 = 1_000_000_000
	// MaxProductName is the longest a product's name may be, in
	// characters, as an order line's name.
	MaxProductName = 200
)

// skuPattern is what a SKU may be: 1 to 64 letters, digits, '.', '_' or '-'.
// It appears in URLs (/v1/products/{sku}) as it is, never escaped.
var skuPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidSKU reports whether s can be a product's SKU.
func ValidSKU(s string) bool { return skuPattern.MatchString(s) }

// NewProduct is what a merchant's creation asks for, as written.
type NewProduct struct {
	SKU       string
	Name      string
	UnitPrice string
	Currency  string
	Stock     *int64
}

// Product checks n against the catalogue's rules and returns the active
// product it describes, created at now. Every invalid field is reported at
// once (ValidationErrors); maxPrice bounds the unit price, as an order's
// total is bounded.
func (n NewProduct) Product(maxPrice decimal.Decimal, now time.Time) (Product, error) {
	var invalid ValidationErrors
	if !ValidSKU(n.SKU) {
		invalid = append(invalid, &ValidationError{Field: "sku", Reason: "must be 1 to 64 of A-Z, a-z, 0-9, '.', '_' or '-'"})
	}
	name, err := productName(n.Name)
	_ = invalid.Add(err)
	cur, err := ParseCurrency(n.Currency)
	_ = invalid.Add(err)
	price, err := unitPrice(n.UnitPrice, cur, maxPrice)
	_ = invalid.Add(err)
	if n.Stock != nil && (*n.Stock < 0 || *n.Stock > MaxStock) {
		invalid = append(invalid, &ValidationError{Field: "stock", Reason: fmt.Sprintf("must be null (unlimited) or a whole number from 0 to %d", MaxStock)})
	}
	if err := invalid.Err(); err != nil {
		return Product{}, err
	}
	return Product{SKU: n.SKU, Name: name, UnitPrice: price, Currency: cur, Stock: n.Stock, Active: true,
		CreatedAt: now, UpdatedAt: now}, nil
}

// ProductChange is what a merchant's update asks for: each field set is
// changed, the others stay. The currency and the stock are not among them:
// a price is changed in the product's own currency, and stock only by an
// adjustment (StockChange).
type ProductChange struct {
	Name      *string
	UnitPrice *string
	Active    *bool
}

// Empty reports whether the change names no field.
func (ch ProductChange) Empty() bool {
	return ch.Name == nil && ch.UnitPrice == nil && ch.Active == nil
}

// Check reports every invalid field of ch, as far as it can be told
// without the product (the price's scale needs its currency: Apply).
func (ch ProductChange) Check() error {
	var invalid ValidationErrors
	if ch.Empty() {
		invalid = append(invalid, &ValidationError{Reason: "the body must set at least one of name, unit_price or active"})
	}
	if ch.Name != nil {
		_, err := productName(*ch.Name)
		_ = invalid.Add(err)
	}
	if ch.UnitPrice != nil {
		_, err := ParseDecimal(*ch.UnitPrice, "unit_price")
		_ = invalid.Add(err)
	}
	return invalid.Err()
}

// Apply returns p changed by ch at now, or the fields ch gets wrong.
func (p Product) Apply(ch ProductChange, maxPrice decimal.Decimal, now time.Time) (Product, error) {
	if err := ch.Check(); err != nil {
		return Product{}, err
	}
	if ch.Name != nil {
		p.Name, _ = productName(*ch.Name)
	}
	if ch.UnitPrice != nil {
		price, err := unitPrice(*ch.UnitPrice, p.Currency, maxPrice)
		if err != nil {
			return Product{}, err
		}
		p.UnitPrice = price
	}
	if ch.Active != nil {
		p.Active = *ch.Active
	}
	p.UpdatedAt = now
	return p, nil
}

// StockChange checks an adjustment of a product's stock: a signed whole
// number, not 0 (nothing to do), at most MaxStock either way. Whether the
// stock can take it is the database's to decide, in one guarded statement
// (stock + adjust between 0 and MaxStock).
func StockChange(adjust int64) error {
	if adjust == 0 || adjust < -MaxStock || adjust > MaxStock {
		return &ValidationError{Field: "adjust", Reason: fmt.Sprintf("must be a whole number from -%d to %d, not 0", MaxStock, MaxStock)}
	}
	return nil
}

// productName trims a name and checks its length.
func productName(s string) (string, error) {
	name := strings.TrimSpace(s)
	if name == "" || utf8.RuneCountInString(name) > MaxProductName || !utf8.ValidString(name) {
		return "", &ValidationError{Field: "name", Reason: fmt.Sprintf("must be 1 to %d characters", MaxProductName)}
	}
	return name, nil
}

// unitPrice reads a price of cur ("" when the currency is itself invalid:
// then only the decimal is checked): positive and at most maxPrice.
func unitPrice(s string, cur Currency, maxPrice decimal.Decimal) (decimal.Decimal, error) {
	var d decimal.Decimal
	var err error
	if cur == "" {
		d, err = ParseDecimal(s, "unit_price")
	} else {
		d, err = ParseAmount(s, cur, "unit_price")
	}
	if err != nil {
		return decimal.Decimal{}, err
	}
	if !d.IsPositive() || d.GreaterThan(maxPrice) {
		return decimal.Decimal{}, &ValidationError{Field: "unit_price", Reason: "must be greater than 0 and at most " + maxPrice.String()}
	}
	return d, nil
}

// Line is an order line of quantity units of p, priced as p is now (a
// price change applies to orders created after it). A counted stock gives
// the line its units to take (StockTaken) when the order is created, all
// lines or none (StockToTake); an unlimited one takes nothing.
func (p Product) Line(quantity int64) Item {
	it := Item{SKU: p.SKU, Name: p.Name, Quantity: quantity, UnitPrice: p.UnitPrice}
	if p.Stock != nil {
		it.StockTaken = quantity
	}
	return it
}

// StockTake is what one order takes from one product's counted stock.
type StockTake struct {
	SKU      string
	Quantity int64
}

// StockToTake sums what items take from each product's stock, one take
// per SKU, in SKU order: the order in which a creation takes its rows, so
// two creations never wait for each other's rows in opposite orders. A
// cancel or an expiry gives the same quantities back.
func StockToTake(items []Item) []StockTake {
	var takes []StockTake
	for _, it := range items {
		if it.StockTaken == 0 {
			continue
		}
		i, found := slices.BinarySearchFunc(takes, it.SKU, func(t StockTake, sku string) int { return strings.Compare(t.SKU, sku) })
		if found {
			takes[i].Quantity += it.StockTaken
			continue
		}
		takes = slices.Insert(takes, i, StockTake{SKU: it.SKU, Quantity: it.StockTaken})
	}
	return takes
}
