package repository

import (
	"context"

	"gorm.io/gorm"
)

// txKey marks a transaction in a context. It carries the DB it belongs to,
// so a transaction on one database (payd's) is never picked up by stores of
// another (the sandbox's) that see the same context.
type txKey struct{ db *DB }

// conn returns the handle a store method runs on: the transaction in ctx if
// there is one for this database, else the pool; always bound to ctx.
func (db *DB) conn(ctx context.Context) *gorm.DB {
	if tx, ok := ctx.Value(txKey{db}).(*gorm.DB); ok {
		return tx.WithContext(ctx)
	}
	return db.gorm.WithContext(ctx)
}

// inTx runs fn in a transaction, or in the caller's if ctx already has one:
// nested calls join the outer transaction rather than opening savepoints,
// so the outermost InTx alone decides commit or rollback.
func (db *DB) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if _, ok := ctx.Value(txKey{db}).(*gorm.DB); ok {
		return fn(ctx)
	}
	// No isolation level here: MySQL connections run at READ COMMITTED
	// from the start (connectMySQL), so BEGIN needs no SET before it.
	return db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(context.WithValue(ctx, txKey{db}, tx))
	})
}

// Transactor runs service steps in one database transaction.
type Transactor struct{ db *DB }

// NewTransactor returns a Transactor on db.
func NewTransactor(db *DB) *Transactor { return &Transactor{db: db} }

// InTx runs fn in one transaction: store calls made with the context fn
// receives take part in it; it commits when fn returns nil and rolls back
// when fn fails or panics. Called inside another InTx on the same database,
// fn joins the outer transaction. On MySQL it runs at READ COMMITTED (see
// connectMySQL). On SQLite it holds the database's write lock from BEGIN
// (BEGIN IMMEDIATE) and so is serializable: keep fn short, and never call
// the provider inside it.
func (t *Transactor) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return t.db.inTx(ctx, fn)
}
