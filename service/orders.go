package service

import (
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
	Limits   domain.Limits
	TTL      time.Duration // PAYD_ORDER_TTL: pending orders expire after this
	Now      func() time.Time
	// Observer, optional, is told of each order a cancel changes.
	Observer Observer
	// Feed, optional, lets callers hear of changes to an order made by
	// this process (the event stream); without it Subscribe never signals.
	Feed OrderFeed
}

// OrderFeed tells subscribers of changes to an order; *Changes is one.
type OrderFeed interface {
	Subscribe(orderID string) (<-chan struct{}, func())
}

// NewItem is one requested order line, as the customer sent it.
type NewItem struct {
	SKU, Name string
	Quantity  int64
	UnitPrice string
}

// Create validates the cart, computes the amount exactly and stores a
// pending order. Under a key (req; the key is optional), a repeated
// creation returns the order that key created, even when the first
// execution died before its answer was stored or its idempotency record is
// gone — but only if it is the same request: another cart under that key is
// domain.ErrKeyReused (see sameCreation).
func (s *Orders) Create(ctx context.Context, customerID string, req Keyed, currency string, items []NewItem) (domain.Order, error) {
	// Every field is checked before any is refused: the caller corrects
	// them all at once.
	var invalid domain.ValidationErrors
	cur, err := domain.ParseCurrency(currency)
	_ = invalid.Add(err)
	lines := s.parseItems(cur, items, &invalid)
	if err := invalid.Err(); err != nil {
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
		ID: newID(), CustomerID: customerID, Status: domain.StatusPending, Amount: amount, Currency: cur,
		Items: lines, RefundedAmount: decimal.Zero, Version: 1, ExpiresAt: now.Add(s.TTL), CreatedAt: now, UpdatedAt: now,
		CreateRequestID: req.Key,
	}
	if req.Key != "" {
		o.CreateFingerprint = req.Fingerprint
	}
	err = s.Store.Create(ctx, o)
	if errors.Is(err, domain.ErrOrderExists) {
		prev, err := s.Store.FindByCreateRequest(ctx, customerID, req.Key)
		if err != nil {
			return domain.Order{}, err
		}
		if !sameCreation(prev, o) {
			return domain.Order{}, domain.ErrKeyReused
		}
		return prev, nil
	}
	if err != nil {
		return domain.Order{}, fmt.Errorf("create order: %w", err)
	}
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

// parseItems reads the order lines, collecting every invalid field into
// invalid. cur is empty when the currency itself is invalid: then a price
// is checked only for being a decimal, as its scale depends on the currency.
func (s *Orders) parseItems(cur domain.Currency, items []NewItem, invalid *domain.ValidationErrors) []domain.Item {
	if len(items) == 0 || len(items) > s.Limits.MaxItems {
		*invalid = append(*invalid, &domain.ValidationError{Field: "items", Reason: fmt.Sprintf("must hold 1 to %d items", s.Limits.MaxItems)})
		return nil
	}
	lines := make([]domain.Item, 0, len(items))
	for i, it := range items {
		field := fmt.Sprintf("items[%d]", i)
		sku, name := strings.TrimSpace(it.SKU), strings.TrimSpace(it.Name)
		if sku == "" || len(sku) > 64 {
			*invalid = append(*invalid, &domain.ValidationError{Field: field + ".sku", Reason: "must be 1 to 64 characters"})
		}
		if name == "" || utf8.RuneCountInString(name) > 200 {
			*invalid = append(*invalid, &domain.ValidationError{Field: field + ".name", Reason: "must be 1 to 200 characters"})
		}
		if it.Quantity < 1 || it.Quantity > s.Limits.MaxQuantity {
			*invalid = append(*invalid, &domain.ValidationError{Field: field + ".quantity", Reason: fmt.Sprintf("must be a whole number from 1 to %d", s.Limits.MaxQuantity)})
		}
		var price decimal.Decimal
		var err error
		if cur == "" {
			_, err = domain.ParseDecimal(it.UnitPrice, field+".unit_price")
		} else {
			price, err = domain.ParseAmount(it.UnitPrice, cur, field+".unit_price")
		}
		_ = invalid.Add(err) // both parsers fail only with a *ValidationError
		lines = append(lines, domain.Item{SKU: sku, Name: name, Quantity: it.Quantity, UnitPrice: price})
	}
	return lines
}

// Get returns one of the customer's orders; another customer's order is
// domain.ErrOrderNotFound, so its existence does not leak.
func (s *Orders) Get(ctx context.Context, customerID, id string) (domain.Order, error) {
	o, err := s.Store.FindByID(ctx, id)
	if err != nil {
		return domain.Order{}, err
	}
	if o.CustomerID != customerID {
		return domain.Order{}, domain.ErrOrderNotFound
	}
	return o, nil
}

// GetWithAttempts is Get plus the order's payment attempts, oldest first.
func (s *Orders) GetWithAttempts(ctx context.Context, customerID, id string) (domain.Order, []domain.Attempt, error) {
	o, err := s.Get(ctx, customerID, id)
	if err != nil {
		return domain.Order{}, nil, err
	}
	attempts, err := s.Attempts.ListByOrder(ctx, id)
	return o, attempts, err
}

// List returns one page of the customer's orders.
func (s *Orders) List(ctx context.Context, f domain.OrderFilter) (domain.OrderPage, error) {
	if f.Status != "" && !f.Status.Valid() {
		return domain.OrderPage{}, &domain.ValidationError{Field: "status", Reason: "unknown order status"}
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
