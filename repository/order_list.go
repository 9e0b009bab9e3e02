package repository

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// defaultPageSize is the page size when the filter asks for none.
const defaultPageSize = 20

// pageSize clamps a requested page size to 1..domain.MaxPageSize.
func pageSize(limit int) int {
	switch {
	case limit <= 0:
		return defaultPageSize
	case limit > domain.MaxPageSize:
		return domain.MaxPageSize
	}
	return limit
}

// List returns one page of orders matching f, newest first, with their
// items: two queries, or a few more for attempt=. Pages are keyed by ID,
// not offset, so an order created while a client pages is never shown
// twice and none is skipped, and a deep page costs what the first does;
// one extra row is fetched to know whether another page follows. Each
// page is read along an index in the page's order (migration 00028):
//
//   - no window: by ID (UUIDv7 IDs sort by creation time), through the
//     primary key or the customer's or the status's index;
//   - a time window: by created_at, then ID, through orders_created, so
//     the window's first page reads its newest orders and not every order
//     created since (created_at, not the ID's clock, is what the window
//     asks about);
//   - orders with an attempt of a status and no window: from the
//     attempts (listByAttempt).
func (s *OrderStore) List(ctx context.Context, f domain.OrderFilter) (domain.OrderPage, error) {
	limit := pageSize(f.Limit)
	var (
		rows []orderRow
		err  error
	)
	switch {
	case f.Attempt != "" && f.From.IsZero() && f.To.IsZero():
		rows, err = s.listByAttempt(ctx, f, limit+1)
	default:
		rows, err = s.listOrders(ctx, f, limit+1)
	}
	if err != nil {
		return domain.OrderPage{}, fmt.Errorf("list orders: %w", err)
	}
	page := domain.OrderPage{}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = rows[limit-1].ID
	}
	orders, err := s.withItems(ctx, rows)
	if err != nil {
		return domain.OrderPage{}, fmt.Errorf("list orders: %w", err)
	}
	page.Orders = orders
	return page, nil
}

// filtered is the orders matching f's customer, status and window.
func (s *OrderStore) filtered(ctx context.Context, f domain.OrderFilter) *gorm.DB {
	q := s.db.conn(ctx)
	if f.CustomerID != "" {
		q = q.Where("customer_id = ?", f.CustomerID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", string(f.Status))
	}
	if !f.From.IsZero() {
		q = q.Where("created_at >= ?", ts(f.From))
	}
	if !f.To.IsZero() {
		q = q.Where("created_at < ?", ts(f.To))
	}
	return q
}

// listOrders reads at most n orders of f after its cursor, by ID or, in a
// window, by created_at and ID.
func (s *OrderStore) listOrders(ctx context.Context, f domain.OrderFilter, n int) ([]orderRow, error) {
	q := s.filtered(ctx, f)
	if f.Attempt != "" {
		// by payment_attempts_order, for each order of the window the page
		// walks
		q = q.Where("EXISTS (SELECT 1 FROM payment_attempts a WHERE a.order_id = orders.id AND a.status = ?)", string(f.Attempt))
	}
	order := "id DESC"
	if !f.From.IsZero() || !f.To.IsZero() {
		order = "created_at DESC, id DESC"
		if f.Cursor != "" {
			at, ok, err := s.db.cursorAt(ctx, &orderRow{}, "created_at", f.Cursor)
			if err != nil || !ok {
				return nil, err // a cursor no order has: nothing follows it
			}
			q = keysetAfter(q, "created_at", at, f.Cursor, true)
		}
	} else if f.Cursor != "" {
		q = q.Where("id < ?", f.Cursor)
	}
	var rows []orderRow
	err := q.Order(order).Limit(n).Find(&rows).Error
	return rows, err
}

// attemptBatchMax bounds how many order IDs listByAttempt reads from the
// attempts at a time.
const attemptBatchMax = 1000

// listByAttempt reads at most n orders of f after its cursor that have an
// attempt in status f.Attempt, newest first. It walks
// payment_attempts_status_order back from the cursor, a batch of order IDs
// at a time, and keeps those orders that match the rest of f: with no
// other filter the first batch is the page. An EXISTS on the attempts,
// ordered by the orders' ID, is planned as a semi-join of every attempt in
// the status, then a sort of them all.
func (s *OrderStore) listByAttempt(ctx context.Context, f domain.OrderFilter, n int) ([]orderRow, error) {
	var rows []orderRow
	after, batch := f.Cursor, n
	for len(rows) < n {
		q := s.db.conn(ctx).Table("payment_attempts").Where("status = ?", string(f.Attempt))
		if after != "" {
			q = q.Where("order_id < ?", after)
		}
		var ids []string
		if err := q.Distinct("order_id").Order("order_id DESC").Limit(batch).Pluck("order_id", &ids).Error; err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			break
		}
		var found []orderRow
		if err := s.filtered(ctx, f).Where("id IN ?", ids).Order("id DESC").Limit(n - len(rows)).Find(&found).Error; err != nil {
			return nil, err
		}
		rows = append(rows, found...)
		if len(ids) < batch {
			break
		}
		after, batch = ids[len(ids)-1], min(batch*4, attemptBatchMax)
	}
	return rows, nil
}

// paidStatuses are the statuses of an order a charge has paid
// (domain.OrderStatus.WasPaid), for a status IN guard.
var paidStatuses = names(domain.PaidStatuses())

// ListPaidBetween returns orders paid in [from, to) that are paid or since
// refunded, ordered by paid_at then ID, after the order after (none when
// empty), at most limit (100 when limit <= 0), without their items: what
// reconciliation compares with the provider's charges of the same window.
// The pages walk orders_paid_at (paid_at, id), so each reads its own rows
// however many the window holds; the cursor stays a plain order ID, whose
// paid_at is read first.
func (s *OrderStore) ListPaidBetween(ctx context.Context, from, to time.Time, after string, limit int) ([]domain.Order, error) {
	q := s.db.conn(ctx).Where("status IN ? AND paid_at >= ? AND paid_at < ?",
		paidStatuses, ts(from), ts(to))
	if after != "" {
		at, ok, err := s.db.cursorAt(ctx, &orderRow{}, "paid_at", after)
		if err != nil {
			return nil, fmt.Errorf("list orders paid between %v and %v: %w", from, to, err)
		}
		if !ok {
			return nil, fmt.Errorf("list orders paid between %v and %v: the cursor %s is no paid order", from, to, after)
		}
		q = keysetAfter(q, "paid_at", at, after, false)
	}
	var rows []orderRow
	if err := q.Order("paid_at, id").Limit(batchSize(limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list orders paid between %v and %v: %w", from, to, err)
	}
	orders := make([]domain.Order, len(rows))
	for i, r := range rows {
		orders[i] = r.toDomain(nil)
	}
	return orders, nil
}

// ListStuck returns orders still processing whose last change is older than
// olderThan, the longest stuck first, at most limit (100 when limit <= 0),
// with their items: the stuck_processing candidates of reconciliation.
func (s *OrderStore) ListStuck(ctx context.Context, olderThan time.Time, limit int) ([]domain.Order, error) {
	var rows []orderRow
	err := s.db.conn(ctx).Where("status = ? AND updated_at < ?", string(domain.StatusProcessing), ts(olderThan)).
		Order("updated_at, id").Limit(batchSize(limit)).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list stuck orders: %w", err)
	}
	orders, err := s.withItems(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("list stuck orders: %w", err)
	}
	return orders, nil
}

// withItems converts rows to orders, loading all their items in one query
// (none when there are no rows). The result is never nil, so an empty list
// is [] in JSON.
func (s *OrderStore) withItems(ctx context.Context, rows []orderRow) ([]domain.Order, error) {
	orders := make([]domain.Order, 0, len(rows))
	if len(rows) == 0 {
		return orders, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	items, err := s.items(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		orders = append(orders, r.toDomain(items[r.ID]))
	}
	return orders, nil
}
