package repository

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// The operators' lists follow the order list's rules (List in
// order_list.go): newest first by ID — every ID is a UUIDv7, so ID order is
// creation order — a cursor that is the last ID of the previous page, and
// one extra row fetched to know whether another page follows. A row added
// while an operator pages is never shown twice and none is skipped.

// keyset applies the cursor and the page size to q and returns the page's
// size; q then fetches one row more than that.
func keyset(q *gorm.DB, cursor string, limit int) (*gorm.DB, int) {
	n := pageSize(limit)
	if cursor != "" {
		q = q.Where("id < ?", cursor)
	}
	return q.Order("id DESC").Limit(n + 1), n
}

// List returns one page of runs, newest first, without their findings
// (GET /v1/admin/reconciliations/{id} has those): one query.
func (s *RunStore) List(ctx context.Context, f domain.RunFilter) (domain.RunPage, error) {
	q, n := keyset(s.db.conn(ctx), f.Cursor, f.Limit)
	var rows []runRow
	if err := q.Find(&rows).Error; err != nil {
		return domain.RunPage{}, fmt.Errorf("list reconciliation runs: %w", err)
	}
	page := domain.RunPage{Runs: make([]domain.ReconciliationRun, 0, len(rows))}
	if len(rows) > n {
		rows = rows[:n]
		page.NextCursor = rows[n-1].ID
	}
	for _, r := range rows {
		page.Runs = append(page.Runs, r.toDomain(nil))
	}
	return page, nil
}

// List returns one page of discrepancies matching f, newest first, from
// every source: they all live in one table.
func (s *DiscrepancyStore) List(ctx context.Context, f domain.DiscrepancyFilter) (domain.DiscrepancyPage, error) {
	q := s.db.conn(ctx)
	if f.Status != "" {
		q = q.Where("status = ?", string(f.Status))
	}
	if f.Type != "" {
		q = q.Where("type = ?", string(f.Type))
	}
	if f.OrderID != "" {
		q = q.Where("order_id = ?", f.OrderID)
	}
	q, n := keyset(q, f.Cursor, f.Limit)
	var rows []discrepancyRow
	if err := q.Find(&rows).Error; err != nil {
		return domain.DiscrepancyPage{}, fmt.Errorf("list discrepancies: %w", err)
	}
	page := domain.DiscrepancyPage{}
	if len(rows) > n {
		rows = rows[:n]
		page.NextCursor = rows[n-1].ID
	}
	page.Discrepancies = discrepanciesToDomain(rows)
	return page, nil
}

// List returns one page of customers, newest first; f.Email, already
// normalized, selects at most one.
func (s *CustomerStore) List(ctx context.Context, f domain.CustomerFilter) (domain.CustomerPage, error) {
	q := s.db.conn(ctx)
	if f.Email != "" {
		q = q.Where("email = ?", f.Email)
	}
	q, n := keyset(q, f.Cursor, f.Limit)
	var rows []customerRow
	if err := q.Find(&rows).Error; err != nil {
		return domain.CustomerPage{}, fmt.Errorf("list customers: %w", err)
	}
	page := domain.CustomerPage{Customers: make([]domain.Customer, 0, len(rows))}
	if len(rows) > n {
		rows = rows[:n]
		page.NextCursor = rows[n-1].ID
	}
	for _, r := range rows {
		page.Customers = append(page.Customers, r.toDomain())
	}
	return page, nil
}
