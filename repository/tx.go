package repository

import (
	"context"

	"gorm.io/gorm"
)

// txKey marks a transaction in a context. It carries the DB it belongs to,
// so a transaction on one database (payd's) is never picked up by stores of
// another (the sandbox's) that see the same context.
type txKey struct{ db *DB }

// conn returns the GORM handle for the statements GORM builds (models and
// filtered lists, docs/adr/0033): the transaction in ctx if there is one
// for this database, else the pool; bound to ctx's values but not to its
// cancellation (detached). Statements payd writes out go on the executor
// (DB.on), which is the same transaction or pool.
func (db *DB) conn(ctx context.Context) *gorm.DB {
	if tx, ok := ctx.Value(txKey{db}).(*gorm.DB); ok {
		return tx.WithContext(detached(ctx))
	}
	return db.gorm.WithContext(detached(ctx))
}

// inTx reports whether ctx carries a transaction on db.
func inTx(ctx context.Context, db *DB) bool {
	_, ok := ctx.Value(txKey{db}).(*gorm.DB)
	return ok
}

// inTx runs fn in a transaction, or in the caller's if ctx already has one:
// nested calls join the outer transaction rather than opening savepoints,
// so the outermost InTx alone decides commit or rollback — and alone runs
// fn again when the database undid the transaction for a conflict (a
// deadlock, Galera's certification failure at COMMIT, SQLite busy; see
// retrying). fn must therefore be safe to run again from its start.
func (db *DB) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if inTx(ctx, db) {
		return fn(ctx)
	}
	// No isolation level here: MySQL connections run at READ COMMITTED
	// from the start (connectMySQL), so BEGIN needs no SET before it.
	return db.retrying(ctx, func() error {
		return db.gorm.WithContext(detached(ctx)).Transaction(func(tx *gorm.DB) error {
			if err := fn(context.WithValue(ctx, txKey{db}, tx)); err != nil {
				return err
			}
			return db.injected("commit") // a test's stand-in for a failed COMMIT: rolls back
		})
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
//
// When the database undoes the transaction for a conflict (MySQL 1213 or
// 1205, which Galera reports even at COMMIT after an UPDATE matched its
// row; SQLite busy), InTx runs fn again from the start, a few times with
// jittered backoff (docs/adr/0015-retry-policy.md): fn must reset whatever
// it assigns outside itself and do nothing but database work. A conflict
// that outlasts the retries is domain.ErrUnavailable.
func (t *Transactor) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return t.db.inTx(ctx, fn)
}
