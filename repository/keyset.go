package repository

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
