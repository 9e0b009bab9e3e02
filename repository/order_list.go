package repository

import (
	"context"
	"fmt"

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
	page := domain.OrderPage{Orders: []domain.Order{}}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = rows[limit-1].ID
	}
	if len(rows) == 0 {
		return page, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	items, err := s.items(ctx, ids)
	if err != nil {
		return domain.OrderPage{}, fmt.Errorf("list orders: %w", err)
	}
	for _, r := range rows {
		page.Orders = append(page.Orders, r.toDomain(items[r.ID]))
	}
	return page, nil
}
