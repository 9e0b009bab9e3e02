package repository

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/payd/payd/domain"
)

// orderRow is a row of orders. Money is in integer minor units.
type orderRow struct {
	ID            string         `gorm:"column:id"`
	CustomerID    sql.NullString `gorm:"column:customer_id"`
	Creator       string         `gorm:"column:creator"`
	Status        string         `gorm:"column:status"`
	Currency      string         `gorm:"column:currency"`
	AmountMinor   int64          `gorm:"column:amount_minor"`
	RefundedMinor int64          `gorm:"column:refunded_minor"`
	ReservedMinor int64          `gorm:"column:refund_reserved_minor"`
	PayRequestID  sql.NullString `gorm:"column:pay_request_id"`
	CreateRequest sql.NullString `gorm:"column:create_request_id"`
	CreateFP      sql.NullString `gorm:"column:create_fingerprint"`
	Version       int64          `gorm:"column:version"`
	PaidAt        *utcTime       `gorm:"column:paid_at"`
	ExpiresAt     utcTime        `gorm:"column:expires_at"`
	CreatedAt     utcTime        `gorm:"column:created_at"`
	UpdatedAt     utcTime        `gorm:"column:updated_at"`
	Fulfillment   string         `gorm:"column:fulfillment_status"`
	CaptureMethod string         `gorm:"column:capture_method"`
	CaptureBefore *utcTime       `gorm:"column:capture_before"`
	CapturedMinor int64          `gorm:"column:captured_minor"`
	HoldAction    sql.NullString `gorm:"column:hold_action"`
}

// TableName tells GORM the table.
func (orderRow) TableName() string { return "orders" }

// orderColumns are the columns of orderRow (of orders o), in the order of
// fields: FindByID, on every pay, scans them by hand.
const orderColumns = `o.id, o.customer_id, o.creator, o.status, o.currency, o.amount_minor, o.refunded_minor, o.refund_reserved_minor, o.pay_request_id,
	o.create_request_id, o.create_fingerprint, o.version, o.paid_at, o.expires_at, o.created_at, o.updated_at, o.fulfillment_status,
	o.capture_method, o.capture_before, o.captured_minor, o.hold_action`

// fields are the scan destinations of orderColumns.
func (r *orderRow) fields() []any {
	return []any{&r.ID, &r.CustomerID, &r.Creator, &r.Status, &r.Currency, &r.AmountMinor, &r.RefundedMinor, &r.ReservedMinor, &r.PayRequestID,
		&r.CreateRequest, &r.CreateFP, &r.Version, &r.PaidAt, &r.ExpiresAt, &r.CreatedAt, &r.UpdatedAt, &r.Fulfillment,
		&r.CaptureMethod, &r.CaptureBefore, &r.CapturedMinor, &r.HoldAction}
}

// itemRow is a row of order_items; position keeps the items in order.
type itemRow struct {
	OrderID        string `gorm:"column:order_id"`
	Position       int    `gorm:"column:position"`
	SKU            string `gorm:"column:sku"`
	Name           string `gorm:"column:name"`
	Quantity       int64  `gorm:"column:quantity"`
	UnitPriceMinor int64  `gorm:"column:unit_price_minor"`
	StockTaken     int64  `gorm:"column:stock_taken"`
	Shipped        int64  `gorm:"column:shipped"`
}

// TableName tells GORM the table.
func (itemRow) TableName() string { return "order_items" }

// orderFromDomain converts o and its items to rows, refusing amounts that
// are not exact in o's currency.
func orderFromDomain(o domain.Order) (orderRow, []itemRow, error) {
	amount, err := toMinor(o.Amount, o.Currency, "amount")
	if err != nil {
		return orderRow{}, nil, err
	}
	refunded, err := toMinor(o.RefundedAmount, o.Currency, "refunded amount")
	if err != nil {
		return orderRow{}, nil, err
	}
	reserved, err := toMinor(o.RefundPending, o.Currency, "refund pending")
	if err != nil {
		return orderRow{}, nil, err
	}
	if !o.Status.Valid() {
		return orderRow{}, nil, fmt.Errorf("order status %q is not valid", o.Status)
	}
	fulfillment := o.Fulfillment
	if fulfillment == "" {
		fulfillment = domain.FulfillmentUnfulfilled
	}
	if !fulfillment.Valid() {
		return orderRow{}, nil, fmt.Errorf("order fulfillment status %q is not valid", o.Fulfillment)
	}
	capture := cmp.Or(o.CaptureMethod, domain.CaptureAutomatic)
	if !capture.Valid() {
		return orderRow{}, nil, fmt.Errorf("order capture method %q is not valid", o.CaptureMethod)
	}
	captured, err := toMinor(o.CapturedAmount, o.Currency, "captured amount")
	if err != nil {
		return orderRow{}, nil, err
	}
	row := orderRow{
		ID: o.ID, CustomerID: nullString(o.CustomerID), Creator: o.CreatedBy(), Status: string(o.Status), Currency: string(o.Currency),
		AmountMinor: amount, RefundedMinor: refunded, ReservedMinor: reserved, PayRequestID: nullString(o.PayRequestID),
		CreateRequest: nullString(o.CreateRequestID), CreateFP: nullString(o.CreateFingerprint), Version: max(o.Version, domain.CreatedVersion), PaidAt: tsPtr(o.PaidAt),
		ExpiresAt: ts(o.ExpiresAt), CreatedAt: ts(o.CreatedAt), UpdatedAt: ts(o.UpdatedAt), Fulfillment: string(fulfillment),
		CaptureMethod: string(capture), CaptureBefore: tsPtr(o.CaptureBefore), CapturedMinor: captured, HoldAction: nullString(o.HoldAction),
	}
	items := make([]itemRow, len(o.Items))
	for i, it := range o.Items {
		price, err := toMinor(it.UnitPrice, o.Currency, fmt.Sprintf("item %d unit price", i))
		if err != nil {
			return orderRow{}, nil, err
		}
		items[i] = itemRow{OrderID: o.ID, Position: i, SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitPriceMinor: price, StockTaken: it.StockTaken, Shipped: it.Shipped}
	}
	return row, items, nil
}

// toDomain converts the row and its items (in position order) to an order.
func (r orderRow) toDomain(items []itemRow) domain.Order {
	c := domain.Currency(r.Currency)
	o := domain.Order{
		ID: r.ID, CustomerID: r.CustomerID.String, Creator: r.Creator, Status: domain.OrderStatus(r.Status), Currency: c,
		Amount:         domain.FromMinorUnits(r.AmountMinor, c),
		RefundedAmount: domain.FromMinorUnits(r.RefundedMinor, c),
		RefundPending:  domain.FromMinorUnits(r.ReservedMinor, c),
		PayRequestID:   r.PayRequestID.String, CreateRequestID: r.CreateRequest.String, Version: r.Version, PaidAt: timePtr(r.PaidAt),
		ExpiresAt: r.ExpiresAt.time(), CreatedAt: r.CreatedAt.time(), UpdatedAt: r.UpdatedAt.time(),
		CreateFingerprint: r.CreateFP.String, Items: make([]domain.Item, 0, len(items)),
		Fulfillment:   domain.FulfillmentStatus(r.Fulfillment),
		CaptureMethod: domain.CaptureMethod(r.CaptureMethod), CaptureBefore: timePtr(r.CaptureBefore),
		CapturedAmount: domain.FromMinorUnits(r.CapturedMinor, c), HoldAction: r.HoldAction.String,
	}
	for _, it := range items {
		o.Items = append(o.Items, domain.Item{
			SKU: it.SKU, Name: it.Name, Quantity: it.Quantity,
			UnitPrice: domain.FromMinorUnits(it.UnitPriceMinor, c), StockTaken: it.StockTaken, Shipped: it.Shipped,
		})
	}
	return o
}

// nullString stores an empty string as NULL.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// OrderStore keeps orders and their items, and moves orders through the
// state machine (see order_transitions.go). It remembers the orders it
// created last (TakeCreated).
type OrderStore struct {
	db      *DB
	created *createdOrders
}

// NewOrderStore returns an OrderStore on db.
func NewOrderStore(db *DB) *OrderStore {
	return &OrderStore{db: db, created: newCreatedOrders(createdCapacity)}
}

// Create stores o with its items, and takes from the products' counted
// stock what its lines take (domain.StockToTake), in the caller's
// transaction or in one of its own: an order never exists without its
// items, nor stock taken without its order, nor the reverse. Two INSERTs
// (all items in one), then one guarded UPDATE per product, in SKU order:
// a product whose stock cannot take the quantity matches no row, and the
// whole creation is undone with a *domain.OutOfStockError naming it. A
// creation under a key its creator used before is domain.ErrOrderExists
// (found by the unique index before any stock is touched), so a replayed
// creation takes stock once. ADR 0059.
func (s *OrderStore) Create(ctx context.Context, o domain.Order) error {
	row, items, err := orderFromDomain(o)
	if err != nil {
		return fmt.Errorf("create order %s: %w", o.ID, err)
	}
	err = s.db.inTx(ctx, func(ctx context.Context) error {
		if err := s.db.create(ctx, &row); err != nil {
			if violatesIndex(err, "orders", "create_request_id") {
				return domain.ErrOrderExists
			}
			return err
		}
		if len(items) > 0 {
			if err := s.db.create(ctx, &items); err != nil {
				return err
			}
		}
		if err := s.takeStock(ctx, o); err != nil {
			return err
		}
		fault("order_stock_taken")
		return nil
	})
	if err != nil {
		return fmt.Errorf("create order %s: %w", o.ID, err)
	}
	// Remembered even inside a caller's transaction that may yet roll
	// back: nobody learns the ID of an order that was never committed,
	// and a claim of it would match no row.
	s.created.remember(row, items)
	return nil
}

// TakeCreated returns the order id as this store created it, once, if it
// still remembers it: what FindByID would have returned right after the
// creation. The order may have changed since; only a claim guarded by its
// version (Claim, PayBatch.Claim) may act on it (ADR 0034).
func (s *OrderStore) TakeCreated(id string) (domain.Order, bool) { return s.created.take(id) }

// FindByCreateRequest returns the order creator (its idempotency scope:
// a customer's, or the merchant's) created under requestID, or
// domain.ErrOrderNotFound.
func (s *OrderStore) FindByCreateRequest(ctx context.Context, creator, requestID string) (domain.Order, error) {
	var id string
	err := s.db.conn(ctx).Model(&orderRow{}).Select("id").
		Where("creator = ? AND create_request_id = ?", creator, requestID).Limit(1).Scan(&id).Error
	if err != nil {
		return domain.Order{}, fmt.Errorf("find order created by %s: %w", requestID, err)
	}
	if id == "" {
		return domain.Order{}, domain.ErrOrderNotFound
	}
	return s.FindByID(ctx, id)
}

// FindByID returns the order with its items, or domain.ErrOrderNotFound.
func (s *OrderStore) FindByID(ctx context.Context, id string) (domain.Order, error) {
	// One statement, not two: the pay path reads the order once and a
	// round trip saved there is saved on every payment. Scanned by hand, not
	// by GORM's reflection, for the same reason. No ORDER BY: sorting the
	// joined table's rows made MariaDB build a temporary table and filesort
	// it on every read (EXPLAIN: "Using temporary; Using filesort"), which
	// cost it more CPU than the rest of the read; the few items are sorted
	// here instead.
	rows, err := s.db.query(ctx, `SELECT `+orderColumns+`, i.position, i.sku, i.name, i.quantity, i.unit_price_minor, i.stock_taken, i.shipped
	  FROM orders o LEFT JOIN order_items i ON i.order_id = o.id
	 WHERE o.id = ?`, id)
	if err != nil {
		return domain.Order{}, fmt.Errorf("find order %s: %w", id, err)
	}
	defer rows.Close()
	var o orderRow
	items, found := []itemRow{}, false
	for rows.Next() {
		var pos, qty, price, taken, shipped sql.NullInt64
		var sku, name sql.NullString
		if err := rows.Scan(append(o.fields(), &pos, &sku, &name, &qty, &price, &taken, &shipped)...); err != nil {
			return domain.Order{}, fmt.Errorf("find order %s: %w", id, classify(err))
		}
		found = true
		if pos.Valid {
			items = append(items, itemRow{OrderID: id, Position: int(pos.Int64), SKU: sku.String,
				Name: name.String, Quantity: qty.Int64, UnitPriceMinor: price.Int64, StockTaken: taken.Int64, Shipped: shipped.Int64})
		}
	}
	if err := rows.Err(); err != nil {
		return domain.Order{}, fmt.Errorf("find order %s: %w", id, classify(err))
	}
	if !found {
		return domain.Order{}, fmt.Errorf("find order %s: %w", id, domain.ErrOrderNotFound)
	}
	slices.SortFunc(items, func(a, b itemRow) int { return cmp.Compare(a.Position, b.Position) })
	return o.toDomain(items), nil
}

// FindByIDs returns the orders ids that exist, with their items, by ID:
// two queries whatever their number (reconciliation decides a page of
// the provider's charges with it).
func (s *OrderStore) FindByIDs(ctx context.Context, ids []string) (map[string]domain.Order, error) {
	out := make(map[string]domain.Order, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []orderRow
	if err := s.db.conn(ctx).Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("find %d orders: %w", len(ids), err)
	}
	orders, err := s.withItems(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("find %d orders: %w", len(ids), err)
	}
	for _, o := range orders {
		out[o.ID] = o
	}
	return out, nil
}

// items loads the items of the given orders in one query, by order ID.
func (s *OrderStore) items(ctx context.Context, ids []string) (map[string][]itemRow, error) {
	var rows []itemRow
	err := s.db.conn(ctx).Where("order_id IN ?", ids).Order("order_id, position").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("load items: %w", err)
	}
	byOrder := make(map[string][]itemRow, len(ids))
	for _, r := range rows {
		byOrder[r.OrderID] = append(byOrder[r.OrderID], r)
	}
	return byOrder, nil
}
