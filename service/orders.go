package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// Orders creates, reads, lists and cancels a customer's orders.
type Orders struct {
	Store    OrderStore
	Attempts AttemptStore
	// Products prices the catalogue's lines; Customers tells whether a
	// customer the merchant names exists.
	Products interface {
		FindSKUs(ctx context.Context, skus []string) (map[string]domain.Product, error)
	}
	Customers interface {
		FindByID(ctx context.Context, id string) (domain.Customer, error)
	}
	Limits domain.Limits
	TTL    time.Duration // PAYD_ORDER_TTL: pending orders expire after this
	// CaptureMethod is how an order that names none captures its money
	// (PAYD_CAPTURE_METHOD; automatic when empty): a buyer's order always
	// takes it.
	CaptureMethod domain.CaptureMethod
	// Holds, optional, voids the hold of an authorized order a cancel
	// ends; without it such a cancel is refused.
	Holds interface {
		Void(ctx context.Context, id, requestID string) (domain.Order, error)
	}
	Now func() time.Time
	// Observer, optional, is told of each order a cancel changes, each
	// order created, and each creation refused for lack of stock.
	Observer Observer
	// Feed, optional, lets callers hear of changes to an order made by
	// this process (the event stream); without it Subscribe never signals.
	Feed OrderFeed
}

// OrderFeed tells subscribers of changes to an order; *Changes is one.
type OrderFeed interface {
	Subscribe(orderID string) (<-chan struct{}, func())
}

// NewOrder is an order as its creator asked for it.
type NewOrder struct {
	// Merchant is set when the merchant's server creates the order: it may
	// name a customer and custom lines with their own price. Otherwise the
	// buyer CustomerID creates it, from the catalogue's SKUs only.
	Merchant bool
	// CustomerID is the order's customer: the buyer's own, or the one the
	// merchant names ("" for a guest).
	CustomerID string
	Currency   string // "" for the catalogue's: the products' own
	Items      []NewItem
	// CaptureMethod is automatic or manual, the merchant's only; ""
	// takes the shop's default (Orders.CaptureMethod).
	CaptureMethod string
}

// NewItem is one requested order line, as its creator sent it: a
// catalogue SKU and a quantity, which payd prices, or (the merchant's
// only) a custom line with its name and its own price.
type NewItem struct {
	SKU, Name string
	Quantity  int64
	UnitPrice *string // nil: priced from the catalogue
}

// creator is the idempotency scope of n's creator: a creation key is
// unique within it.
func (n NewOrder) creator() string {
	if n.Merchant {
		return domain.ScopeMerchant
	}
	return domain.CustomerScope(n.CustomerID)
}

// Create prices the cart (catalogue lines from the catalogue as it is
// now, the merchant's custom lines at their own price), computes the
// amount exactly and stores a pending order, taking its catalogue lines
// from counted stock, all or none (a line beyond what is left is a
// *domain.OutOfStockError and nothing is written). Under a key (req; the
// key is optional), a repeated creation returns the order that key created
// and takes no stock again, even when the first execution died before
// its answer was stored or its idempotency record is gone — but only if
// it is the same request: another cart under that key is
// domain.ErrKeyReused (see sameCreation). ADR 0059.
func (s *Orders) Create(ctx context.Context, req Keyed, n NewOrder) (domain.Order, error) {
	lines, cur, err := s.price(ctx, n)
	if err != nil {
		return domain.Order{}, err
	}
	amount := domain.Total(lines)
	if !amount.IsPositive() {
		return domain.Order{}, &domain.ValidationError{Field: "items", Reason: "the order total must be greater than zero"}
	}
	if amount.GreaterThan(s.Limits.MaxAmount) {
		return domain.Order{}, &domain.ValidationError{Field: "items", Reason: fmt.Sprintf("the order total may not exceed %s %s", s.Limits.MaxAmount, cur)}
	}
	now := s.Now().UTC()
	o := domain.Order{
		ID: newID(), CustomerID: n.CustomerID, Creator: n.creator(), Status: domain.StatusPending, Amount: amount, Currency: cur,
		Items: lines, RefundedAmount: decimal.Zero, Version: domain.CreatedVersion, ExpiresAt: now.Add(s.TTL), CreatedAt: now, UpdatedAt: now,
		CreateRequestID: req.Key, Fulfillment: domain.FulfillmentUnfulfilled,
		CaptureMethod: cmp.Or(domain.CaptureMethod(n.CaptureMethod), s.CaptureMethod, domain.CaptureAutomatic),
	}
	if req.Key != "" {
		o.CreateFingerprint = req.Fingerprint
	}
	err = s.Store.Create(ctx, o)
	if errors.Is(err, domain.ErrOrderExists) {
		prev, err := s.Store.FindByCreateRequest(ctx, o.Creator, req.Key)
		if err != nil {
			return domain.Order{}, err
		}
		if !sameCreation(prev, o) {
			return domain.Order{}, domain.ErrKeyReused
		}
		return prev, nil
	}
	if errors.Is(err, domain.ErrOutOfStock) {
		observing(s.Observer).OutOfStock()
		return domain.Order{}, err
	}
	if err != nil {
		return domain.Order{}, fmt.Errorf("create order: %w", err)
	}
	fault("order_created")
	observing(s.Observer).OrderCreated(n.Merchant)
	return o, nil
}

// sameCreation reports whether want, the order a request under prev's key
// would create, is what created prev. The fingerprint decides when prev has
// one. An order stored before fingerprints were kept has none; then what
// can be compared is: currency and every line (sku, name, quantity, unit
// price). That fallback cannot see differences the canonical body would
// (say, spacing the parser trims), which only ever lets an equivalent cart
// through.
func sameCreation(prev, want domain.Order) bool {
	if prev.CreateFingerprint != "" {
		return prev.CreateFingerprint == want.CreateFingerprint
	}
	if prev.Currency != want.Currency || len(prev.Items) != len(want.Items) {
		return false
	}
	for i, it := range prev.Items {
		w := want.Items[i]
		if it.SKU != w.SKU || it.Name != w.Name || it.Quantity != w.Quantity || !it.UnitPrice.Equal(w.UnitPrice) {
			return false
		}
	}
	return true
}

// price reads and prices n's lines and its currency, collecting every
// invalid field at once (the caller corrects them all together): a
// buyer's price, an unknown or inactive SKU, a line in another currency
// than the order's, a customer the merchant named that does not exist.
func (s *Orders) price(ctx context.Context, n NewOrder) ([]domain.Item, domain.Currency, error) {
	var invalid domain.ValidationErrors
	var cur domain.Currency
	if n.Currency != "" {
		var err error
		cur, err = domain.ParseCurrency(n.Currency)
		_ = invalid.Add(err)
	}
	if m := domain.CaptureMethod(n.CaptureMethod); m != "" && (!m.Valid() || !n.Merchant) {
		// A buyer's order takes the shop's capture method: the handler
		// refuses the field from a buyer before this.
		invalid = append(invalid, &domain.ValidationError{Field: "capture_method", Reason: "must be automatic or manual"})
	}
	if n.Merchant && n.CustomerID != "" {
		if _, err := s.Customers.FindByID(ctx, n.CustomerID); errors.Is(err, domain.ErrCustomerNotFound) {
			invalid = append(invalid, &domain.ValidationError{Field: "customer_id", Reason: "no customer has this ID"})
		} else if err != nil {
			return nil, "", err
		}
	}
	if len(n.Items) == 0 || len(n.Items) > s.Limits.MaxItems {
		invalid = append(invalid, &domain.ValidationError{Field: "items", Reason: fmt.Sprintf("must hold 1 to %d items", s.Limits.MaxItems)})
		return nil, "", invalid.Err()
	}
	products, err := s.catalogueOf(ctx, n.Items)
	if err != nil {
		return nil, "", err
	}
	if cur == "" && n.Currency == "" {
		cur = currencyOf(n.Items, products)
		if cur == "" && n.Merchant { // a buyer's priced line is refused for its price alone
			invalid = append(invalid, &domain.ValidationError{Field: "currency", Reason: "is required when the order has custom lines"})
		}
	}
	lines := make([]domain.Item, 0, len(n.Items))
	for i, it := range n.Items {
		line, errs := s.line(fmt.Sprintf("items[%d]", i), n.Merchant, cur, it, products)
		invalid = append(invalid, errs...)
		lines = append(lines, line)
	}
	return lines, cur, invalid.Err()
}

// catalogueOf reads the products the catalogue lines of items name, in
// one query.
func (s *Orders) catalogueOf(ctx context.Context, items []NewItem) (map[string]domain.Product, error) {
	var skus []string
	for _, it := range items {
		if it.UnitPrice == nil && domain.ValidSKU(it.SKU) {
			skus = append(skus, it.SKU)
		}
	}
	if len(skus) == 0 {
		return nil, nil
	}
	return s.Products.FindSKUs(ctx, skus)
}

// currencyOf is the currency of an order that names none: its first
// catalogue line's product's ("" when it has none, or the product is
// unknown: that line is refused anyway).
func currencyOf(items []NewItem, products map[string]domain.Product) domain.Currency {
	for _, it := range items {
		if p, ok := products[it.SKU]; ok && it.UnitPrice == nil {
			return p.Currency
		}
	}
	return ""
}

// line is the order line field (items[i]) asks for, or what is wrong
// with it. A catalogue line is priced from its active product; a custom
// line, the merchant's only, at its own price (in cur; "" when the
// currency is itself invalid: then its price is checked only for being a
// decimal) and takes no stock.
func (s *Orders) line(field string, merchant bool, cur domain.Currency, it NewItem, products map[string]domain.Product) (domain.Item, domain.ValidationErrors) {
	var invalid domain.ValidationErrors
	if it.Quantity < 1 || it.Quantity > s.Limits.MaxQuantity {
		invalid = append(invalid, &domain.ValidationError{Field: field + ".quantity", Reason: fmt.Sprintf("must be a whole number from 1 to %d", s.Limits.MaxQuantity)})
	}
	if it.UnitPrice != nil {
		if !merchant {
			return domain.Item{}, append(invalid, &domain.ValidationError{Field: field + ".unit_price",
				Reason: "a buyer may not set a price: name a SKU and a quantity, and payd prices the line from the catalogue"})
		}
		return s.customLine(field, cur, it, invalid)
	}
	p, ok := products[it.SKU]
	switch {
	case !ok || !p.Active:
		return domain.Item{}, append(invalid, &domain.ValidationError{Field: field + ".sku", Reason: "no active product in the catalogue has this SKU"})
	case cur != "" && p.Currency != cur:
		return domain.Item{}, append(invalid, &domain.ValidationError{Field: field + ".sku",
			Reason: fmt.Sprintf("is priced in %s, not in the order's currency %s", p.Currency, cur)})
	}
	return p.Line(it.Quantity), invalid
}

// customLine is a merchant's line with its own name and price.
func (s *Orders) customLine(field string, cur domain.Currency, it NewItem, invalid domain.ValidationErrors) (domain.Item, domain.ValidationErrors) {
	sku, name := strings.TrimSpace(it.SKU), strings.TrimSpace(it.Name)
	if len(sku) > 64 {
		invalid = append(invalid, &domain.ValidationError{Field: field + ".sku", Reason: "must be at most 64 characters"})
	}
	if name == "" || utf8.RuneCountInString(name) > domain.MaxProductName {
		invalid = append(invalid, &domain.ValidationError{Field: field + ".name", Reason: fmt.Sprintf("must be 1 to %d characters", domain.MaxProductName)})
	}
	var price decimal.Decimal
	var err error
	if cur == "" {
		_, err = domain.ParseDecimal(*it.UnitPrice, field+".unit_price")
	} else {
		price, err = domain.ParseAmount(*it.UnitPrice, cur, field+".unit_price")
	}
	_ = invalid.Add(err) // both parsers fail only with a *ValidationError
	return domain.Item{SKU: sku, Name: name, Quantity: it.Quantity, UnitPrice: price}, invalid
}

// Get returns one of the customer's orders; another customer's order is
// domain.ErrOrderNotFound, so its existence does not leak.
func (s *Orders) Get(ctx context.Context, customerID, id string) (domain.Order, error) {
	o, err := s.Store.FindByID(ctx, id)
	if err != nil {
		return domain.Order{}, err
	}
	if !o.VisibleTo(customerID) {
		return domain.Order{}, domain.ErrOrderNotFound
	}
	return o, nil
}

// GetWithAttempts is Get plus the order's payment attempts, oldest first,
// and its shipments.
func (s *Orders) GetWithAttempts(ctx context.Context, customerID, id string) (domain.Order, []domain.Attempt, error) {
	o, err := s.Get(ctx, customerID, id)
	if err != nil {
		return domain.Order{}, nil, err
	}
	if o.Fulfillment != domain.FulfillmentUnfulfilled { // else it has no shipment: no read
		if o.Shipments, err = s.Store.ShipmentsOf(ctx, id); err != nil {
			return domain.Order{}, nil, err
		}
	}
	attempts, err := s.Attempts.ListByOrder(ctx, id)
	return o, attempts, err
}

// List returns one page of the customer's orders.
func (s *Orders) List(ctx context.Context, f domain.OrderFilter) (domain.OrderPage, error) {
	if f.Status != "" && !f.Status.Valid() {
		return domain.OrderPage{}, &domain.ValidationError{Field: "status", Reason: domain.StatusReason(f.Status)}
	}
	if f.Limit < 0 || f.Limit > domain.MaxPageSize {
		return domain.OrderPage{}, &domain.ValidationError{Field: "limit", Reason: fmt.Sprintf("must be from 1 to %d", domain.MaxPageSize)}
	}
	return s.Store.List(ctx, f)
}

// Cancel moves a pending order to cancelled. Cancelling a cancelled order
// answers the same (it is what the caller wanted); any other state is a
// conflict that says why.
func (s *Orders) Cancel(ctx context.Context, customerID, id string) (domain.Order, error) {
	if _, err := s.Get(ctx, customerID, id); err != nil {
		return domain.Order{}, err
	}
	ok, err := s.Store.Cancel(ctx, id, causeIn(ctx, domain.Cause{Kind: domain.CauseCustomer, Ref: customerID}), s.Now().UTC())
	if err != nil {
		return domain.Order{}, fmt.Errorf("cancel order %s: %w", id, err)
	}
	o, err := s.Store.FindByID(ctx, id)
	if err != nil {
		return domain.Order{}, err
	}
	if ok {
		s.changed(id)
		return o, nil
	}
	switch o.Status {
	case domain.StatusCancelled:
		return o, nil
	case domain.StatusAuthorized:
		if s.Holds == nil {
			return domain.Order{}, domain.ErrOrderNotCancelable
		}
		// Its money is held: the cancel voids the hold at the provider
		// first (Holds), and the order is cancelled once it is voided.
		return s.Holds.Void(ctx, id, requestKey(ctx))
	case domain.StatusProcessing:
		return domain.Order{}, domain.ErrPaymentInProgress
	case domain.StatusPaid, domain.StatusRefunded:
		return domain.Order{}, domain.ErrOrderAlreadyPaid
	default:
		return domain.Order{}, domain.ErrOrderNotCancelable
	}
}

func (s *Orders) changed(id string) { observing(s.Observer).OrderChanged(id) }

// Subscribe tells the caller of changes to an order made by this process
// (see Feed); with no Feed configured it never signals.
func (s *Orders) Subscribe(orderID string) (<-chan struct{}, func()) {
	if s.Feed == nil {
		return make(chan struct{}), func() {}
	}
	return s.Feed.Subscribe(orderID)
}
