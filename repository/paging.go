package repository

// The helpers of paged and batched reads: a keyset page continues after
// its cursor, and a page's children are read in one statement.

import (
	"context"

	"gorm.io/gorm"
)

// cursorAt returns the column of the row of model with ID id, the time a
// keyset page continues from; false when no such row has one.
func (db *DB) cursorAt(ctx context.Context, model any, column, id string) (utcTime, bool, error) {
	var at []utcTime
	if err := db.conn(ctx).Model(model).Where("id = ? AND "+column+" IS NOT NULL", id).Limit(1).Pluck(column, &at).Error; err != nil {
		return utcTime{}, false, err
	}
	if len(at) == 0 {
		return utcTime{}, false, nil
	}
	return at[0], true, nil
}

// keysetAfter narrows q to the rows that follow (at, id) in the order
// (column, id), ascending, or precede it when desc. The leading
// "column >= at" ("<=") gives both databases the start of a range on an
// index of (column, id): with the OR alone, SQLite read the walk from its
// beginning on every page, so a walk of n rows cost n²/page reads.
func keysetAfter(q *gorm.DB, column string, at utcTime, id string, desc bool) *gorm.DB {
	if desc {
		return q.Where(column+" <= ? AND ("+column+" < ? OR id < ?)", at, at, id)
	}
	return q.Where(column+" >= ? AND ("+column+" > ? OR id > ?)", at, at, id)
}

// groupedIn loads the rows R whose column is one of values, ordered by
// order, and groups them, converted by conv, by key: one query, the
// batched read of a page's children (an order's attempts, its ledger).
func groupedIn[R any, T any](ctx context.Context, db *DB, column string, values []string, order string, key func(R) string, conv func(R) T) (map[string][]T, error) {
	out := make(map[string][]T, len(values))
	if len(values) == 0 {
		return out, nil
	}
	var rows []R
	if err := db.conn(ctx).Where(column+" IN ?", values).Order(order).Find(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[key(r)] = append(out[key(r)], conv(r))
	}
	return out, nil
}
