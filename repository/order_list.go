package repository

import (
	"context"
	"fmt"
	"time"

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
// items: two queries. Pages are keyed by ID, not offset (UUIDv7 IDs sort by
// creation time), so an order created while a client pages is never shown
// twice and none is skipped; one extra row is fetched to know whether
// another page follows.
func (s *OrderStore) List(ctx context.Context, f domain.OrderFilter) (domain.OrderPage, error) {
	limit := pageSize(f.Limit)
	q := s.db.conn(ctx)
	if f.CustomerID != "" {
		q = q.Where("customer_id = ?", f.CustomerID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", string(f.Status))
	}
	if f.Attempt != "" {
		// by payment_attempts_order, for each order the page walks
		q = q.Where("EXISTS (SELECT 1 FROM payment_attempts a WHERE a.order_id = orders.id AND a.status = ?)", string(f.Attempt))
	}
	if !f.From.IsZero() {
		q = q.Where("created_at >= ?", ts(f.From))
	}
	if !f.To.IsZero() {
		q = q.Where("created_at < ?", ts(f.To))
	}
	if f.Cursor != "" {
		q = q.Where("id < ?", f.Cursor)
	}
	var rows []orderRow
	if err := q.Order("id DESC").Limit(limit + 1).Find(&rows).Error; err != nil {
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

// paidStatuses are the statuses of an order a charge has paid
// (domain.OrderStatus.WasPaid), for a status IN guard.
var paidStatuses = names(domain.PaidStatuses())

// ListPaidBetween returns orders paid in [from, to) that are paid or since
// refunded, ordered by ID, after the ID cursor after (none when empty), at
// most limit (100 when limit <= 0), with their items: what reconciliation
// compares with the provider's charges of the same window. Paging by ID,
// not by paid_at, keeps the cursor a plain order ID.
func (s *OrderStore) ListPaidBetween(ctx context.Context, from, to time.Time, after string, limit int) ([]domain.Order, error) {
	q := s.db.conn(ctx).Where("status IN ? AND paid_at >= ? AND paid_at < ?",
		paidStatuses, ts(from), ts(to))
	if after != "" {
		q = q.Where("id > ?", after)
	}
	var rows []orderRow
	if err := q.Order("id").Limit(batchSize(limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list orders paid between %v and %v: %w", from, to, err)
	}
	orders, err := s.withItems(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("list orders paid between %v and %v: %w", from, to, err)
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
